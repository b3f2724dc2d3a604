// Package worktree gives each fleet worker its own git worktree and tells
// what a task changed in it.
//
// Layout (DESIGN.md §3, §6):
//
//	<fleetHome>/worktrees/<session>/<worker>   worktree, on branch fleet/<session>/<worker>
//
// A Manager creates and removes one session's worktrees in one repository;
// Prune cleans up across sessions. Worktrees start from the commit HEAD was
// at when the Manager was opened: uncommitted changes of the main work tree
// are not copied (Dirty says there were some), submodules are checked out,
// ignored files are not there. Finished workers' worktrees stay for review;
// Remove and Prune never drop uncommitted work without Force, nor a branch
// whose work is not landed elsewhere without DeleteBranch.
//
// TakeSnapshot and DiffSnapshots (or Changes, when a command may commit)
// turn a command's effect on a work tree into created/edited/deleted files;
// see snapshot.go. ReadState tells what a worker's branch holds against its
// base, and Merge, Apply, CommitAll and Push land it; see state.go,
// land.go and docs/worktrees.md.
//
// Everything shells out to git (2.36 or later, for `worktree list -z`) with
// the caller's context, GIT_TERMINAL_PROMPT=0, LC_ALL=C and without the
// caller's GIT_DIR, GIT_WORK_TREE or GIT_INDEX_FILE.
package worktree

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// Sentinel errors. Each is returned wrapped with the path or repository it
// concerns; test with errors.Is.
var (
	// ErrNotRepo: the directory is not inside a git work tree, or git cannot
	// be run at all (the wrapped exec error says which).
	ErrNotRepo = errors.New("not inside a git work tree")
	// ErrDirty: refusing to remove a worktree with uncommitted changes or
	// untracked files (ignored files do not count).
	ErrDirty = errors.New("refusing to remove a worktree with uncommitted changes")
	// ErrExists: the worktree path exists and is not this worker's worktree.
	ErrExists = errors.New("worktree path exists and is not this worker's worktree")
	// ErrUnmerged: refusing to delete a worker branch whose work is not
	// landed: it has commits on no other branch, tag or remote-tracking ref,
	// that Merge did not land and that are not patch-equivalent to commits
	// of its base branch (they would be lost).
	ErrUnmerged = errors.New("refusing to delete a branch with commits on no other branch")
	// ErrRunning: refusing to remove the worktree of a fleet worker that is
	// running (MarkRunning), even when forced.
	ErrRunning = errors.New("refusing to remove the worktree of a running fleet worker")
)

// gitAttempts is how often a mutating git command is tried when it loses a
// race for a lock file against a concurrent command.
const gitAttempts = 6

// Manager creates and removes one session's worktrees in one repository.
// Its methods are safe for concurrent use; calls for the same worker are
// serialised.
type Manager struct {
	repo    string // top level of the work tree Open was given, symlinks resolved
	root    string // <fleetHome>/worktrees/<session>, symlinks resolved
	session string
	head    string // HEAD at Open; "" for an unborn branch
	branch  string // the branch HEAD was on at Open; "" when detached
	dirty   bool
	cfgMu   sync.Mutex // serialises this manager's config writes, which contend for config.lock

	mu    sync.Mutex             // guards locks
	locks map[string]*sync.Mutex // per worker; entries are never removed (one per worker name)
}

// Worktree is one worker's worktree as Create made or found it.
type Worktree struct {
	Worker     string
	Path       string // absolute
	Branch     string // short name: fleet/<session>/<worker>
	BaseCommit string // the commit it started from (its recorded fleetStart, for an existing branch)
	// BaseBranch is the branch it started from and lands in by default: as
	// recorded in branch.<branch>.fleetBase, else the manager's BaseBranch.
	BaseBranch string
	Resumed    bool // it already existed (a resumed session or a repeated Create)
	Warnings   []string
}

// Info is one of the session's worktrees as List sees it.
type Info struct {
	Worker string
	Path   string
	Branch string // short name of the checked-out branch; "" when detached
	Head   string // commit checked out
	Dirty  bool   // uncommitted changes or untracked files
	// Missing: git still knows the worktree but its directory is gone
	// (deleted by hand). Create re-attaches it; Remove and Prune clean it up.
	Missing bool
}

