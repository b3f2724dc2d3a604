package daemon

import (
	"context"
	"fmt"

	"github.com/agents-fleet/fleet/engine"
	"github.com/agents-fleet/fleet/landing"
	"github.com/agents-fleet/fleet/protocol"
	"github.com/agents-fleet/fleet/worktree"
)

// gitWorkspaces is the engine's Lander: workers' work lives on their
// branches, and package landing lands it (docs/landing-work.md).
var _ engine.Lander = (*gitWorkspaces)(nil)

func (g *gitWorkspaces) worker(id string, work engine.Work) landing.Worker {
	w := landing.Worker{Repo: g.m.RepoRoot(), Branch: g.m.Branch(id), Session: g.session, Name: id, Path: g.m.Path(id)}
	if work.TaskID != "" {
		w.Task = landing.TaskNote(work.TaskID, work.Task)
	}
	return w
}

func (g *gitWorkspaces) GitState(ctx context.Context, worker string) (*protocol.WorkerGit, error) {
	st, err := worktree.ReadState(ctx, g.m.RepoRoot(), g.m.Branch(worker), g.m.Path(worker))
	if err != nil {
		return nil, err
	}
	return landing.Wire(st), nil
}

func (g *gitWorkspaces) Fingerprint(ctx context.Context) (string, error) {
	return worktree.Fingerprint(ctx, g.m.RepoRoot())
}

// Started records the task on the worker's branch (so landing commands
// outside the fleet can name it) and marks the worktree in use.
func (g *gitWorkspaces) Started(ctx context.Context, worker string, work engine.Work) error {
	if err := worktree.SetBranchNote(ctx, g.m.RepoRoot(), g.m.Branch(worker), worktree.NoteTask, landing.TaskNote(work.TaskID, work.Task)); err != nil {
		return err
	}
	return worktree.MarkRunning(ctx, g.m.Path(worker), worker)
}

// Settled commits the worker's uncommitted changes (when commit) and
// drops the running mark, whatever the commit did.
func (g *gitWorkspaces) Settled(ctx context.Context, worker string, work engine.Work, commit bool) (string, error) {
	var sha string
	var err error
	if commit {
		sha, err = worktree.CommitAll(ctx, g.m.Path(worker), landing.CommitMessage(landing.Settled{
			TaskID: work.TaskID, Task: work.Task, Worker: worker, Provider: work.Provider, Model: work.Model,
			Session: work.SessionID, Failed: work.Failed, Reason: work.Reason,
		}))
	}
	if uerr := worktree.UnmarkRunning(ctx, g.m.Path(worker)); uerr != nil && err == nil {
		err = uerr
	}
	return sha, err
}

func (g *gitWorkspaces) Diff(ctx context.Context, worker string, o engine.DiffRequest, max int) (string, bool, error) {
	b := &cappedBuffer{max: max}
	err := worktree.Diff(ctx, b, g.m.RepoRoot(), g.m.Branch(worker), g.m.Path(worker), worktree.DiffOptions{Stat: o.Stat, Paths: o.Paths})
	return string(b.buf), b.cut, err
}

func (g *gitWorkspaces) Merge(ctx context.Context, worker string, o engine.MergeRequest, work engine.Work) (string, error) {
	mode := worktree.MergeCommit
	switch o.Mode {
	case "squash":
		mode = worktree.Squash
	case "rebase":
		mode = worktree.Rebase
	case "", "merge":
	default:
		return "", fmt.Errorf("unknown merge mode %q", o.Mode)
	}
	w := g.worker(worker, work)
	if work.TaskID == "" {
		if note, err := worktree.BranchNote(ctx, w.Repo, w.Branch, worktree.NoteTask); err == nil {
			w.Task = note
		}
	}
	return landing.Merge(ctx, w, mode, o.Into)
}

// Apply applies worker's change to the repository's main work tree.
func (g *gitWorkspaces) Apply(ctx context.Context, worker string, paths []string) (string, error) {
	return landing.Apply(ctx, g.m.RepoRoot(), g.worker(worker, engine.Work{}), paths)
}

// PushCommand is the push fleet pr runs for worker.
func (g *gitWorkspaces) PushCommand(worker string) string {
	return "git push --set-upstream " + g.remote() + " " + g.m.Branch(worker)
}

func (g *gitWorkspaces) remote() string {
	if g.landing.Remote != "" {
		return g.landing.Remote
	}
	return "origin"
}

func (g *gitWorkspaces) PR(ctx context.Context, worker string, draft bool, work engine.Work) (string, error) {
	w := g.worker(worker, work)
	if work.TaskID == "" {
		if note, err := worktree.BranchNote(ctx, w.Repo, w.Branch, worktree.NoteTask); err == nil {
			w.Task = note
		}
	}
	out := &cappedBuffer{max: 16 << 10}
	err := landing.PR(ctx, w, landing.PROptions{Draft: draft, Remote: g.remote(), Hook: g.landing.PRCommand, Out: out})
	return string(out.buf), err
}

// cappedBuffer keeps the first max bytes written to it.
type cappedBuffer struct {
	buf []byte
	max int
	cut bool
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	room := c.max - len(c.buf)
	if len(p) > room {
		c.buf = append(c.buf, p[:max(room, 0)]...)
		c.cut = true
	} else {
		c.buf = append(c.buf, p...)
	}
	return len(p), nil
}
