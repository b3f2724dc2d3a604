package worktree

import (
	"cmp"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// ChangeType says what a command did to a file.
type ChangeType string

const (
	Created ChangeType = "created"
	Edited  ChangeType = "edited"
	Deleted ChangeType = "deleted"
)

// Change is one file a command created, edited or deleted.
type Change struct {
	Path string // relative to the work tree root, slash-separated
	Type ChangeType
}

// Snapshot is the state of a work tree's changed files: every path git
// status reports (tracked and changed, staged, or untracked; never ignored)
// with the content it had. Clean paths are not in it: their content is
// HEAD's. Take one before and one after each command and DiffSnapshots them.
//
// Content is hashed, never judged by size or mtime, so a file rewritten
// within the same second with the same size is still seen to change.
type Snapshot struct {
	dir     string
	head    string // HEAD commit; "" when unborn
	idLen   int    // hex length of the repository's object ids: 40 (SHA-1) or 64 (SHA-256)
	entries map[string]entry
}

// Dir returns the work tree root the snapshot was taken of.
func (s Snapshot) Dir() string { return s.dir }

// Head returns the HEAD commit at the snapshot, "" when the branch is unborn.
func (s Snapshot) Head() string { return s.head }

// Len returns how many changed paths the snapshot holds.
func (s Snapshot) Len() int { return len(s.entries) }

// entry is one path git status reported.
type entry struct {
	untracked bool   // reported as "?"
	inHead    bool   // the path is a file, link or submodule in HEAD
	headMode  string // its mode in HEAD ("100644", "100755", "120000", "160000")
	headBlob  string // its object id in HEAD
	cur       version
}

// headVersion is what the path holds when it is clean: HEAD's content.
func (e entry) headVersion() version {
	return version{exists: e.inHead, mode: e.headMode, blob: e.headBlob}
}

// version is the content of one path at one moment. Work-tree content is
// known by its hash (known); a clean path's content only by HEAD's mode and
// object id, which are compared with the object id of the bytes a work-tree
// file would have as a blob.
type version struct {
	exists bool
	known  bool   // sum holds the work tree's content
	sum    string // "<mode>:<sha256 hex>", "link:<target>", "dir", "submodule:<commit>:<flags>"
	mode   string // git mode
	blob   string // git object id of the content; "" when not computable
}

func (a version) equal(b version) bool {
	if a.exists != b.exists {
		return false
	}
	if !a.exists {
		return true
	}
	if a.known && b.known {
		return a.sum == b.sum
	}
	return sameMode(a.mode, b.mode) && a.blob != "" && a.blob == b.blob
}

// sameMode compares git modes; Windows has no executable bit to tell.
func sameMode(a, b string) bool {
	if runtime.GOOS == "windows" {
		a, b = strings.Replace(a, "100755", "100644", 1), strings.Replace(b, "100755", "100644", 1)
	}
	return a == b
}

const nullMode = "000000"

// TakeSnapshot records the changed files of the work tree containing dir
// (cheapest when dir is its root). It runs one `git status` without
// optional locks, so it never makes a git command of the task fail on
// index.lock, plus one `git rev-parse` per changed submodule, and hashes
// every changed file.
func TakeSnapshot(ctx context.Context, dir string) (Snapshot, error) {
	root, err := filepath.Abs(dir)
	if err != nil {
		return Snapshot{}, fmt.Errorf("snapshot: %w", err)
	}
	if _, err := os.Lstat(filepath.Join(root, ".git")); err == nil {
		if resolved, err := filepath.EvalSymlinks(root); err == nil {
			root = resolved // as toplevel would give it, so snapshots compare
		}
	} else if root, err = toplevel(ctx, dir); err != nil {
		return Snapshot{}, fmt.Errorf("snapshot: %w", err)
	}
	out, err := runGit(ctx, root, "--no-optional-locks", "status", "--porcelain=v2", "--branch", "--no-ahead-behind",
		"-z", "--untracked-files=all", "--no-renames")
	if err != nil {
		if notFound(err) || exitCode(err) == 128 {
			if _, terr := toplevel(ctx, root); errors.Is(terr, ErrNotRepo) {
				return Snapshot{}, fmt.Errorf("snapshot: %w", terr)
			}
		}
		return Snapshot{}, fmt.Errorf("snapshot: %w", err)
	}
	s, subs, err := parseStatus(root, out)
	if err != nil {
		return Snapshot{}, fmt.Errorf("snapshot %s: %w", root, err)
	}
	for p, e := range s.entries {
		if e.cur, err = readVersion(ctx, root, p, subs[p], e.untracked, s.idLen); err != nil {
			return Snapshot{}, fmt.Errorf("snapshot %s: %w", root, err)
		}
		s.entries[p] = e
	}
	return s, nil
}

// parseStatus parses `git status --porcelain=v2 --branch -z`. It returns the
// snapshot without work-tree content, and the submodule field ("S<c><m><u>")
// of the paths that are submodules.
func parseStatus(root string, out []byte) (Snapshot, map[string]string, error) {
	s := Snapshot{dir: root, entries: make(map[string]entry)}
	subs := map[string]string{}
	fields := strings.Split(string(out), "\x00")
	for i := 0; i < len(fields); i++ {
		f := fields[i]
		if f == "" {
			continue
		}
		var (
			path, sub, mode, blob string
			tracked               bool
		)
		switch f[0] {
		case '#':
			if oid, ok := strings.CutPrefix(f, "# branch.oid "); ok && oid != "(initial)" {
				s.head = oid
				s.idLen = len(oid)
			}
			continue
		case '?':
			path = strings.TrimPrefix(f, "? ")
		case '!':
			continue // only with --ignored, which we never ask for
		case '1', '2':
			// 1 XY sub mH mI mW hH hI path
			// 2 XY sub mH mI mW hH hI Xscore path, then origPath as its own field
			n := 9
			if f[0] == '2' {
				n = 10
				i++ // origPath: with --no-renames there is none, but be safe
			}
			parts := strings.SplitN(f, " ", n)
			if len(parts) != n {
				return s, nil, fmt.Errorf("unexpected git status record %q", f)
			}
			sub, mode, blob, path, tracked = parts[2], parts[3], parts[6], parts[n-1], true
		case 'u':
			// u XY sub m1 m2 m3 mW h1 h2 h3 path; stage 2 is ours, i.e. HEAD's
			parts := strings.SplitN(f, " ", 11)
			if len(parts) != 11 {
				return s, nil, fmt.Errorf("unexpected git status record %q", f)
			}
			sub, mode, blob, path, tracked = parts[2], parts[4], parts[8], parts[10], true
		default:
			return s, nil, fmt.Errorf("unexpected git status record %q", f)
		}
		path = strings.TrimSuffix(path, "/") // an untracked nested repository
		e := s.entries[path]
		if tracked {
			e.inHead = mode != nullMode
			if e.inHead {
				e.headMode, e.headBlob = mode, blob
				if s.idLen == 0 {
					s.idLen = len(blob)
				}
			}
			if strings.HasPrefix(sub, "S") {
				subs[path] = sub
			}
		} else {
			e.untracked = true
		}
		s.entries[path] = e
	}
	return s, subs, nil
}

// readVersion reads the work tree's content of path (slash-separated,
// relative to root). sub is the status submodule field if path is a
// submodule; untracked says git reported path as untracked, where a
// directory is a nested repository. A directory where a tracked file was is
// the file deleted (its contents are entries of their own).
func readVersion(ctx context.Context, root, path, sub string, untracked bool, idLen int) (version, error) {
	abs := filepath.Join(root, filepath.FromSlash(path))
	fi, err := os.Lstat(abs)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return version{known: true, sum: "absent"}, nil
		}
		return version{}, err
	}
	v := version{exists: true, known: true}
	switch mt := fi.Mode().Type(); {
	case mt == fs.ModeSymlink:
		target, err := os.Readlink(abs)
		if err != nil {
			return version{}, err
		}
		v.mode, v.sum = "120000", "link:"+target
		v.blob = objectID(idLen, []byte(target))
	case mt == fs.ModeDir:
		if sub == "" {
			if !untracked {
				return version{known: true, sum: "absent"}, nil
			}
			v.mode, v.sum = "040000", "dir" // an untracked nested repository: one opaque entry
			return v, nil
		}
		commit, err := resolveCommit(ctx, abs, "HEAD")
		if err != nil {
			return version{}, fmt.Errorf("submodule %s: %w", path, err)
		}
		flags := sub[2:] // <m><u>: modified, untracked content
		v.mode, v.sum = "160000", "submodule:"+commit+":"+flags
		if flags == ".." {
			v.blob = commit
		}
	case mt == 0:
		v.mode = "100644"
		if fi.Mode().Perm()&0o100 != 0 {
			v.mode = "100755"
		}
		sum, blob, err := hashFile(abs, fi.Size(), idLen)
		if errors.Is(err, fs.ErrNotExist) { // gone between Lstat and Open
			return version{known: true, sum: "absent"}, nil
		}
		if errors.Is(err, fs.ErrPermission) {
			// Unreadable (chmod 000): judge it by size and mtime rather than
			// fail the whole snapshot.
			v.sum = fmt.Sprintf("%s:unreadable:%d:%d", v.mode, fi.Size(), fi.ModTime().UnixNano())
			return v, nil
		}
		if err != nil {
			return version{}, err
		}
		v.sum, v.blob = v.mode+":"+sum, blob
	default: // a FIFO, socket or device: never opened (a FIFO would block)
		v.mode, v.sum = "special", "special:"+mt.String()
	}
	return v, nil
}