// Open finds the repository containing dir and returns a manager whose
// worktrees live under root (created 0700) on branches
// fleet/<session>/<worker>. It records HEAD and whether the main work tree
// is dirty; worktrees start from that HEAD.
func Open(ctx context.Context, dir, root, session string) (*Manager, error) {
	if err := ValidSession(session); err != nil {
		return nil, fmt.Errorf("open worktrees: %w", err)
	}
	repo, err := toplevel(ctx, dir)
	if err != nil {
		return nil, err
	}
	head, err := resolveCommit(ctx, repo, "HEAD")
	if err != nil {
		return nil, fmt.Errorf("open worktrees: %w", err)
	}
	base, err := currentBranch(ctx, repo)
	if err != nil {
		return nil, fmt.Errorf("open worktrees: %w", err)
	}
	dirty, err := isDirty(ctx, repo)
	if err != nil {
		return nil, fmt.Errorf("open worktrees: %w", err)
	}
	if root, err = filepath.Abs(root); err != nil {
		return nil, fmt.Errorf("open worktrees: %w", err)
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("open worktrees: %w", err)
	}
	// git records worktree paths with symlinks resolved; so must we, to
	// recognise them (macOS's /var is /private/var).
	if root, err = filepath.EvalSymlinks(root); err != nil {
		return nil, fmt.Errorf("open worktrees: %w", err)
	}
	return &Manager{
		repo:    repo,
		root:    root,
		session: session,
		head:    head,
		branch:  base,
		dirty:   dirty,
		locks:   make(map[string]*sync.Mutex),
	}, nil
}

// RepoRoot returns the top level of the work tree Open was given: absolute,
// symlinks resolved.
func (m *Manager) RepoRoot() string { return m.repo }

// Root returns the directory the session's worktrees live in.
func (m *Manager) Root() string { return m.root }

// Head returns the commit HEAD was at when Open ran, "" if the repository
// had no commits.
func (m *Manager) Head() string { return m.head }

// BaseBranch returns the short name of the branch the work tree Open was
// given had checked out, "" when its HEAD was detached. New worktrees
// record it as their base branch.
func (m *Manager) BaseBranch() string { return m.branch }

// Dirty reports whether the main work tree had uncommitted changes or
// untracked files at Open. Worktrees start from Head without them.
func (m *Manager) Dirty() bool { return m.dirty }

// Branch returns the branch name of worker's worktree.
func (m *Manager) Branch(worker string) string { return "fleet/" + m.session + "/" + worker }

// Path returns the path of worker's worktree.
func (m *Manager) Path(worker string) string { return filepath.Join(m.root, worker) }

