package engine

import (
	"context"
	"fmt"
	"strings"
)

// cmdClean removes finished workers' workspaces in the background: git can
// take a while and must not hold the engine's lock.
func (e *Engine) cmdClean(args string) (string, error) {
	if e.cfg.Workspaces == nil {
		return "", failure("Workers share the fleet's directory here (not a git repository): there are no worktrees to clean.")
	}
	var opts RemoveOptions
	var names []string
	for _, f := range strings.Fields(args) {
		switch {
		case f == "--force" || f == "-f":
			opts.Force = true
		case f == "--delete-branch":
			opts.DeleteBranch = true
		case strings.HasPrefix(f, "-"):
			return "", failure("Usage: /clean [worker...] [--force [--delete-branch]]")
		default:
			names = append(names, f)
		}
	}
	var targets []*worker
	for _, name := range names {
		w := e.workerByID[name]
		switch {
		case w == nil:
			return "", failf("No worker %q. /workers lists them.", name)
		case w.status == workerRunning || w.status == workerIdle:
			return "", failf("%s is still running; /cancel it first.", name)
		case w.landing:
			return "", failf("%s is being merged.", name)
		case w.worktreePath == "" || w.cleaning:
			return "", failf("%s has no worktree to remove.", name)
		}
		targets = append(targets, w)
	}
	if len(names) == 0 {
		for _, w := range e.workers {
			if (w.status == workerCompleted || w.status == workerFailed) && w.worktreePath != "" && !w.cleaning && !w.landing {
				targets = append(targets, w)
			}
		}
	}
	if len(targets) == 0 {
		return "No finished worker has a worktree left.", nil
	}
	for _, w := range targets {
		w.cleaning = true
	}
	e.runWG.Add(1)
	go func() {
		defer e.runWG.Done()
		e.removeWorkspaces(targets, opts)
	}()
	return "", nil
}

func (e *Engine) removeWorkspaces(targets []*worker, opts RemoveOptions) {
	var removed, kept []string
	for _, w := range targets {
		ctx, cancel := context.WithTimeout(context.Background(), workspaceTimeout)
		err := e.cfg.Workspaces.Remove(ctx, w.id, opts)
		cancel()
		e.mu.Lock()
		w.cleaning = false
		if err == nil {
			w.worktreePath = ""
			w.gitStale = true
			e.saveWorkerLocked(w)
			e.changedLocked()
			removed = append(removed, w.id)
		} else {
			kept = append(kept, fmt.Sprintf("%s (%v)", w.id, err))
		}
		e.mu.Unlock()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	msg := fmt.Sprintf("Removed %d worktree(s)", len(removed))
	if len(removed) > 0 {
		msg += ": " + strings.Join(removed, ", ")
		if opts.Force && !opts.DeleteBranch {
			msg += " (their branches are kept; /clean --force --delete-branch deletes them too)"
		}
	}
	if len(kept) > 0 {
		msg += fmt.Sprintf(". Kept %d: %s", len(kept), strings.Join(kept, "; "))
		if !opts.Force {
			msg += ". Merge their work first (/merge), or /clean --force removes the worktree and keeps the branch."
		}
		// Not all that was asked was done: a script must be able to tell.
		e.replyErrorLocked(msg)
		return
	}
	e.replyLocked(msg)
}
