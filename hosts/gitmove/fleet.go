package gitmove

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// MaxHave bounds the commits a host may say it has.
const MaxHave = 256

// baseRef is the one ref of a base bundle, and where the cache keeps it.
func baseRef(commit string) string { return "refs/fleet/base/" + commit }

// incomingRefs is the private namespace FetchBranch fetches into before it
// moves the branch; nothing else in the user's repository is written.
const incomingRefs = "refs/gitmove/incoming/"

// RepoID returns the identity of the repository containing repo as the
// hosts' caches know it: the root commit reached from commit by first
// parents. Clones and forks of one project share it, and so share a cache
// on a host, which is what the objects want.
func RepoID(ctx context.Context, repo, commit string, lim Limits) (string, error) {
	if err := validOID("commit", commit); err != nil {
		return "", fmt.Errorf("repository id: %w", err)
	}
	out, err := lim.git(ctx, repo, "rev-list", "--first-parent", "--max-parents=0", commit, "--")
	if err != nil {
		return "", fmt.Errorf("repository id: %w", err)
	}
	if err := validOID("root commit", out); err != nil {
		return "", fmt.Errorf("repository id: %w", err)
	}
	return out, nil
}

// SendBase puts commit of the repository containing repo into store as a
// bundle for a host whose cache has the commits in have (its Cache.Have).
// The bundle holds what commit reaches and no commit of have does; have
// entries the repository does not know are ignored, and with none left the
// bundle is full. When a have commit already reaches commit nothing is
// stored and the Sent has no Key. have comes from the host: an entry that is
// not an object id, or more than MaxHave of them, is an error.
//
// The user's repository is only read: the bundle is made in a temporary
// bare repository that borrows its objects (objects/info/alternates).
func SendBase(ctx context.Context, store ObjectStore, repo, commit string, have []string, lim Limits) (Sent, error) {
	sent := Sent{Commit: commit}
	fail := func(err error) (Sent, error) { return Sent{}, fmt.Errorf("send base %s: %w", short(commit), err) }
	if err := validOID("commit", commit); err != nil {
		return fail(err)
	}
	if len(have) > MaxHave {
		return fail(fmt.Errorf("the host says it has %d commits; at most %d are taken", len(have), MaxHave))
	}
	for _, h := range have {
		if err := validOID("have commit", h); err != nil {
			return fail(err)
		}
	}
	if slices.Contains(have, commit) {
		// The host has the base itself (a warm host: it ran a worker of
		// this base before). What it says it has only matters to it: a
		// host that lies fails its own worker.
		return sent, nil
	}
	if got, err := lim.git(ctx, repo, "rev-parse", "--verify", "-q", "--end-of-options", commit+"^{commit}"); err != nil || got != commit {
		return fail(fmt.Errorf("not a commit of %s: %w", repo, errOr(err, "it names "+got)))
	}
	known, err := knownCommits(ctx, repo, have, lim)
	if err != nil {
		return fail(err)
	}
	revs := []string{commit}
	for _, h := range known {
		revs = append(revs, "^"+h)
	}
	if len(known) > 0 {
		n, err := lim.git(ctx, repo, append([]string{"rev-list", "--count"}, append(revs, "--")...)...)
		if err != nil {
			return fail(err)
		}
		if n == "0" {
			return sent, nil // the host has it
		}
	}
	s, err := lim.newScratch()
	if err != nil {
		return fail(err)
	}
	defer s.close()
	tmp, err := borrowRepo(ctx, repo, s.dir, lim)
	if err != nil {
		return fail(err)
	}
	if _, err := lim.git(ctx, tmp, "update-ref", baseRef(commit), commit); err != nil {
		return fail(err)
	}
	revs[0] = baseRef(commit)
	if sent.Size, err = lim.bundleTo(ctx, s, tmp, revs...); err != nil {
		return fail(err)
	}
	if sent.Key, err = newKey(baseKind, commit); err != nil {
		return fail(err)
	}
	if err := lim.upload(ctx, store, s, sent.Key); err != nil {
		return fail(err)
	}
	sent.Full = len(known) == 0
	return sent, nil
}

// errOr is err, or a plain error saying msg when err is nil.
func errOr(err error, msg string) error {
	if err != nil {
		return err
	}
	return errors.New(msg)
}