// lock serialises calls for one worker and returns the unlock function.
func (m *Manager) lock(worker string) func() {
	m.mu.Lock()
	l := m.locks[worker]
	if l == nil {
		l = new(sync.Mutex)
		m.locks[worker] = l
	}
	m.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// Create makes root/<worker> on a new branch fleet/<session>/<worker> at
// Head, recording BaseBranch and Head as the branch's fleetBase and
// fleetStart in the repository's config. If that path already is the
// worker's registered worktree it is returned as is (Resumed). If the
// branch exists but its worktree directory was deleted, the stale
// registration is pruned and the branch re-attached. An existing branch
// keeps its recorded metadata; what is missing is recorded as a new branch
// would have it. Any other existing path is ErrExists. Submodules are
// checked out; a failure there is a warning, not an error.
func (m *Manager) Create(ctx context.Context, worker string) (Worktree, error) {
	if err := ValidWorker(worker); err != nil {
		return Worktree{}, fmt.Errorf("create worktree: %w", err)
	}
	if m.head == "" {
		return Worktree{}, fmt.Errorf("create worktree for %s: repository %s has no commits yet; commit something first so workers have a HEAD to start from", worker, m.repo)
	}
	defer m.lock(worker)()
	// Open made root; a Prune since may have removed it, and git would
	// recreate it with the umask's permissions.
	if err := os.MkdirAll(m.root, 0o700); err != nil {
		return Worktree{}, fmt.Errorf("create worktree for %s: %w", worker, err)
	}
	var (
		wt    Worktree
		fresh bool
	)
	err := retryLocked(ctx, gitAttempts, func() (err error) {
		wt, fresh, err = m.create(ctx, worker)
		return err
	})
	if err == nil {
		// Outside the retried create: a new branch is new once, even if
		// recording loses a race for config.lock.
		err = m.record(ctx, &wt, fresh)
	}
	if err != nil {
		return Worktree{}, fmt.Errorf("create worktree for %s: %w", worker, err)
	}
	if !wt.Resumed {
		wt.Warnings = initSubmodules(ctx, wt.Path)
	}
	return wt, nil
}

// create is one attempt of Create; the worker's lock must be held. An
// attempt that loses a lock race leaves either nothing or the branch behind,
// and the next attempt takes it from there. fresh: it made the branch.
func (m *Manager) create(ctx context.Context, worker string) (wt Worktree, fresh bool, err error) {
	path, branch := m.Path(worker), m.Branch(worker)
	wt = Worktree{Worker: worker, Path: path, Branch: branch}
	entries, err := listWorktrees(ctx, m.repo)
	if err != nil {
		return wt, false, err
	}
	e := findWorktree(entries, path)
	if e != nil && !e.prunable && isDir(path) {
		if e.branch != "refs/heads/"+branch {
			return wt, false, fmt.Errorf("%w: %s is a worktree on %s, not on %s", ErrExists, path, e.describe(), branch)
		}
		wt.Resumed = true
		wt.BaseCommit, err = m.base(ctx, branch)
		return wt, false, err
	}
	if _, err := os.Lstat(path); err == nil {
		return wt, false, fmt.Errorf("%w: %s", ErrExists, path)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return wt, false, err
	}
	hasBranch, err := branchExists(ctx, m.repo, branch)
	if err != nil {
		return wt, false, err
	}
	if e != nil || hasBranch {
		// A registration whose directory is gone blocks `worktree add` of
		// the path and of the branch; prune clears it.
		if _, err := runGit(ctx, m.repo, "worktree", "prune"); err != nil {
			return wt, false, err
		}
	}
	if hasBranch {
		if _, err := runGit(ctx, m.repo, "worktree", "add", path, branch); err != nil {
			return wt, false, err
		}
		wt.BaseCommit, err = m.base(ctx, branch)
		return wt, false, err
	}
	if _, err := runGit(ctx, m.repo, "worktree", "add", "--no-track", "-b", branch, path, m.head); err != nil {
		return wt, false, err
	}
	wt.BaseCommit = m.head
	return wt, true, nil
}

// record sets wt.BaseBranch (and, from a recorded start, wt.BaseCommit)
// and records in the repository's config what the branch lacks: all of it
// for a fresh branch; for an existing one (made before the fleet recorded
// metadata, or by a Create interrupted before recording) the manager's base
// branch and the BaseCommit create found.
func (m *Manager) record(ctx context.Context, wt *Worktree, fresh bool) error {
	var meta branchMeta
	if !fresh {
		var err error
		if meta, err = readMeta(ctx, m.repo, wt.Branch); err != nil {
			return err
		}
		if meta.start != "" {
			start, err := resolveCommit(ctx, m.repo, meta.start)
			if err != nil {
				return err
			}
			if start != "" {
				wt.BaseCommit = start
			}
		}
	}
	wt.BaseBranch = cmp.Or(meta.base, m.branch)
	m.cfgMu.Lock()
	defer m.cfgMu.Unlock()
	if meta.base == "" && m.branch != "" {
		if err := setConfig(ctx, m.repo, wt.Branch, keyBase, m.branch); err != nil {
			return err
		}
	}
	if meta.start == "" && wt.BaseCommit != "" {
		if err := setConfig(ctx, m.repo, wt.Branch, keyStart, wt.BaseCommit); err != nil {
			return err
		}
	}
	return nil
}

// base returns where an existing branch started: its merge-base with Head,
// or its own head when they share no history.
func (m *Manager) base(ctx context.Context, branch string) (string, error) {
	ref := "refs/heads/" + branch
	if mb, err := gitLine(ctx, m.repo, "merge-base", ref, m.head); err == nil && mb != "" {
		return mb, nil
	}
	return resolveCommit(ctx, m.repo, ref)
}

// initSubmodules checks out the submodules of a fresh worktree, if it has
// any, and returns a warning when that fails. Local submodules need the
// file protocol, which git refuses by default since 2.38.1.
func initSubmodules(ctx context.Context, path string) []string {
	if _, err := os.Lstat(filepath.Join(path, ".gitmodules")); err != nil {
		return nil
	}
	err := retryLocked(ctx, gitAttempts, func() error {
		_, err := runGit(ctx, path, "-c", "protocol.file.allow=always", "submodule", "update", "--init", "--recursive")
		return err
	})
	if err != nil {
		return []string{"submodules not checked out: " + err.Error()}
	}
	return nil
}

// List returns this session's worktrees, sorted by worker.
func (m *Manager) List(ctx context.Context) ([]Info, error) {
	entries, err := listWorktrees(ctx, m.repo)
	if err != nil {
		return nil, fmt.Errorf("list worktrees: %w", err)
	}
	var infos []Info
	for _, e := range entries {
		if filepath.Dir(e.path) != m.root || ValidWorker(filepath.Base(e.path)) != nil {
			continue
		}
		in := Info{
			Worker:  filepath.Base(e.path),
			Path:    e.path,
			Branch:  strings.TrimPrefix(e.branch, "refs/heads/"),
			Head:    e.head,
			Missing: e.prunable,
		}
		if !in.Missing {
			// The worker's lock keeps a concurrent Create or Remove of it
			// from showing git a half-made or half-removed worktree.
			unlock := m.lock(in.Worker)
			if isDir(e.path) {
				in.Dirty, err = isDirty(ctx, e.path)
			} else {
				in.Missing = true // removed since the listing; skipped below
			}
			unlock()
			if err != nil {
				return nil, fmt.Errorf("list worktrees: %w", err)
			}
			if in.Missing {
				continue
			}
		}
		infos = append(infos, in)
	}
	slices.SortFunc(infos, func(a, b Info) int { return strings.Compare(a.Worker, b.Worker) })
	return infos, nil
}

// RemoveOptions say what Remove may throw away.
type RemoveOptions struct {
	// Force removes the worktree even with uncommitted changes or untracked
	// files (they are lost), and even when its branch is not landed, which
	// is then kept with its commits.
	Force bool
	// DeleteBranch, with Force, deletes an unlanded branch too: its commits
	// are lost. Without Force it changes nothing, as a landed branch is
	// deleted anyway and an unlanded one refused.
	DeleteBranch bool
}

// Remove removes root/<worker> and its branch. Without Force it refuses a
// dirty worktree (ErrDirty: uncommitted changes or untracked files; ignored
// files go with it) and a branch whose work is not landed (ErrUnmerged; see
// landed), and removes nothing then. With Force the worktree goes whatever
// it holds, and the branch only when landed or DeleteBranch is set. A
// worktree whose directory was deleted or moved by hand loses its
// registration only; the branch follows the same rules. A worker with
// neither worktree nor branch is fs.ErrNotExist.
func (m *Manager) Remove(ctx context.Context, worker string, o RemoveOptions) error {
	if err := ValidWorker(worker); err != nil {
		return fmt.Errorf("remove worktree: %w", err)
	}
	defer m.lock(worker)()
	if _, err := removeWorktree(ctx, m.repo, m.Path(worker), m.Branch(worker), m.branch, o); err != nil {
		return fmt.Errorf("remove worktree %s: %w", worker, err)
	}
	return nil
}

// removeWorktree removes the worktree at path (if registered in repo) and
// branch (if it exists), checking first, unless o.Force, that neither holds
// work that would be lost. base is the base branch to assume when the
// branch records none. kept: the branch stays, unlanded, because only the
// worktree was forced.
func removeWorktree(ctx context.Context, repo, path, branch, base string, o RemoveOptions) (kept bool, err error) {
	entries, err := listWorktrees(ctx, repo)
	if err != nil {
		return false, err
	}
	e := findWorktree(entries, path)
	if e == nil {
		if _, err := os.Lstat(path); err == nil {
			return false, fmt.Errorf("%w: %s is not a worktree of %s", ErrExists, path, repo)
		}
	}
	hasBranch, err := branchExists(ctx, repo, branch)
	if err != nil {
		return false, err
	}
	if e == nil && !hasBranch {
		return false, fmt.Errorf("%s: %w", path, fs.ErrNotExist)
	}
	present := e != nil && !e.prunable && isDir(path)
	if present && e.locked {
		// A running fleet worker's worktree is never removed, forced or not.
		reason, locked, err := lockReason(ctx, path)
		switch {
		case err == nil && locked && liveRunningMark(reason):
			return false, fmt.Errorf("%w: %s (%s)", ErrRunning, path, reason)
		case err == nil && locked && strings.HasPrefix(reason, runningMark):
			// Left by a fleet process that died: it protects nothing.
			if err := retryLocked(ctx, gitAttempts, func() error {
				_, err := runGit(ctx, repo, "worktree", "unlock", path)
				return err
			}); err != nil {
				return false, err
			}
			e.locked = false
		}
	}
	if present {
		dirty, err := isDirty(ctx, path)
		if err != nil {
			return false, err
		}
		switch {
		case dirty && !o.Force:
			return false, fmt.Errorf("%w: %s", ErrDirty, path)
		case dirty && hasBranch && !o.DeleteBranch:
			// Forced, but the branch stays: it keeps the uncommitted work
			// too, so only --delete-branch loses anything.
			if _, err := CommitAll(ctx, path, "Uncommitted work saved when its worktree was removed\n\nFleet-Branch: "+branch+"\n"); err != nil {
				return false, fmt.Errorf("save the uncommitted work of %s on %s before removing it: %w", path, branch, err)
			}
		}
	}
	isLanded := true
	if hasBranch {
		if isLanded, err = landed(ctx, repo, branch, base); err != nil {
			return false, err
		}
		if !isLanded && !o.Force {
			return false, fmt.Errorf("%w: %s (merge it, or force to remove only the worktree and keep the branch)", ErrUnmerged, branch)
		}
	}
	if e != nil {
		// --force because we checked cleanliness ourselves, and because git
		// refuses to remove a worktree with submodules without it. A locked
		// worktree needs it twice, which only the caller's force gives. A
		// directory that is gone (deleted or moved by hand) loses only its
		// registration: git deletes nothing that is not at the path.
		args := []string{"worktree", "remove", "--force"}
		if o.Force && e.locked {
			args = append(args, "--force")
		}
		args = append(args, path)
		if err := retryLocked(ctx, gitAttempts, func() error {
			_, err := runGit(ctx, repo, args...)
			return err
		}); err != nil {
			return false, err
		}
	}
	if hasBranch && o.Force && !o.DeleteBranch {
		return !isLanded, nil // forced: only the worktree goes
	}
	if hasBranch {
		if err := retryLocked(ctx, gitAttempts, func() error {
			_, err := runGit(ctx, repo, "branch", "-D", branch)
			return err
		}); err != nil {
			return false, err
		}
	}
	return false, nil
}

// PruneOptions say what Prune removes.
type PruneOptions struct {
	Force        bool   // as RemoveOptions.Force
	DeleteBranch bool   // as RemoveOptions.DeleteBranch
	Session      string // only this session's worktrees when set
}

// Prune removes every fleet worktree under fleetWorktrees
// (<fleetHome>/worktrees/<session>/<worker>) that belongs to the repository
// containing dir, across sessions (or of o.Session only), by Remove's
// rules, with its branch. Without Force it skips dirty ones and ones whose
// branch is not landed. removed lists the worktree paths removed, with
// "(branch <b> kept ...)" when Force removed only the worktree; skipped
// lists "<path>: <reason>". Do not prune while a fleet is running on the
// repository: its idle workers' clean worktrees would go too.
func Prune(ctx context.Context, dir, fleetWorktrees string, o PruneOptions) (removed, skipped []string, err error) {
	if o.Session != "" {
		if err := ValidSession(o.Session); err != nil {
			return nil, nil, fmt.Errorf("prune worktrees: %w", err)
		}
	}
	repo, err := toplevel(ctx, dir)
	if err != nil {
		return nil, nil, err
	}
	fw, err := filepath.Abs(fleetWorktrees)
	if err != nil {
		return nil, nil, fmt.Errorf("prune worktrees: %w", err)
	}
	if resolved, err := filepath.EvalSymlinks(fw); err == nil {
		fw = resolved
	} else if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	} else {
		return nil, nil, fmt.Errorf("prune worktrees: %w", err)
	}
	entries, err := listWorktrees(ctx, repo)
	if err != nil {
		return nil, nil, fmt.Errorf("prune worktrees: %w", err)
	}
	sessions := map[string]bool{}
	ro := RemoveOptions{Force: o.Force, DeleteBranch: o.DeleteBranch}
	for _, e := range entries {
		rel, err := filepath.Rel(fw, e.path)
		if err != nil {
			continue
		}
		session, worker, ok := strings.Cut(filepath.ToSlash(rel), "/")
		if !ok || ValidSession(session) != nil || ValidWorker(worker) != nil {
			continue
		}
		if o.Session != "" && session != o.Session {
			continue
		}
		sessions[session] = true
		if e.path == repo {
			skipped = append(skipped, e.path+": it is the work tree prune runs in")
			continue
		}
		branch := "fleet/" + session + "/" + worker
		kept, err := removeWorktree(ctx, repo, e.path, branch, "", ro)
		switch {
		case err == nil && kept:
			removed = append(removed, e.path+" (branch "+branch+" kept with its work: it is on no other branch)")
		case err == nil && o.Force && !o.DeleteBranch:
			removed = append(removed, e.path+" (branch "+branch+" kept)")
		case err == nil:
			removed = append(removed, e.path)
		case errors.Is(err, ErrDirty):
			skipped = append(skipped, e.path+": uncommitted changes (--force saves them on branch "+branch+" and removes the worktree)")
		case errors.Is(err, ErrRunning):
			skipped = append(skipped, e.path+": a running fleet worker uses it")
		case errors.Is(err, ErrUnmerged):
			skipped = append(skipped, e.path+": branch "+branch+" has commits on no other branch (merge them, or --force keeps the branch and removes only the worktree)")
		case ctx.Err() != nil:
			return removed, skipped, fmt.Errorf("prune worktrees: %w", err)
		default:
			skipped = append(skipped, e.path+": "+err.Error())
		}
	}
	for s := range sessions {
		os.Remove(filepath.Join(fw, s)) // only if empty; other repositories' worktrees may live there
	}
	return removed, skipped, nil
}

