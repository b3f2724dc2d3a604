package worktree

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// FleetBranch is one fleet worker's branch fleet/<session>/<worker> as
// found in a repository, with its worktree if it has one.
type FleetBranch struct {
	Branch  string // fleet/<session>/<worker>
	Session string
	Worker  string
	Head    string
	Path    string // its registered worktree; "" when none
	Missing bool   // registered, but the directory is gone
	// Running is the running mark's reason while a live fleet worker uses
	// the worktree (MarkRunning); "" otherwise, also for a mark left by a
	// fleet process that has died.
	Running string
	Task    string // the task recorded on the branch ("t1: …"), if any
}

// runningMark starts the lock reason MarkRunning writes.
const runningMark = "agents-fleet: running worker "

// MarkRunning marks the worktree at path as in use by a running fleet
// worker: `git worktree lock` with a reason naming the worker and this
// process, so git itself refuses to remove or prune it and fleet commands
// in other processes can tell. A mark already there is replaced.
//
// git's worktree commands fail now and then while another worktree of the
// repository is being added (they read its half-written directory), so
// both marking and releasing retry that.
func MarkRunning(ctx context.Context, path, worker string) error {
	reason := fmt.Sprintf("%s%s (pid %d)", runningMark, worker, os.Getpid())
	err := retryLocked(ctx, gitAttempts, func() error {
		if _, locked, err := lockReason(ctx, path); err != nil {
			return err
		} else if locked { // a mark of a previous run
			if _, err := runGit(ctx, path, "worktree", "unlock", path); err != nil {
				return err
			}
		}
		_, err := runGit(ctx, path, "worktree", "lock", "--reason", reason, path)
		return err
	})
	if err != nil {
		return fmt.Errorf("mark worktree %s in use: %w", path, err)
	}
	return nil
}

// UnmarkRunning drops MarkRunning's mark. A worktree without a mark, or
// without its directory, is not an error. A mark left in place would make
// every landing command refuse the worker as still running for as long as
// this process lives, so a transient failure is retried.
func UnmarkRunning(ctx context.Context, path string) error {
	if !isDir(path) {
		return nil
	}
	err := retryLocked(ctx, gitAttempts, func() error {
		reason, locked, err := lockReason(ctx, path)
		if err != nil || !locked || !strings.HasPrefix(reason, runningMark) {
			return err // somebody else's lock stays
		}
		_, err = runGit(ctx, path, "worktree", "unlock", path)
		return err
	})
	if err != nil {
		return fmt.Errorf("release worktree %s: %w", path, err)
	}
	return nil
}