// knownCommits returns the entries of have that are commits of repo.
func knownCommits(ctx context.Context, repo string, have []string, lim Limits) ([]string, error) {
	if len(have) == 0 {
		return nil, nil
	}
	out, err := lim.run(ctx, gitCmd{
		dir:   repo,
		args:  []string{"cat-file", "--batch-check=%(objectname) %(objecttype)"},
		stdin: strings.NewReader(strings.Join(have, "\n") + "\n"),
	})
	if err != nil {
		return nil, fmt.Errorf("look up the host's commits: %w", err)
	}
	var known []string
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		if oid, typ, _ := strings.Cut(sc.Text(), " "); typ == "commit" {
			known = append(known, oid)
		}
	}
	return known, nil
}

// borrowRepo makes a bare repository in dir that sees repo's objects and
// nothing else of it, so a ref can be made for `git bundle create` without
// writing to repo.
func borrowRepo(ctx context.Context, repo, dir string, lim Limits) (string, error) {
	objects, err := lim.git(ctx, repo, "rev-parse", "--path-format=absolute", "--git-path", "objects")
	if err != nil {
		return "", err
	}
	format, err := lim.git(ctx, repo, "rev-parse", "--show-object-format")
	if err != nil {
		return "", err
	}
	tmp := filepath.Join(dir, "repo.git")
	if _, err := lim.git(ctx, dir, "init", "-q", "--bare", "--template=", "--object-format="+format, tmp); err != nil {
		return "", err
	}
	info := filepath.Join(tmp, "objects", "info")
	if err := os.MkdirAll(info, 0o700); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(info, "alternates"), []byte(objects+"\n"), 0o600); err != nil {
		return "", err
	}
	return tmp, nil
}

// FetchBranch fetches the bundle key of store, which a host sent with
// SendBranch, into the repository containing repo as branch (the worker's
// fleet/<session>/<worker>) and returns the branch's new tip.
//
// The bundle is untrusted, so it is first taken into a quarantine: a
// temporary repository that borrows repo's objects. There `git bundle
// verify` must accept it, it must hold exactly the one ref
// refs/heads/<branch>, its pack must pass `git index-pack --strict` (fsck
// of every object it brings, and every object they name present), and its
// tip must descend from base. A bundle failing any of that is
// ErrBadBundle (ErrNotDescendant for the last) and repo is not written at
// all. Then it is fetched into repo, into a private ref
// (refs/gitmove/incoming/…, deleted again), and the branch moves by
// compare-and-swap against the value it had before, fast-forward or not (a
// worker may amend its own commits between turns). A branch checked out in
// a work tree of repo is ErrCheckedOut: the user's work trees, index, HEAD
// and other branches are never written.
func FetchBranch(ctx context.Context, store ObjectStore, key, repo, branch, base string, lim Limits) (string, error) {
	return fetchBranch(ctx, store, key, repo, branch, branch, base, "", lim)
}

// FetchBranchAs is FetchBranch into another branch, as, than the one the
// bundle carries: for work that must not move the worker's branch (a
// worker's late work, sent after the fleet gave it up).
func FetchBranchAs(ctx context.Context, store ObjectStore, key, repo, branch, as, base string, lim Limits) (string, error) {
	if err := validBranch(as); err != nil {
		return "", fmt.Errorf("fetch %s from %s as %s: %w", branch, key, as, err)
	}
	return fetchBranch(ctx, store, key, repo, branch, as, base, "", lim)
}

// FetchBranchMirror is FetchBranch for a branch checked out in mirror, a
// work tree of the fleet's own that shows a remote worker's work to the
// fleet's landing and diff views: the branch may be checked out there (and
// nowhere else), and mirror is reset to the new tip, whatever it held. It
// fetches into the repository mirror belongs to.
func FetchBranchMirror(ctx context.Context, store ObjectStore, key, mirror, branch, base string, lim Limits) (string, error) {
	abs, err := filepath.Abs(mirror)
	if err == nil {
		abs, err = filepath.EvalSymlinks(abs)
	}
	if err != nil {
		return "", fmt.Errorf("fetch %s from %s: mirror: %w", branch, key, err)
	}
	return fetchBranch(ctx, store, key, abs, branch, branch, base, abs, lim)
}