// hashFile returns the SHA-256 of the file's bytes and the git object id
// they would have as a blob (without git's clean filters).
func hashFile(path string, size int64, idLen int) (sum, blob string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	h := sha256.New()
	obj := newObjectHash(idLen)
	fmt.Fprintf(obj, "blob %d\x00", size)
	buf := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(buf)
	n, err := io.CopyBuffer(io.MultiWriter(h, obj), struct{ io.Reader }{f}, *buf) // hide File.WriteTo, which would not use buf
	if err != nil {
		return "", "", err
	}
	sum = hex.EncodeToString(h.Sum(nil))
	if n == size { // else it changed while we read: the sum is still the bytes we saw
		blob = hex.EncodeToString(obj.Sum(nil))
	}
	return sum, blob, nil
}

// copyBufs holds hashFile's read buffers (io.Copy would allocate 32 KiB a file).
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func newObjectHash(idLen int) hash.Hash {
	if idLen == 64 {
		return sha256.New()
	}
	return sha1.New()
}

func objectID(idLen int, content []byte) string {
	h := newObjectHash(idLen)
	h.Write([]byte("blob " + strconv.Itoa(len(content)) + "\x00"))
	h.Write(content)
	return hex.EncodeToString(h.Sum(nil))
}

// DiffSnapshots returns what changed between two snapshots of the same work tree,
// sorted by path. Each path either snapshot holds is compared as it was
// before and after: a path a snapshot does not hold had HEAD's content.
//
//   - absent before, present after: created (a new untracked or added file,
//     or a tracked file deleted before and restored since);
//   - present before, absent after: deleted;
//   - present in both with different content: edited (also a changed file
//     restored to HEAD, a file edited again while already dirty, a mode
//     change);
//   - otherwise nothing: an untouched dirty file, a file created and removed
//     within the command, a change only to the index.
//
// Ignored files are never reported; neither are files inside an untracked
// nested repository or a submodule (the submodule itself is one path).
//
// DiffSnapshots assumes HEAD did not move between the snapshots. When the command
// may have committed, checked out or reset, use Changes.
func DiffSnapshots(before, after Snapshot) []Change {
	return diff(before, after, nil, nil)
}

