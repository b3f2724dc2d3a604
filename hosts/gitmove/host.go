package gitmove

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// MaxHaveSent is how many commits Cache.Have lists: the newest tips of the
// cache, which is what the next base most likely builds on.
const MaxHaveSent = 32

// Caches are a host's repository caches: one bare repository per
// repository it works on, <dir>/<repoID>.git, and <dir>/tmp for bundles in
// transit. Use one Caches per directory in a process; its caches serialise
// their writes.
type Caches struct {
	dir string
	lim Limits

	mu    sync.Mutex        // guards repos
	repos map[string]*Cache // by repository id
}

// OpenCaches returns the caches under dir, creating it (0700). Bundles wait
// in lim.TempDir, or in <dir>/tmp when that is "". One process owns dir:
// what a crashed one left in <dir>/tmp, and a half-made cache, are removed
// here.
func OpenCaches(dir string, lim Limits) (*Caches, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("open repository caches: %w", err)
	}
	var leftovers []string
	if lim.TempDir == "" {
		lim.TempDir = filepath.Join(dir, "tmp")
		leftovers = append(leftovers, filepath.Join(lim.TempDir, "gitmove-*"))
	}
	leftovers = append(leftovers, filepath.Join(dir, ".init-*"))
	for _, pattern := range leftovers {
		matches, _ := filepath.Glob(pattern) // the pattern is well formed
		for _, m := range matches {
			if err := os.RemoveAll(m); err != nil {
				return nil, fmt.Errorf("open repository caches: %w", err)
			}
		}
	}
	for _, d := range []string{dir, lim.TempDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("open repository caches: %w", err)
		}
	}
	return &Caches{dir: dir, lim: lim, repos: map[string]*Cache{}}, nil
}

// Open returns the cache of the repository repoID (RepoID on the fleet
// side), making an empty one on first use.
func (cs *Caches) Open(ctx context.Context, repoID string) (*Cache, error) {
	if err := validOID("repository id", repoID); err != nil {
		return nil, fmt.Errorf("open repository cache: %w", err)
	}
	// Held across the first open's git init (tens of milliseconds, bounded
	// by GitTimeout): two workers of a new repository must get one Cache.
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if c := cs.repos[repoID]; c != nil {
		return c, nil
	}
	c := &Cache{dir: filepath.Join(cs.dir, repoID+".git"), lim: cs.lim}
	if err := c.init(ctx, repoID); err != nil {
		return nil, fmt.Errorf("open repository cache %s: %w", short(repoID), err)
	}
	cs.repos[repoID] = c
	return c, nil
}

// Cache is a host's bare repository for one repository: the bases it
// received (refs/fleet/base/<commit>) and the worker branches of the
// worktrees made from it. Its methods are safe for concurrent use. Deleting
// its directory while no worktree of it is in use loses nothing the fleet
// needs: the next base is then sent full.
type Cache struct {
	dir string // the bare repository
	lim Limits

	mu sync.Mutex // serialises ref and worktree changes
}