// fetchBranch fetches the bundle of branch into the branch target.
func fetchBranch(ctx context.Context, store ObjectStore, key, repo, branch, target, base, mirror string, lim Limits) (string, error) {
	fail := func(err error) (string, error) { return "", fmt.Errorf("fetch %s from %s: %w", branch, key, err) }
	if err := validBranch(branch); err != nil {
		return fail(err)
	}
	if err := checkWorkKey(key, branch); err != nil {
		return fail(err)
	}
	if err := validOID("base", base); err != nil {
		return fail(err)
	}
	ref, dst := "refs/heads/"+branch, "refs/heads/"+target
	if err := notCheckedOut(ctx, repo, dst, mirror, lim); err != nil {
		return fail(err)
	}
	s, err := lim.newScratch()
	if err != nil {
		return fail(err)
	}
	defer s.close()
	if _, err := lim.download(ctx, store, key, s); err != nil {
		return fail(err)
	}
	tip, err := quarantine(ctx, repo, s, ref, base, lim)
	if err != nil {
		return fail(err)
	}
	old, err := refValue(ctx, repo, dst, lim)
	if err != nil {
		return fail(err)
	}
	if tip == old {
		return tip, resetMirror(ctx, mirror, lim)
	}
	var nonce [8]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return fail(err)
	}
	incoming := incomingRefs + hex.EncodeToString(nonce[:])
	defer func() {
		// Cleanup runs even when ctx is done; it has its own bound.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		_, _ = lim.git(cctx, repo, "update-ref", "-d", incoming)
	}()
	if err := fetchBundle(ctx, repo, s.bundle, ref, incoming, lim); err != nil {
		return fail(err)
	}
	if got, err := lim.git(ctx, repo, "rev-parse", "--verify", "-q", incoming); err != nil || got != tip {
		return fail(fmt.Errorf("%w: fetched %q, the bundle says %s: %w", ErrBadBundle, got, tip, errOr(err, "mismatch")))
	}
	// Checked again right before the move: a checkout may have come since.
	if err := notCheckedOut(ctx, repo, dst, mirror, lim); err != nil {
		return fail(err)
	}
	if _, err := lim.git(ctx, repo, "update-ref", "-m", "fleet: "+branch+" from its host", dst, tip, old); err != nil {
		return fail(fmt.Errorf("move the branch (did it move meanwhile?): %w", err))
	}
	if err := resetMirror(ctx, mirror, lim); err != nil {
		return fail(err)
	}
	return tip, nil
}

// resetMirror makes the mirror work tree ("" none) show its branch's tip.
func resetMirror(ctx context.Context, mirror string, lim Limits) error {
	if mirror == "" {
		return nil
	}
	if _, err := lim.git(ctx, mirror, "reset", "-q", "--hard", "HEAD"); err != nil {
		return fmt.Errorf("reset the mirror work tree %s: %w", mirror, err)
	}
	if _, err := lim.git(ctx, mirror, "clean", "-q", "-d", "-f"); err != nil {
		return fmt.Errorf("clean the mirror work tree %s: %w", mirror, err)
	}
	return nil
}

// quarantine takes the bundle into a temporary repository that borrows
// repo's objects, checks it there, and returns its tip: the bundle holds
// exactly ref, its pack passes `index-pack --strict` (every object well
// formed and fsck-clean, .gitmodules included, every object it refers to
// present), the tip descends from base. `git fetch` from a bundle runs no
// fsck in the git releases we support (2.36 on), whatever
// fetch.fsckObjects says; hence index-pack here. What a refused pack leaves behind goes with the scratch directory.
func quarantine(ctx context.Context, repo string, s *scratch, ref, base string, lim Limits) (string, error) {
	q, err := borrowRepo(ctx, repo, s.dir, lim)
	if err != nil {
		return "", err
	}
	// base as a ref is the descent check's anchor; a base repo does not have
	// is an error here.
	if _, err := lim.git(ctx, q, "update-ref", "refs/base", base); err != nil {
		return "", fmt.Errorf("base %s: %w", short(base), err)
	}
	tip, err := bundleHead(ctx, q, s.bundle, ref, lim)
	if err != nil {
		return "", err
	}
	if err := indexPack(ctx, q, s.bundle, lim); err != nil {
		return "", err
	}
	if _, err := lim.git(ctx, q, "update-ref", "refs/incoming", tip); err != nil {
		return "", fmt.Errorf("%w: %w", ErrBadBundle, err)
	}
	if err := descends(ctx, q, base, tip, lim); err != nil {
		return "", err
	}
	return tip, nil
}