// Changes is DiffSnapshots that also sees through HEAD moving between the
// snapshots (a commit, checkout, reset or rebase by the command): files
// changed and committed within the command are reported, and files only
// committed are not. When HEAD did not move it is DiffSnapshots and runs nothing.
func Changes(ctx context.Context, before, after Snapshot) ([]Change, error) {
	if before.head == after.head {
		return DiffSnapshots(before, after), nil
	}
	if before.dir != after.dir {
		return nil, fmt.Errorf("changes: snapshots of different work trees: %s and %s", before.dir, after.dir)
	}
	idLen := cmp.Or(after.idLen, before.idLen, 40)
	from, to := cmp.Or(before.head, emptyTree(idLen)), cmp.Or(after.head, emptyTree(idLen))
	out, err := runGit(ctx, after.dir, "diff-tree", "-r", "-z", "--no-renames", from, to)
	if err != nil {
		return nil, fmt.Errorf("changes: %w", err)
	}
	moved, err := parseRawDiff(out)
	if err != nil {
		return nil, fmt.Errorf("changes: %w", err)
	}
	reread := func(path string) (version, error) {
		return readVersion(ctx, after.dir, path, "", false, idLen)
	}
	changes := diff(before, after, moved, reread)
	return changes, ctx.Err()
}

