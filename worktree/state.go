package worktree

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// MaxStateFiles bounds the file lists a State (and the errors of landing)
// carry; the totals still count every file.
const MaxStateFiles = 50

// FileStat is one changed file of a worker against its base.
type FileStat struct {
	Path    string // slash-separated, relative to the repository root
	Status  string // "added", "modified", "deleted" (a rename is a delete plus an add)
	Added   int    // lines; 0 for binary
	Removed int
	Binary  bool
}

// State is a worker branch's git state.
type State struct {
	Branch      string // fleet/<session>/<worker>
	Head        string // branch tip
	BaseBranch  string // "" when unknown (not recorded, or deleted since)
	BaseCommit  string // merge-base of the tip and BaseBranch (fleetStart, else the tip, when there is none)
	Ahead       int    // commits on the branch not on BaseBranch
	Behind      int    // commits on BaseBranch not on the branch
	Uncommitted int    // paths with uncommitted changes or untracked files in the worktree (ignored files excluded)
	// Files are the committed and uncommitted (untracked included) changes
	// against BaseCommit, sorted by path; at most MaxStateFiles of them.
	Files          []FileStat
	FilesTotal     int // changed files before truncation
	Added, Removed int // lines, over all changed files
	// Mergeable: whether BaseBranch would merge the work (committed and
	// uncommitted) cleanly right now, by `git merge-tree --write-tree`,
	// which touches no work tree. nil when not known: no base branch, no
	// common history, or nothing to merge.
	Mergeable *bool
	Conflicts []string // files that would conflict, sorted; at most MaxStateFiles
	// Merged: the work is landed and nothing is uncommitted. Either Merge
	// landed this very tip (fleetMerged), or the tip, moved past its start,
	// is reachable from BaseBranch (merged by hand, or fast-forwarded).
	Merged     bool
	MergedInto string // the branch it was landed in, when Merged
	// Missing: the worktree directory is gone (or path names no worktree);
	// the state is the branch's committed state only.
	Missing bool
}

// Keys of the fleet's branch metadata, under branch.<name>. in the
// repository's config; `git branch -D` and `-m` delete or move them with
// the branch.
const (
	keyBase       = "fleetBase"       // short name of the branch the worker started from
	keyStart      = "fleetStart"      // the commit it started from
	keyMerged     = "fleetMerged"     // the tip Merge landed
	keyMergedInto = "fleetMergedInto" // the branch Merge landed it in
)

// branchMeta is the fleet's metadata of one branch; "" where unset.
type branchMeta struct {
	base, start, merged, mergedInto string
}

// readMeta reads branch's metadata with one `git config` call.
func readMeta(ctx context.Context, dir, branch string) (branchMeta, error) {
	var m branchMeta
	prefix := "branch." + branch + "."
	// Branch names are [A-Za-z0-9._/-], so quoting for Go's syntax also
	// quotes for git's POSIX regular expressions.
	err := gitFields(ctx, dir, 0, func(f string) error {
		key, val, _ := strings.Cut(f, "\n")
		switch strings.ToLower(strings.TrimPrefix(key, prefix)) {
		case strings.ToLower(keyBase):
			m.base = val
		case strings.ToLower(keyStart):
			m.start = val
		case strings.ToLower(keyMerged):
			m.merged = val
		case strings.ToLower(keyMergedInto):
			m.mergedInto = val
		}
		return nil
	}, "config", "-z", "--get-regexp", "^"+regexp.QuoteMeta(prefix)+"fleet")
	if err != nil && exitCode(err) == 1 && ctx.Err() == nil {
		return m, nil // none set
	}
	return m, err
}

// setConfig sets branch.<branch>.<key> in the repository's config, retrying
// while a concurrent command holds config.lock.
func setConfig(ctx context.Context, dir, branch, key, value string) error {
	return retryLocked(ctx, gitAttempts*2, func() error {
		_, err := runGit(ctx, dir, "config", "branch."+branch+"."+key, value)
		return err
	})
}

// work is what ReadState, Diff, Merge and Apply need of a worker branch.
type work struct {
	branch   string
	tip      string
	meta     branchMeta
	base     string // BaseBranch: meta.base when that branch exists
	baseTip  string // its commit
	fork     string // BaseCommit
	forked   bool   // fork is a real merge-base with base
	present  bool   // the worktree at path exists and has branch checked out
	path     string // the worktree, symlinks resolved, when present
	dirty    int    // Uncommitted
	commit   string // tip, or a dangling commit of the uncommitted work on top of it
	dirtyErr *DirtyError
}