// toplevel returns the top level of the work tree containing dir, absolute
// with symlinks resolved, or an error wrapping ErrNotRepo.
func toplevel(ctx context.Context, dir string) (string, error) {
	out, err := gitLine(ctx, dir, "rev-parse", "--show-toplevel")
	if err != nil {
		if ctx.Err() != nil {
			return "", err
		}
		if notFound(err) {
			return "", fmt.Errorf("%w: %s: cannot run git: %w", ErrNotRepo, dir, err)
		}
		return "", fmt.Errorf("%w: %s: %w", ErrNotRepo, dir, err)
	}
	if out == "" {
		return "", fmt.Errorf("%w: %s", ErrNotRepo, dir)
	}
	top, err := filepath.EvalSymlinks(filepath.FromSlash(out))
	if err != nil {
		return "", fmt.Errorf("repository root: %w", err)
	}
	return filepath.Abs(top)
}

// resolveCommit returns the commit rev names, or "" if it names none (an
// unborn HEAD, a missing branch).
func resolveCommit(ctx context.Context, dir, rev string) (string, error) {
	out, err := gitLine(ctx, dir, "rev-parse", "--verify", "--quiet", rev+"^{commit}")
	if err != nil {
		if exitCode(err) == 1 && ctx.Err() == nil {
			return "", nil
		}
		return "", err
	}
	return out, nil
}

