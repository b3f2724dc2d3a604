// Package proctree ends an agent process and everything it started. Agent
// CLIs start their tools' commands in process groups or sessions of their
// own (Claude Code's and Copilot's shells) or keep them running after a
// turn is interrupted (Codex), so killing the CLI's process group is not
// enough. A Tree marks the CLI's environment with a unique value; every
// descendant inherits it, however it detached, and Kill ends each process
// that carries it.
//
// On Linux the marked processes are found in /proc. On other Unix systems
// only the CLI's process group is killed (best effort, documented in
// docs/providers.md); on Windows, the process itself.
//
// A Group is the simpler unit a shell command needs: the process and what
// it starts, ended together without marks (a process group on Unix, a job
// object on Windows).
package proctree

import (
	"crypto/rand"
	"encoding/hex"
	"os/exec"
	"slices"
	"sync"
	"time"
)

// Group is a started process and everything it starts, ended as one: on
// Unix the process group the process leads (a descendant that left it with
// setsid escapes it; a Tree's marks find those), on Windows a job object
// the process joined before it ran, which no descendant can leave. Kill
// ends it.
type Group struct{ group }

// StartGroup starts cmd (cmd.Start) as the first process of a new Group.
// cmd.SysProcAttr may be set already; StartGroup adds what it needs. On an
// error nothing of cmd is left running.
func StartGroup(cmd *exec.Cmd) (*Group, error) {
	g := &Group{}
	if err := g.start(cmd); err != nil {
		return nil, err
	}
	return g, nil
}

// Kill ends every process of the group. It is safe to call more than once
// and after the first process has exited: what it left in the group goes.
// On Windows the first call also releases the job.
func (g *Group) Kill() { g.kill() }

// RunEnv is the environment variable that marks one agent process tree.
const RunEnv = "AGENTS_FLEET_RUN"

// Tree is one agent process and its descendants.
type Tree struct {
	mark string

	mu sync.Mutex
	g  *Group // the Group Start made; nil before (or with Prepare)
}

// New returns a Tree with a fresh mark.
func New() *Tree {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return &Tree{mark: hex.EncodeToString(b[:])}
}

// Mark is the tree's RunEnv value.
func (t *Tree) Mark() string { return t.mark }

// Env returns env with the tree's mark added.
func (t *Tree) Env(env []string) []string {
	return append(slices.Clip(env), RunEnv+"="+t.mark)
}

// Prepare makes cmd the leader of a process group of its own, so a signal
// to the group reaches what it starts in the group. Start does more on
// Windows; Prepare is for callers that start cmd themselves (cmd.Run).
func (t *Tree) Prepare(cmd *exec.Cmd) { setGroup(cmd) }

// Start starts cmd as the first process of the tree's Group: its process
// group on Unix, a job object on Windows, where nothing else finds what the
// agent started (there are no marks to read there). Kill ends the Group.
func (t *Tree) Start(cmd *exec.Cmd) error {
	g, err := StartGroup(cmd)
	if err != nil {
		return err
	}
	t.mu.Lock()
	t.g = g
	t.mu.Unlock()
	return nil
}

// killBound is how long Kill keeps sweeping for processes that were being
// forked while it ran.
const killBound = 3 * time.Second

// Kill ends cmd's process group (the Group, after Start) and every
// process carrying the tree's mark, sweeping until none is left or a bound
// passes. It returns how many marked processes it found beyond the group
// leader. Safe to call more than once, and before cmd started.
func (t *Tree) Kill(cmd *exec.Cmd) int {
	t.mu.Lock()
	g := t.g
	t.mu.Unlock()
	switch {
	case g != nil:
		g.Kill()
	case cmd != nil && cmd.Process != nil:
		killGroup(cmd.Process.Pid)
	}
	return SweepMarked(RunEnv, t.mark, -1)
}

// SweepMarked kills the processes whose environment has name=value, with
// their process groups except spare (-1: none), sweeping again while new
// ones appear (they were being forked) for a bounded time. It returns how
// many it found. Adapters use it to end what a turn started while the CLI
// itself, in group spare, lives on.
func SweepMarked(name, value string, spare int) int {
	found := 0
	deadline := time.Now().Add(killBound)
	for {
		pids := killMarked(name, value, "", spare)
		found += len(pids)
		if len(pids) == 0 || time.Now().After(deadline) {
			return found
		}
		time.Sleep(20 * time.Millisecond) // let the killed exit before the next sweep
	}
}

// Alive reports the pids of processes still carrying the tree's mark (on
// Linux; nil elsewhere). Tests use it to check that nothing is left.
func (t *Tree) Alive() []int { return findMarked(RunEnv, t.mark, "") }

// FindMarked lists this user's live processes (zombies excluded) whose
// environment has name=value, on Linux; nil elsewhere.
func FindMarked(name, value string) []int { return findMarked(name, value, "") }