// readWork resolves branch, its base and its worktree at path. With
// snapshot, uncommitted work becomes commit (else commit is the tip).
func readWork(ctx context.Context, repo, branch, path string, snapshot bool) (*work, error) {
	w := &work{branch: branch}
	var err error
	if w.tip, err = resolveCommit(ctx, repo, "refs/heads/"+branch); err != nil {
		return nil, err
	}
	if w.tip == "" {
		return nil, fmt.Errorf("branch %s: %w", branch, fs.ErrNotExist)
	}
	if w.meta, err = readMeta(ctx, repo, branch); err != nil {
		return nil, err
	}
	if w.meta.base != "" {
		if w.baseTip, err = resolveCommit(ctx, repo, "refs/heads/"+w.meta.base); err != nil {
			return nil, err
		}
		if w.baseTip != "" {
			w.base = w.meta.base
		}
	}
	if w.base != "" {
		if w.fork, err = mergeBase(ctx, repo, w.tip, w.baseTip); err != nil {
			return nil, err
		}
		w.forked = w.fork != ""
	}
	if w.fork == "" && w.meta.start != "" {
		if w.fork, err = resolveCommit(ctx, repo, w.meta.start); err != nil {
			return nil, err
		}
	}
	if w.fork == "" {
		w.fork = w.tip // nothing known to compare with: only uncommitted work shows
	}
	w.commit = w.tip
	if err := w.findWorktree(ctx, repo, path); err != nil {
		return nil, err
	}
	if !w.present {
		return w, nil
	}
	files, total, err := statusFiles(ctx, w.path, true)
	if err != nil {
		return nil, err
	}
	w.dirty = total
	if total > 0 {
		w.dirtyErr = &DirtyError{Path: w.path, Files: files, Total: total}
		if snapshot {
			if w.commit, err = snapshotCommit(ctx, w.path, w.tip); err != nil {
				return nil, err
			}
		}
	}
	return w, nil
}