// currentBranch returns the short name of the branch checked out in the
// work tree at dir, "" when HEAD is detached.
func currentBranch(ctx context.Context, dir string) (string, error) {
	out, err := gitLine(ctx, dir, "symbolic-ref", "--quiet", "--short", "HEAD")
	if err != nil && exitCode(err) == 1 && ctx.Err() == nil {
		return "", nil
	}
	return out, err
}

func branchExists(ctx context.Context, dir, branch string) (bool, error) {
	c, err := resolveCommit(ctx, dir, "refs/heads/"+branch)
	return c != "", err
}

// isDirty reports whether the work tree at dir has uncommitted changes or
// untracked (not ignored) files. It takes no optional locks, so it never
// makes a concurrent git command in that work tree fail.
func isDirty(ctx context.Context, dir string) (bool, error) {
	out, err := runGit(ctx, dir, "--no-optional-locks", "status", "--porcelain", "-z", "--untracked-files=normal")
	if err != nil {
		return false, err
	}
	return len(out) > 0, nil
}

// maxLandCheck bounds how many unreachable commits landed compares with
// the base branch; a branch with more counts as not landed.
const maxLandCheck = 10000

// landed reports whether deleting branch loses no work: every commit of it
// is reachable from another branch, tag, remote-tracking ref or the
// repository's HEAD; or Merge landed its tip (fleetMerged, so a squash or
// a rebase counts); or every commit that is not reachable is
// patch-equivalent to one on its base branch (`git cherry` marks it "-":
// landed by a cherry-pick or rebase by hand). base is the base branch to
// assume when the branch records none.
func landed(ctx context.Context, repo, branch, base string) (bool, error) {
	lost, total, err := unreachable(ctx, repo, branch)
	if err != nil || total == 0 {
		return err == nil, err
	}
	meta, err := readMeta(ctx, repo, branch)
	if err != nil {
		return false, err
	}
	if meta.merged != "" {
		tip, err := resolveCommit(ctx, repo, "refs/heads/"+branch)
		if err != nil || tip == meta.merged {
			return err == nil, err
		}
	}
	base = cmp.Or(meta.base, base)
	if base == "" || total > len(lost) {
		return false, nil
	}
	if ok, err := branchExists(ctx, repo, base); err != nil || !ok {
		return false, err
	}
	// Merges are not in cherry's output: they never count as equivalent.
	equivalent := map[string]bool{}
	err = gitFields(ctx, repo, '\n', func(line string) error {
		if sha, ok := strings.CutPrefix(line, "- "); ok && lost[sha] {
			equivalent[sha] = true
		}
		return nil
	}, "cherry", "refs/heads/"+base, "refs/heads/"+branch)
	if err != nil {
		return false, err
	}
	return len(equivalent) == len(lost), nil
}

