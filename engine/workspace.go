package engine

import (
	"context"
	"time"

	"github.com/agents-fleet/fleet/protocol"
)

// Workspaces gives each worker a directory of its own (a git worktree) and
// reports the files a command changed there. It is optional: without it
// every task runs in the fleet's cwd and no file changes are reported.
type Workspaces interface {
	// Prepare creates the worker's workspace. It may take a while (git).
	Prepare(ctx context.Context, worker string) (Workspace, error)
	// Remove deletes a finished worker's workspace. Without Force it keeps
	// one with uncommitted changes or work that is on no other branch;
	// with Force the branch stays unless DeleteBranch.
	Remove(ctx context.Context, worker string, opts RemoveOptions) error
}

// Workspace is one worker's directory.
type Workspace struct {
	Dir          string // where the worker's tasks run
	WorktreePath string // reported as the worker's worktreePath
	Branch       string
	BaseCommit   string
	Warnings     []string // shown to the operator once, as system lines
	// Track starts watching for file changes before a command and returns
	// a function that reports what changed when the command is over. Nil
	// when changes are not tracked.
	Track func(ctx context.Context) (done func(ctx context.Context) ([]FileChange, error), err error)
}

// FileChange is one file a command created, edited or deleted.
type FileChange struct {
	Path         string // relative to the fleet's cwd
	AbsolutePath string // the file in the worker's workspace
	Type         protocol.ChangeType
	Tool         string // the tool that made it; "" is the shell
}

// workspaceTimeout bounds the git work around one task.
const workspaceTimeout = 2 * time.Minute

// publishChanges sends one fileChange event for a turn's changes.
func (e *Engine) publishChanges(w *worker, changes []FileChange) {
	if len(changes) == 0 {
		return
	}
	now := nowMs()
	m := &protocol.FileChange{Ts: now, Changes: make([]protocol.FileChangeEntry, 0, len(changes))}
	for _, c := range changes {
		tool := c.Tool
		if tool == "" {
			tool = "shell"
		}
		m.Changes = append(m.Changes, protocol.FileChangeEntry{
			Path: c.Path, AbsolutePath: c.AbsolutePath, Agent: w.id, Tool: tool, ChangeType: c.Type, Ts: now,
		})
	}
	e.pub.Broadcast(m)
}