// findWorktree sets present and path when path is a worktree of the
// repository with the branch checked out. A worktree with something else
// checked out is an error: its files are not the branch's.
func (w *work) findWorktree(ctx context.Context, repo, path string) error {
	if path == "" || !isDir(path) {
		return nil
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	if abs, err = filepath.EvalSymlinks(abs); err != nil {
		return err
	}
	entries, err := listWorktrees(ctx, repo)
	if err != nil {
		return err
	}
	e := findWorktree(entries, abs)
	if e == nil || e.prunable {
		return nil
	}
	if e.branch != "refs/heads/"+w.branch {
		return fmt.Errorf("worktree %s has %s checked out, not %s", abs, e.describe(), w.branch)
	}
	w.present, w.path = true, abs
	return nil
}

// ReadState reads the state of branch in the repository at repo (any
// directory in it). path is the branch's worktree; "" or a missing
// directory gives the committed state only, with Missing set. It changes
// nothing: uncommitted work is read through a copy of the worktree's index.
func ReadState(ctx context.Context, repo, branch, path string) (State, error) {
	w, err := readWork(ctx, repo, branch, path, true)
	if err != nil {
		return State{}, fmt.Errorf("state of %s: %w", branch, err)
	}
	st := State{
		Branch:      branch,
		Head:        w.tip,
		BaseBranch:  w.base,
		BaseCommit:  w.fork,
		Uncommitted: w.dirty,
		Missing:     !w.present,
	}
	if err := w.counts(ctx, repo, &st); err != nil {
		return State{}, fmt.Errorf("state of %s: %w", branch, err)
	}
	if err := diffStats(ctx, repo, w.fork, w.commit, &st); err != nil {
		return State{}, fmt.Errorf("state of %s: %w", branch, err)
	}
	if err := w.mergeable(ctx, repo, &st); err != nil {
		return State{}, fmt.Errorf("state of %s: %w", branch, err)
	}
	if err := w.merged(ctx, repo, &st); err != nil {
		return State{}, fmt.Errorf("state of %s: %w", branch, err)
	}
	return st, nil
}

// counts sets Ahead and Behind.
func (w *work) counts(ctx context.Context, repo string, st *State) error {
	if w.base == "" {
		out, err := gitLine(ctx, repo, "rev-list", "--count", w.fork+".."+w.tip)
		if err != nil {
			return err
		}
		st.Ahead, err = strconv.Atoi(out)
		return err
	}
	out, err := gitLine(ctx, repo, "rev-list", "--left-right", "--count", w.baseTip+"..."+w.tip)
	if err != nil {
		return err
	}
	behind, ahead, ok := strings.Cut(out, "\t")
	if st.Behind, err = strconv.Atoi(behind); err != nil || !ok {
		return fmt.Errorf("unexpected rev-list --count output %q", out)
	}
	if st.Ahead, err = strconv.Atoi(ahead); err != nil {
		return fmt.Errorf("unexpected rev-list --count output %q", out)
	}
	return nil
}

// mergeable sets Mergeable and Conflicts.
func (w *work) mergeable(ctx context.Context, repo string, st *State) error {
	if !w.forked {
		return nil
	}
	landed, err := isAncestor(ctx, repo, w.commit, w.baseTip)
	if err != nil || landed {
		return err // landed: nothing to merge
	}
	_, conflicts, total, err := mergeTree(ctx, repo, w.baseTip, w.commit)
	if err != nil {
		return err
	}
	ok := total == 0
	st.Mergeable, st.Conflicts = &ok, conflicts
	return nil
}

// merged sets Merged and MergedInto.
func (w *work) merged(ctx context.Context, repo string, st *State) error {
	if w.dirty > 0 {
		return nil
	}
	if w.meta.merged == w.tip {
		st.Merged, st.MergedInto = true, w.meta.mergedInto
		return nil
	}
	// Without a recorded start a tip reachable from the base may be where
	// the worker started, having done nothing.
	if w.base == "" || w.meta.start == "" || w.tip == w.meta.start {
		return nil
	}
	in, err := isAncestor(ctx, repo, w.tip, w.baseTip)
	if in {
		st.Merged, st.MergedInto = true, w.base
	}
	return err
}

// diffStats fills Files, FilesTotal, Added and Removed from the changes
// between two commits. One `git diff --raw --numstat` gives every path's
// status, then its line counts, each list in path order; both are parsed
// as they stream and only the first MaxStateFiles paths are kept.
func diffStats(ctx context.Context, dir, from, to string, st *State) error {
	st.Files, st.FilesTotal, st.Added, st.Removed = nil, 0, 0, 0
	if from == to {
		return nil
	}
	var (
		status  = map[string]string{}
		rawMeta string // a raw record's meta field, waiting for its path
		stats   []FileStat
	)
	err := gitFields(ctx, dir, 0, func(f string) error {
		switch {
		case rawMeta != "":
			if len(status) < MaxStateFiles {
				status[f] = statusWord(rawMeta)
			}
			rawMeta = ""
			st.FilesTotal++
		case strings.HasPrefix(f, ":"):
			rawMeta = f
		default:
			added, rest, ok1 := strings.Cut(f, "\t")
			removed, path, ok2 := strings.Cut(rest, "\t")
			if !ok1 || !ok2 {
				return fmt.Errorf("unexpected git diff --numstat record %q", f)
			}
			fs := FileStat{Path: path}
			if added == "-" && removed == "-" {
				fs.Binary = true
			} else {
				var err1, err2 error
				fs.Added, err1 = strconv.Atoi(added)
				fs.Removed, err2 = strconv.Atoi(removed)
				if err1 != nil || err2 != nil {
					return fmt.Errorf("unexpected git diff --numstat record %q", f)
				}
			}
			st.Added += fs.Added
			st.Removed += fs.Removed
			if len(stats) < MaxStateFiles {
				stats = append(stats, fs)
			}
		}
		return nil
	}, "diff", "--raw", "--numstat", "-z", "--no-renames", "--no-ext-diff", "--no-textconv", "--no-relative",
		"--ignore-submodules=none", from, to, "--")
	if err != nil {
		return err
	}
	for i := range stats {
		stats[i].Status = status[stats[i].Path]
	}
	slices.SortFunc(stats, func(a, b FileStat) int { return strings.Compare(a.Path, b.Path) })
	st.Files = stats
	return nil
}

// statusWord names the status letter ending a raw diff record's meta.
func statusWord(meta string) string {
	switch meta[len(meta)-1] {
	case 'A':
		return "added"
	case 'D':
		return "deleted"
	}
	return "modified" // M, T (type change)
}

// statusFiles lists the paths of the work tree at dir that have
// uncommitted changes (and, with untracked, untracked files; ignored files
// never), sorted, at most MaxStateFiles of them, and how many there are.
// It takes no optional locks.
func statusFiles(ctx context.Context, dir string, untracked bool) (files []string, total int, err error) {
	mode := "--untracked-files=no"
	if untracked {
		mode = "--untracked-files=all"
	}
	err = gitFields(ctx, dir, 0, func(f string) error {
		if len(f) < 4 {
			return fmt.Errorf("unexpected git status record %q", f)
		}
		total++
		if len(files) < MaxStateFiles {
			files = append(files, f[3:])
		}
		return nil
	}, "--no-optional-locks", "status", "--porcelain", "-z", "--no-renames", mode)
	slices.Sort(files)
	return files, total, err
}

// snapshotCommit returns a dangling commit, child of tip, holding the work
// tree at dir as `git add -A` would stage it, without touching the
// worktree's index or files: it stages into a copy of the index in a
// temporary file, always removed. The commit has a fixed identity and date,
// so the same work gives the same commit.
func snapshotCommit(ctx context.Context, dir, tip string) (string, error) {
	index, err := gitLine(ctx, dir, "rev-parse", "--git-path", "index")
	if err != nil {
		return "", err
	}
	if !filepath.IsAbs(index) {
		index = filepath.Join(dir, index)
	}
	tmp, err := os.CreateTemp("", "fleet-index-*")
	if err != nil {
		return "", fmt.Errorf("snapshot uncommitted work: %w", err)
	}
	defer func() {
		tmp.Close()
		os.Remove(tmp.Name())
		os.Remove(tmp.Name() + ".lock") // left by a git killed mid-write
	}()
	copied, err := copyIndex(tmp, index)
	if err != nil {
		return "", fmt.Errorf("snapshot uncommitted work: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("snapshot uncommitted work: %w", err)
	}
	r := gitRun{env: []string{"GIT_INDEX_FILE=" + tmp.Name()}, max: 64 << 10}
	if !copied {
		// No index yet: start from the tip's tree.
		if _, err := runGitWith(ctx, dir, r, "read-tree", tip); err != nil {
			return "", err
		}
	}
	if _, err := runGitWith(ctx, dir, r, "add", "-A"); err != nil {
		return "", err
	}
	tree, err := runGitWith(ctx, dir, r, "write-tree")
	if err != nil {
		return "", err
	}
	r.env = append(r.env, fixedIdentity...)
	commit, err := runGitWith(ctx, dir, r, "-c", "commit.gpgSign=false", "commit-tree", strings.TrimSpace(string(tree)),
		"-p", tip, "-m", "agents-fleet: uncommitted work")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(commit)), nil
}

// fixedIdentity is who and when snapshot commits are: they are never
// shown as commits, and equal work then gives an equal commit.
var fixedIdentity = []string{
	"GIT_AUTHOR_NAME=agents-fleet", "GIT_AUTHOR_EMAIL=agents-fleet@localhost", "GIT_AUTHOR_DATE=@0 +0000",
	"GIT_COMMITTER_NAME=agents-fleet", "GIT_COMMITTER_EMAIL=agents-fleet@localhost", "GIT_COMMITTER_DATE=@0 +0000",
}

// copyIndex copies the index file at path to dst; false when there is none.
func copyIndex(dst io.Writer, path string) (bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	_, err = io.Copy(dst, f)
	return err == nil, err
}

// mergeTree merges theirs into ours as `git merge` would, writing only
// objects: the resulting tree, or the conflicted files (sorted, at most
// MaxStateFiles) and how many there are.
func mergeTree(ctx context.Context, dir, ours, theirs string) (tree string, conflicts []string, total int, err error) {
	first, done := true, false
	err = gitFields(ctx, dir, 0, func(f string) error {
		switch {
		case first:
			tree, first = f, false
		case f == "" || done: // the messages section, which --no-messages leaves empty
			done = true
		default:
			total++
			if len(conflicts) < MaxStateFiles {
				conflicts = append(conflicts, f)
			}
		}
		return nil
	}, "merge-tree", "--write-tree", "--name-only", "--no-messages", "-z", ours, theirs)
	if err != nil && exitCode(err) == 1 && ctx.Err() == nil && tree != "" {
		err = nil // conflicts
		if total == 0 {
			total = 1 // git says it conflicts without naming a file; never call that clean
		}
	}
	if err != nil {
		return "", nil, 0, err
	}
	slices.Sort(conflicts)
	return tree, slices.Compact(conflicts), total, nil
}

// mergeBase returns the best common ancestor of a and b, "" when they share
// no history.
func mergeBase(ctx context.Context, dir, a, b string) (string, error) {
	out, err := gitLine(ctx, dir, "merge-base", a, b)
	if err != nil && exitCode(err) == 1 && ctx.Err() == nil {
		return "", nil
	}
	return out, err
}

// isAncestor reports whether commit a is reachable from b (or is b).
func isAncestor(ctx context.Context, dir, a, b string) (bool, error) {
	_, err := runGit(ctx, dir, "merge-base", "--is-ancestor", a, b)
	if err == nil {
		return true, nil
	}
	if exitCode(err) == 1 && ctx.Err() == nil {
		return false, nil
	}
	return false, err
}