// lockReason reads the lock of the worktree at path.
func lockReason(ctx context.Context, path string) (reason string, locked bool, err error) {
	dir, err := gitLine(ctx, path, "rev-parse", "--absolute-git-dir")
	if err != nil {
		return "", false, err
	}
	b, err := os.ReadFile(filepath.Join(dir, "locked"))
	if errors.Is(err, os.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return strings.TrimSpace(string(b)), true, nil
}

// liveRunningMark reports whether reason is a running mark of a process
// that is still alive.
func liveRunningMark(reason string) bool {
	rest, ok := strings.CutPrefix(reason, runningMark)
	if !ok {
		return false
	}
	_, pidPart, ok := strings.Cut(rest, "(pid ")
	if !ok {
		return false
	}
	pid, err := strconv.Atoi(strings.TrimSuffix(pidPart, ")"))
	if err != nil || pid <= 0 {
		return false
	}
	return processAlive(pid)
}

// SetBranchNote records value under branch.<branch>.<key> in the
// repository's config; "" removes it.
func SetBranchNote(ctx context.Context, repo, branch, key, value string) error {
	name := "branch." + branch + "." + key
	return retryLocked(ctx, gitAttempts, func() error {
		if value == "" {
			_, err := runGit(ctx, repo, "config", "--unset", name)
			if exitCode(err) == 5 { // not set
				return nil
			}
			return err
		}
		_, err := runGit(ctx, repo, "config", name, value)
		return err
	})
}

// BranchNote reads branch.<branch>.<key>; "" when unset.
func BranchNote(ctx context.Context, repo, branch, key string) (string, error) {
	out, err := runGit(ctx, repo, "config", "--get", "branch."+branch+"."+key)
	if exitCode(err) == 1 && ctx.Err() == nil {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return strings.TrimRight(string(out), "\n"), nil
}

// NoteTask is the branch note holding the task a worker ran.
const NoteTask = "fleetTask"

// FleetBranches lists the fleet worker branches of the repository
// containing dir, sorted by branch, and returns the repository's top level.
func FleetBranches(ctx context.Context, dir string) (string, []FleetBranch, error) {
	repo, err := toplevel(ctx, dir)
	if err != nil {
		return "", nil, err
	}
	out, err := runGit(ctx, repo, "for-each-ref", "--format=%(objectname) %(refname)", "refs/heads/fleet/")
	if err != nil {
		return "", nil, fmt.Errorf("list fleet branches: %w", err)
	}
	entries, err := listWorktrees(ctx, repo)
	if err != nil {
		return "", nil, fmt.Errorf("list fleet branches: %w", err)
	}
	var list []FleetBranch
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		head, ref, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		name := strings.TrimPrefix(ref, "refs/heads/")
		parts := strings.Split(name, "/")
		if len(parts) != 3 || ValidSession(parts[1]) != nil || ValidWorker(parts[2]) != nil {
			continue
		}
		fb := FleetBranch{Branch: name, Session: parts[1], Worker: parts[2], Head: head}
		for _, e := range entries {
			if e.branch == ref {
				fb.Path, fb.Missing = e.path, e.prunable || !isDir(e.path)
				if !fb.Missing {
					if reason, locked, err := lockReason(ctx, e.path); err == nil && locked && liveRunningMark(reason) {
						fb.Running = reason
					}
				}
				break
			}
		}
		list = append(list, fb)
	}
	tasks, err := branchNotes(ctx, repo, NoteTask)
	if err != nil {
		return "", nil, fmt.Errorf("list fleet branches: %w", err)
	}
	for i := range list {
		list[i].Task = tasks[list[i].Branch]
	}
	slices.SortFunc(list, func(a, b FleetBranch) int { return strings.Compare(a.Branch, b.Branch) })
	return repo, list, nil
}

// branchNotes reads note key of every fleet branch with one git config,
// by branch.
func branchNotes(ctx context.Context, repo, key string) (map[string]string, error) {
	out, err := runGit(ctx, repo, "config", "--null", "--get-regexp", `^branch\.fleet/.*\.`+strings.ToLower(key)+`$`)
	notes := map[string]string{}
	if exitCode(err) == 1 && ctx.Err() == nil {
		return notes, nil // none set
	}
	if err != nil {
		return nil, err
	}
	// --null: "<name>\n<value>\x00" per entry.
	for _, entry := range strings.Split(string(out), "\x00") {
		name, value, ok := strings.Cut(entry, "\n")
		if !ok {
			continue
		}
		branch := strings.TrimPrefix(name, "branch.")
		if branch, ok := strings.CutSuffix(branch, "."+strings.ToLower(key)); ok {
			notes[branch] = value
		}
	}
	return notes, nil
}

// Fingerprint is a digest of every branch and remote-tracking ref of the
// repository containing dir and of its HEAD: it changes whenever one moves.
func Fingerprint(ctx context.Context, dir string) (string, error) {
	out, err := runGit(ctx, dir, "for-each-ref", "--format=%(objectname) %(refname)", "refs/heads/", "refs/remotes/")
	if err != nil {
		return "", fmt.Errorf("fingerprint refs: %w", err)
	}
	head, _ := gitLine(ctx, dir, "rev-parse", "-q", "--verify", "HEAD")
	sum := sha256.Sum256(append(out, head...))
	return hex.EncodeToString(sum[:]), nil
}

// RemoteURL returns the URL of remote in the repository at repo.
func RemoteURL(ctx context.Context, repo, remote string) (string, error) {
	return gitLine(ctx, repo, "remote", "get-url", remote)
}

// TopLevel returns the top level of the work tree containing dir (symlinks
// resolved), or an error wrapping ErrNotRepo.
func TopLevel(ctx context.Context, dir string) (string, error) { return toplevel(ctx, dir) }
