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
// Remove and Prune never drop uncommitted work or unmerged commits without
// force.
//
// TakeSnapshot and Diff (or Changes, when a command may commit) turn a
// command's effect on a work tree into created/edited/deleted files; see
// snapshot.go and docs/worktrees.md.
//
// Everything shells out to git (2.36 or later, for `worktree list -z`) with
// the caller's context, GIT_TERMINAL_PROMPT=0, LC_ALL=C and without the
// caller's GIT_DIR, GIT_WORK_TREE or GIT_INDEX_FILE.
package worktree

import (
	"bytes"
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
	// ErrUnmerged: refusing to delete a worker branch whose commits are on no
	// other branch, tag or remote-tracking ref (they would be lost).
	ErrUnmerged = errors.New("refusing to delete a branch with commits on no other branch")
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
	dirty   bool

	mu    sync.Mutex             // guards locks
	locks map[string]*sync.Mutex // per worker; entries are never removed (one per worker name)
}

// Worktree is one worker's worktree as Create made or found it.
type Worktree struct {
	Worker     string
	Path       string // absolute
	Branch     string // short name: fleet/<session>/<worker>
	BaseCommit string // the commit it started from
	Resumed    bool   // it already existed (a resumed session or a repeated Create)
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
// Head. If that path already is the worker's registered worktree it is
// returned as is (Resumed). If the branch exists but its worktree directory
// was deleted, the stale registration is pruned and the branch re-attached.
// Any other existing path is ErrExists. Submodules are checked out; a
// failure there is a warning, not an error.
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
	var wt Worktree
	err := retryLocked(ctx, gitAttempts, func() (err error) {
		wt, err = m.create(ctx, worker)
		return err
	})
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
// and the next attempt takes it from there.
func (m *Manager) create(ctx context.Context, worker string) (Worktree, error) {
	path, branch := m.Path(worker), m.Branch(worker)
	wt := Worktree{Worker: worker, Path: path, Branch: branch}
	entries, err := listWorktrees(ctx, m.repo)
	if err != nil {
		return wt, err
	}
	e := findWorktree(entries, path)
	if e != nil && !e.prunable && isDir(path) {
		if e.branch != "refs/heads/"+branch {
			return wt, fmt.Errorf("%w: %s is a worktree on %s, not on %s", ErrExists, path, e.describe(), branch)
		}
		wt.Resumed = true
		wt.BaseCommit, err = m.base(ctx, branch)
		return wt, err
	}
	if _, err := os.Lstat(path); err == nil {
		return wt, fmt.Errorf("%w: %s", ErrExists, path)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return wt, err
	}
	hasBranch, err := branchExists(ctx, m.repo, branch)
	if err != nil {
		return wt, err
	}
	if e != nil || hasBranch {
		// A registration whose directory is gone blocks `worktree add` of
		// the path and of the branch; prune clears it.
		if _, err := runGit(ctx, m.repo, "worktree", "prune"); err != nil {
			return wt, err
		}
	}
	if hasBranch {
		if _, err := runGit(ctx, m.repo, "worktree", "add", path, branch); err != nil {
			return wt, err
		}
		wt.BaseCommit, err = m.base(ctx, branch)
		return wt, err
	}
	if _, err := runGit(ctx, m.repo, "worktree", "add", "--no-track", "-b", branch, path, m.head); err != nil {
		return wt, err
	}
	wt.BaseCommit = m.head
	return wt, nil
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

// Remove removes root/<worker> and its branch. Without force it refuses a
// dirty worktree (ErrDirty: uncommitted changes or untracked files; ignored
// files go with it) and a branch whose commits are on no other branch, tag
// or remote-tracking ref (ErrUnmerged). Nothing is removed when it refuses.
// A worker with neither worktree nor branch is fs.ErrNotExist.
func (m *Manager) Remove(ctx context.Context, worker string, force bool) error {
	if err := ValidWorker(worker); err != nil {
		return fmt.Errorf("remove worktree: %w", err)
	}
	defer m.lock(worker)()
	if err := removeWorktree(ctx, m.repo, m.Path(worker), m.Branch(worker), force); err != nil {
		return fmt.Errorf("remove worktree %s: %w", worker, err)
	}
	return nil
}

// removeWorktree removes the worktree at path (if registered in repo) and
// branch (if it exists), checking first, unless force, that neither holds
// work that would be lost.
func removeWorktree(ctx context.Context, repo, path, branch string, force bool) error {
	entries, err := listWorktrees(ctx, repo)
	if err != nil {
		return err
	}
	e := findWorktree(entries, path)
	if e == nil {
		if _, err := os.Lstat(path); err == nil {
			return fmt.Errorf("%w: %s is not a worktree of %s", ErrExists, path, repo)
		}
	}
	hasBranch, err := branchExists(ctx, repo, branch)
	if err != nil {
		return err
	}
	if e == nil && !hasBranch {
		return fmt.Errorf("%s: %w", path, fs.ErrNotExist)
	}
	if !force {
		if e != nil && !e.prunable && isDir(path) {
			dirty, err := isDirty(ctx, path)
			if err != nil {
				return err
			}
			if dirty {
				return fmt.Errorf("%w: %s", ErrDirty, path)
			}
		}
		if hasBranch {
			lost, err := unmerged(ctx, repo, branch)
			if err != nil {
				return err
			}
			if lost {
				return fmt.Errorf("%w: %s", ErrUnmerged, branch)
			}
		}
	}
	if e != nil {
		// --force because we checked cleanliness ourselves, and because git
		// refuses to remove a worktree with submodules without it. A locked
		// worktree needs it twice, which only the caller's force gives.
		args := []string{"worktree", "remove", "--force"}
		if force && e.locked {
			args = append(args, "--force")
		}
		args = append(args, path)
		if err := retryLocked(ctx, gitAttempts, func() error {
			_, err := runGit(ctx, repo, args...)
			return err
		}); err != nil {
			return err
		}
	}
	if hasBranch {
		if err := retryLocked(ctx, gitAttempts, func() error {
			_, err := runGit(ctx, repo, "branch", "-D", branch)
			return err
		}); err != nil {
			return err
		}
	}
	return nil
}

// Prune removes every fleet worktree under fleetWorktrees
// (<fleetHome>/worktrees/<session>/<worker>) that belongs to the repository
// containing dir, across sessions, with its branch. Without force it skips
// dirty ones and ones whose branch has unmerged commits. removed lists the
// worktree paths removed; skipped lists "<path>: <reason>". Do not prune
// while a fleet is running on the repository: its idle workers' clean
// worktrees would go too.
func Prune(ctx context.Context, dir, fleetWorktrees string, force bool) (removed, skipped []string, err error) {
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
	for _, e := range entries {
		rel, err := filepath.Rel(fw, e.path)
		if err != nil {
			continue
		}
		session, worker, ok := strings.Cut(filepath.ToSlash(rel), "/")
		if !ok || ValidSession(session) != nil || ValidWorker(worker) != nil {
			continue
		}
		sessions[session] = true
		if e.path == repo {
			skipped = append(skipped, e.path+": it is the work tree prune runs in")
			continue
		}
		err = removeWorktree(ctx, repo, e.path, "fleet/"+session+"/"+worker, force)
		switch {
		case err == nil:
			removed = append(removed, e.path)
		case errors.Is(err, ErrDirty):
			skipped = append(skipped, e.path+": uncommitted changes")
		case errors.Is(err, ErrUnmerged):
			skipped = append(skipped, e.path+": branch fleet/"+session+"/"+worker+" has commits on no other branch")
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

// unmerged reports whether branch has commits that no other branch, tag,
// remote-tracking ref or the repository's HEAD reaches: deleting it would
// lose them.
func unmerged(ctx context.Context, repo, branch string) (bool, error) {
	args := []string{"rev-list", "--max-count=1", "refs/heads/" + branch, "--not",
		"--exclude=" + branch, "--branches", "--tags", "--remotes"}
	head, err := resolveCommit(ctx, repo, "HEAD")
	if err != nil {
		return false, err
	}
	if head != "" {
		args = append(args, head)
	}
	out, err := runGit(ctx, repo, args...)
	if err != nil {
		return false, err
	}
	return len(bytes.TrimSpace(out)) > 0, nil
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