// maxHeader bounds a bundle's header (its refs and prerequisites).
const maxHeader = 1 << 20

// indexPack feeds the pack of the bundle at path to `git index-pack
// --strict` in the repository dir.
func indexPack(ctx context.Context, dir, path string, lim Limits) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	// The header ends at its first empty line; bundle verify has read it.
	br := bufio.NewReader(io.LimitReader(f, maxHeader))
	var off int64
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			line, err = br.ReadBytes('\n')
		}
		if err != nil {
			return fmt.Errorf("%w: no end of its header in %d bytes", ErrBadBundle, maxHeader)
		}
		off += int64(len(line))
		if len(line) == 1 {
			break
		}
	}
	_, err = lim.run(ctx, gitCmd{
		dir:   dir,
		args:  []string{"index-pack", "--stdin", "--fix-thin", "--strict"},
		stdin: io.NewSectionReader(f, off, fi.Size()-off),
	})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrBadBundle, err)
	}
	return nil
}

// fetchBundle fetches ref of the bundle at path into dst of the repository
// in dir.
func fetchBundle(ctx context.Context, dir, path, ref, dst string, lim Limits) error {
	_, err := lim.git(ctx, dir, "fetch", "-q", "--no-write-fetch-head",
		"--no-auto-maintenance", "--no-tags", "--no-recurse-submodules", path, ref+":"+dst)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrBadBundle, err)
	}
	return nil
}

// cleanupTimeout bounds removing a private ref after the caller's context
// has ended.
const cleanupTimeout = 10 * time.Second

// bundleHead verifies the bundle at path against the repository in dir and
// returns the commit of its only ref, which must be ref.
func bundleHead(ctx context.Context, dir, path, ref string, lim Limits) (string, error) {
	if _, err := lim.git(ctx, dir, "bundle", "verify", path); err != nil { // -q would hide why
		if strings.Contains(err.Error(), "lacks these prerequisite commits") {
			return "", fmt.Errorf("%w: %w", ErrMissingPrerequisites, err)
		}
		return "", fmt.Errorf("%w: %w", ErrBadBundle, err)
	}
	out, err := lim.git(ctx, dir, "bundle", "list-heads", path)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrBadBundle, err)
	}
	oid, name, ok := strings.Cut(out, " ")
	if !ok || strings.Contains(name, "\n") || name != ref || validOID("bundle head", oid) != nil {
		return "", fmt.Errorf("%w: it must hold exactly %s, it holds %q", ErrBadBundle, ref, out)
	}
	return oid, nil
}

// refValue returns the commit ref points at, "" when it does not exist.
func refValue(ctx context.Context, dir, ref string, lim Limits) (string, error) {
	out, err := lim.git(ctx, dir, "rev-parse", "--verify", "-q", "--end-of-options", ref)
	if exitedWith(err, 1) && ctx.Err() == nil {
		return "", nil
	}
	return out, err
}

// descends checks that tip descends from (or is) base.
func descends(ctx context.Context, dir, base, tip string, lim Limits) error {
	_, err := lim.git(ctx, dir, "merge-base", "--is-ancestor", base, tip)
	if exitedWith(err, 1) && ctx.Err() == nil {
		return fmt.Errorf("%w: %s does not descend from %s", ErrNotDescendant, short(tip), short(base))
	}
	return err
}

// notCheckedOut checks that no work tree of the repository in dir has ref
// checked out, but for the one at except ("" none).
func notCheckedOut(ctx context.Context, dir, ref, except string, lim Limits) error {
	out, err := lim.run(ctx, gitCmd{dir: dir, args: []string{"worktree", "list", "--porcelain", "-z"}})
	if err != nil {
		return err
	}
	var path string
	for field := range strings.SplitSeq(string(out), "\x00") {
		if p, ok := strings.CutPrefix(field, "worktree "); ok {
			path = p
		}
		if field == "branch "+ref && (except == "" || !samePath(path, except)) {
			return fmt.Errorf("%w: %s is checked out at %s", ErrCheckedOut, ref, path)
		}
	}
	return nil
}

// samePath reports whether two absolute paths name the same directory.
func samePath(a, b string) bool {
	if a == b {
		return true
	}
	ra, err1 := filepath.EvalSymlinks(a)
	rb, err2 := filepath.EvalSymlinks(b)
	return err1 == nil && err2 == nil && ra == rb
}