// treeChange is a path that differs between two commits.
type treeChange struct{ old, new version }

// parseRawDiff parses `git diff-tree -r -z` output:
// ":<old mode> <new mode> <old id> <new id> <status>" NUL <path> NUL.
func parseRawDiff(out []byte) (map[string]treeChange, error) {
	moved := map[string]treeChange{}
	fields := strings.Split(string(out), "\x00")
	for i := 0; i+1 < len(fields); i += 2 {
		meta, path := fields[i], fields[i+1]
		parts := strings.Fields(strings.TrimPrefix(meta, ":"))
		if !strings.HasPrefix(meta, ":") || len(parts) != 5 {
			return nil, fmt.Errorf("unexpected git diff-tree record %q", meta)
		}
		moved[path] = treeChange{
			old: version{exists: parts[0] != nullMode, mode: parts[0], blob: parts[2]},
			new: version{exists: parts[1] != nullMode, mode: parts[1], blob: parts[3]},
		}
	}
	return moved, nil
}

// diff compares before and after path by path. moved holds the paths that
// differ between the snapshots' HEADs (nil when HEAD did not move); reread,
// when set, reads a path's current work-tree content to settle a
// comparison that object ids alone cannot (git's filters may make a file's
// bytes differ from its blob).
func diff(before, after Snapshot, moved map[string]treeChange, reread func(string) (version, error)) []Change {
	paths := make([]string, 0, len(before.entries)+len(after.entries)+len(moved))
	for p := range before.entries {
		paths = append(paths, p)
	}
	for p := range after.entries {
		if _, ok := before.entries[p]; !ok {
			paths = append(paths, p)
		}
	}
	for p := range moved {
		_, inB := before.entries[p]
		_, inA := after.entries[p]
		if !inB && !inA {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths)

	var changes []Change
	for _, p := range paths {
		eb, inB := before.entries[p]
		ea, inA := after.entries[p]
		m, isMoved := moved[p]
		var bv, av version
		switch {
		case inB:
			bv = eb.cur
		case isMoved:
			bv = m.old
		default:
			bv = ea.headVersion() // same in both HEADs, as DiffSnapshots assumes
		}
		switch {
		case inA:
			av = ea.cur
		case isMoved:
			av = m.new
		default:
			av = eb.headVersion()
		}
		if reread != nil && bv.known && !av.known && bv.exists && av.exists && !bv.equal(av) {
			if v, err := reread(p); err == nil {
				av = v
			}
		}
		switch {
		case !bv.exists && av.exists:
			changes = append(changes, Change{Path: p, Type: Created})
		case bv.exists && !av.exists:
			changes = append(changes, Change{Path: p, Type: Deleted})
		case bv.exists && !bv.equal(av):
			changes = append(changes, Change{Path: p, Type: Edited})
		}
	}
	return changes
}

// emptyTree is git's well-known empty tree object for the hash in use.
func emptyTree(idLen int) string {
	if idLen == 64 {
		return "6ef19b41225c5369f1c104d45d8d85efa9b057b53b14b4b9b939dd74decc5321"
	}
	return "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
}