// unreachable returns the commits of branch that no other branch, tag,
// remote-tracking ref or the repository's HEAD reaches (at most
// maxLandCheck of them), and how many there are: deleting the branch would
// lose them.
func unreachable(ctx context.Context, repo, branch string) (map[string]bool, int, error) {
	args := []string{"rev-list", "refs/heads/" + branch, "--not",
		"--exclude=" + branch, "--branches", "--tags", "--remotes"}
	head, err := resolveCommit(ctx, repo, "HEAD")
	if err != nil {
		return nil, 0, err
	}
	if head != "" {
		args = append(args, head)
	}
	lost, total := map[string]bool{}, 0
	err = gitFields(ctx, repo, '\n', func(sha string) error {
		if total++; total <= maxLandCheck {
			lost[sha] = true
		}
		return nil
	}, args...)
	return lost, total, err
}

// wtEntry is one record of `git worktree list --porcelain -z`.
type wtEntry struct {
	path, head, branch string // branch is the full ref; "" when detached
	bare, detached     bool
	locked, prunable   bool
}

func (e *wtEntry) describe() string {
	switch {
	case e.branch != "":
		return "branch " + strings.TrimPrefix(e.branch, "refs/heads/")
	case e.detached:
		return "a detached HEAD"
	}
	return "no branch"
}