// init makes the bare repository if it is not there yet: in a temporary
// directory renamed into place, so a crash never leaves half of one. The
// object format follows the id (a SHA-256 root commit, a SHA-256 cache).
func (c *Cache) init(ctx context.Context, repoID string) error {
	if _, err := os.Stat(c.dir); err == nil {
		return nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	format := "sha1"
	if len(repoID) == 64 {
		format = "sha256"
	}
	tmp, err := os.MkdirTemp(filepath.Dir(c.dir), ".init-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if _, err := c.lim.git(ctx, tmp, "init", "-q", "--bare", "--template=", "--object-format="+format, tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, c.dir); err != nil {
		if _, serr := os.Stat(c.dir); serr == nil {
			return nil // another process made it meanwhile
		}
		return err
	}
	return nil
}

// Dir returns the cache's bare repository.
func (c *Cache) Dir() string { return c.dir }

// Have lists the commits the cache holds that the fleet's next base is most
// likely to build on, for SendBase: the newest MaxHaveSent tips of its bases
// and worker branches, by committer date.
func (c *Cache) Have(ctx context.Context) ([]string, error) {
	// Twice as many refs as listed: a base and a branch often share a tip.
	out, err := c.lim.git(ctx, c.dir, "for-each-ref", "--sort=-committerdate", "--format=%(objectname)",
		"--count="+strconv.Itoa(2*MaxHaveSent), "refs/fleet/base/", "refs/heads/")
	if err != nil {
		return nil, fmt.Errorf("list cached commits: %w", err)
	}
	var have []string
	seen := map[string]bool{}
	for _, oid := range strings.Fields(out) {
		if !seen[oid] && len(have) < MaxHaveSent {
			seen[oid] = true
			have = append(have, oid)
		}
	}
	return have, nil
}

// ReceiveBase takes the base bundle key of store (made by SendBase) into
// the cache and returns its commit, kept under refs/fleet/base/<commit>.
// A commit the cache already has is not downloaded again. A bundle made
// against commits the cache lacks is ErrMissingPrerequisites.
func (c *Cache) ReceiveBase(ctx context.Context, store ObjectStore, key string) (string, error) {
	fail := func(err error) (string, error) { return "", fmt.Errorf("receive base %s: %w", key, err) }
	commit, err := baseKeyCommit(key)
	if err != nil {
		return fail(err)
	}
	ref := baseRef(commit)
	if ok, err := c.hasCommit(ctx, commit); err != nil {
		return fail(err)
	} else if ok {
		c.mu.Lock()
		defer c.mu.Unlock()
		if _, err := c.lim.git(ctx, c.dir, "update-ref", ref, commit); err != nil {
			return fail(err)
		}
		return commit, nil
	}
	s, err := c.lim.newScratch()
	if err != nil {
		return fail(err)
	}
	defer s.close()
	if _, err := c.lim.download(ctx, store, key, s); err != nil {
		return fail(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	tip, err := bundleHead(ctx, c.dir, s.bundle, ref, c.lim)
	if err != nil {
		return fail(err)
	}
	if tip != commit {
		return fail(fmt.Errorf("%w: its %s points at %s", ErrBadBundle, ref, short(tip)))
	}
	// The fleet is trusted here: no quarantine or fsck, which a large full
	// base would pay for in minutes.
	if err := fetchBundle(ctx, c.dir, s.bundle, ref, ref, c.lim); err != nil {
		return fail(err)
	}
	return commit, nil
}

// hasCommit reports whether commit is a commit in the cache.
func (c *Cache) hasCommit(ctx context.Context, commit string) (bool, error) {
	got, err := refValue(ctx, c.dir, commit+"^{commit}", c.lim)
	return got == commit, err
}

// Worktree checks commit out at dir (absolute, not existing yet; its
// parent is made 0700) on a new branch (fleet/<session>/<worker>) of the
// cache. A commit the cache lacks is ErrMissingCommit; an existing dir or
// branch is ErrExists (Remove a finished worker's first). Submodules are
// not checked out, and no filters or hooks of the host's git configuration
// run.
func (c *Cache) Worktree(ctx context.Context, commit, dir, branch string) error {
	fail := func(err error) error { return fmt.Errorf("make worktree %s: %w", dir, err) }
	if err := validOID("commit", commit); err != nil {
		return fail(err)
	}
	if err := validBranch(branch); err != nil {
		return fail(err)
	}
	if !filepath.IsAbs(dir) {
		return fail(errors.New("the directory must be absolute"))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := os.Lstat(dir); err == nil {
		return fail(fmt.Errorf("%w: %s is there", ErrExists, dir))
	} else if !errors.Is(err, os.ErrNotExist) {
		return fail(err)
	}
	if ok, err := c.hasCommit(ctx, commit); err != nil {
		return fail(err)
	} else if !ok {
		return fail(fmt.Errorf("%w: %s", ErrMissingCommit, short(commit)))
	}
	if tip, err := refValue(ctx, c.dir, "refs/heads/"+branch, c.lim); err != nil {
		return fail(err)
	} else if tip != "" {
		return fail(fmt.Errorf("%w: branch %s is at %s", ErrExists, branch, short(tip)))
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return fail(err)
	}
	if _, err := c.lim.git(ctx, c.dir, "worktree", "add", "-q", "--no-track", "-b", branch, dir, commit); err != nil {
		return fail(err)
	}
	return nil
}

// SendBranch puts the worker branch of the cache into store as a bundle
// for FetchBranch, made against base, the commit the worker started from,
// and acked, the tip the fleet last confirmed it fetched ("" when none):
// the fleet has both, so each turn sends only what is new since the last
// one it took. Only committed work moves: commit the worktree first.
//
// A tip equal to acked moves nothing: the Sent has no Key. A tip that does
// not descend from base is ErrNotDescendant. A tip still at base is sent as
// base itself (against its parents), so the fleet sees a worker that undid
// its commits. An acked the cache does not know, or one the tip is behind
// (the worker reset to an earlier turn), is left out.
func (c *Cache) SendBranch(ctx context.Context, store ObjectStore, branch, base, acked string) (Sent, error) {
	fail := func(err error) (Sent, error) { return Sent{}, fmt.Errorf("send %s: %w", branch, err) }
	if err := validBranch(branch); err != nil {
		return fail(err)
	}
	if err := validOID("base", base); err != nil {
		return fail(err)
	}
	if acked != "" {
		if err := validOID("acknowledged tip", acked); err != nil {
			return fail(err)
		}
	}
	ref := "refs/heads/" + branch
	tip, err := refValue(ctx, c.dir, ref, c.lim)
	if err != nil {
		return fail(err)
	}
	if tip == "" {
		return fail(fmt.Errorf("no branch %s in the cache", branch))
	}
	if tip == acked {
		return Sent{Commit: tip}, nil
	}
	if err := descends(ctx, c.dir, base, tip, c.lim); err != nil {
		return fail(err)
	}
	revs := []string{ref, "^" + base}
	if tip == base {
		revs[1] += "^@" // an empty bundle cannot be made; bring base itself
	} else if acked != "" {
		ok, err := c.hasCommit(ctx, acked)
		if err != nil {
			return fail(err)
		}
		if ok {
			// acked descending from tip: the tip went back; acked is no help.
			switch err := descends(ctx, c.dir, tip, acked, c.lim); {
			case errors.Is(err, ErrNotDescendant):
				revs = append(revs, "^"+acked)
			case err != nil:
				return fail(err)
			}
		}
	}
	s, err := c.lim.newScratch()
	if err != nil {
		return fail(err)
	}
	defer s.close()
	sent := Sent{Commit: tip}
	if sent.Size, err = c.lim.bundleTo(ctx, s, c.dir, revs...); err != nil {
		return fail(err)
	}
	if sent.Key, err = newKey(workKind, strings.Split(branch, "/")...); err != nil {
		return fail(err)
	}
	if err := c.lim.upload(ctx, store, s, sent.Key); err != nil {
		return fail(err)
	}
	return sent, nil
}

// Remove deletes the worktree at dir, whatever it holds, and its branch:
// for a worker whose last work was sent. A dir already gone only loses its
// registration.
func (c *Cache) Remove(ctx context.Context, dir, branch string) error {
	fail := func(err error) error { return fmt.Errorf("remove worktree %s: %w", dir, err) }
	if err := validBranch(branch); err != nil {
		return fail(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := os.Lstat(dir); err == nil {
		// Twice forced: uncommitted files and a lock do not keep it.
		if _, err := c.lim.git(ctx, c.dir, "worktree", "remove", "--force", "--force", dir); err != nil {
			return fail(err)
		}
	} else if _, err := c.lim.git(ctx, c.dir, "worktree", "prune"); err != nil {
		return fail(err)
	}
	if _, err := c.lim.git(ctx, c.dir, "update-ref", "-d", "refs/heads/"+branch); err != nil {
		return fail(err)
	}
	return nil
}