// listWorktrees returns the worktrees registered in the repository of dir,
// the main one first.
func listWorktrees(ctx context.Context, dir string) ([]wtEntry, error) {
	var out []byte
	err := retryLocked(ctx, gitAttempts, func() (err error) {
		out, err = runGit(ctx, dir, "worktree", "list", "--porcelain", "-z")
		return err
	})
	if err != nil {
		return nil, err
	}
	return parseWorktrees(out), nil
}

// parseWorktrees parses NUL-separated attribute fields, one record per
// worktree, each record ended by an empty field.
func parseWorktrees(out []byte) []wtEntry {
	var (
		entries []wtEntry
		cur     *wtEntry
	)
	for _, f := range strings.Split(string(out), "\x00") {
		if f == "" {
			cur = nil
			continue
		}
		key, val, _ := strings.Cut(f, " ")
		if key == "worktree" {
			entries = append(entries, wtEntry{path: filepath.Clean(filepath.FromSlash(val))})
			cur = &entries[len(entries)-1]
			continue
		}
		if cur == nil {
			continue
		}
		switch key {
		case "HEAD":
			cur.head = val
		case "branch":
			cur.branch = val
		case "bare":
			cur.bare = true
		case "detached":
			cur.detached = true
		case "locked":
			cur.locked = true
		case "prunable":
			cur.prunable = true
		}
	}
	return entries
}

func findWorktree(entries []wtEntry, path string) *wtEntry {
	for i := range entries {
		if entries[i].path == path {
			return &entries[i]
		}
	}
	return nil
}

func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}
