package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"github.com/agents-fleet/fleet/protocol"
	"github.com/agents-fleet/fleet/provider"
)

// Task statuses (fleetState.tasks counts and items).
const (
	taskPending = "pending"
	taskRunning = "running"
	taskBlocked = "blocked" // waiting on a confirm or ask
	taskDone    = "done"
	taskFailed  = "failed"
)

// Worker statuses (workerStatusCounts).
const (
	workerRunning   = "running"
	workerIdle      = "idle" // live, waiting for input (blocked on a request)
	workerCompleted = "completed"
	workerFailed    = "failed"
)

var (
	errShutdown  = errors.New("the fleet is shutting down")
	errCancelled = errors.New("cancelled by the operator")
)

type task struct {
	id        string
	command   string
	status    string
	worker    string
	createdAt time.Time
	reason    string // why it failed
	planned   bool   // created in plan mode: waits for /go
	loopID    string // the loop this task is an iteration of
	attempt   int    // the loop iteration (1-based); 0 outside loops
	cancelled bool   // the operator cancelled it (ends its loop too)
	// Native sessions: recorded in the root yet, and why the root keeps it
	// waiting.
	reserved   bool
	waitReason string
}

type worker struct {
	id, name  string
	status    string
	taskID    string
	startedAt time.Time
	endedAt   time.Time
	cancel    context.CancelCauseFunc
	toolUses  int64
	lastTool  string
	// The worker's workspace, once prepared.
	worktreePath, branch, baseCommit string
	cleaning                         bool // /clean is removing its worktree
	// lastActivity is updated on the hot output path without e.mu.
	lastActivity atomic.Int64 // epoch ms
}

type toolStat struct {
	count    int64
	lastUsed int64
}

// addTaskLocked creates a pending task and announces it. In plan mode it
// waits for /go.
func (e *Engine) addTaskLocked(command string) *task {
	e.nextTask++
	e.saveCounterLocked(counterTask, e.nextTask)
	t := &task{id: fmt.Sprintf("t%d", e.nextTask), command: command, status: taskPending, createdAt: time.Now(), planned: e.planMode}
	e.tasks = append(e.tasks, t)
	e.taskByID[t.id] = t
	e.hubLocked("coordinator", "task.created", t.id+": "+t.command)
	e.saveTaskLocked(t)
	e.changedLocked()
	return t
}

// dispatchLocked starts pending tasks while there is room under the cap.
func (e *Engine) dispatchLocked() {
	if e.paused || e.closing {
		return
	}
	if e.cfg.Governor != nil {
		e.GovernorChanged() // the root decides what starts (admitLoop)
		return
	}
	running := 0
	for _, w := range e.workers {
		if w.status == workerRunning || w.status == workerIdle {
			running++
		}
	}
	for _, t := range e.tasks {
		if running >= e.cfg.Workers {
			return
		}
		if t.status == taskPending && !t.planned {
			e.startLocked(t)
			running++
		}
	}
}

// setTaskLocked moves a task to a new status and announces it.
func (e *Engine) setTaskLocked(t *task, status, note string) {
	t.status = status
	text := t.id + " " + status
	if note != "" {
		text += ": " + note
	}
	e.hubLocked("coordinator", "task.updated", text)
	e.saveTaskLocked(t)
	e.changedLocked()
}

// startLocked spawns a worker for t and runs it on its own goroutine.
func (e *Engine) startLocked(t *task) {
	e.nextWorker++
	e.saveCounterLocked(counterWorker, e.nextWorker)
	id := fmt.Sprintf("w%d", e.nextWorker)
	ctx, cancel := context.WithCancelCause(context.Background())
	w := &worker{id: id, name: id, status: workerRunning, taskID: t.id, startedAt: time.Now(), cancel: cancel}
	w.lastActivity.Store(nowMs())
	e.workers = append(e.workers, w)
	e.workerByID[id] = w
	t.worker = id
	e.hubLocked(id, "spawned", t.id+": "+t.command)
	e.saveWorkerLocked(w)
	e.setTaskLocked(t, taskRunning, "")

	h := &host{e: e, w: w, t: t, ctx: ctx}
	e.runWG.Add(1)
	go func() {
		defer e.runWG.Done()
		defer cancel(nil)
		e.settle(w, t, e.run(ctx, h))
	}()
}

// run carries a task out on its worker: prepare the workspace, get a
// confirm when the policy asks for one, run the command through the
// provider, and report the files it changed. It runs without e.mu.
func (e *Engine) run(ctx context.Context, h *host) provider.Result {
	w, t := h.w, h.t
	dir := e.cfg.Cwd
	var track func(context.Context) (func(context.Context) ([]FileChange, error), error)
	if e.cfg.Workspaces != nil {
		pctx, cancel := context.WithTimeout(ctx, workspaceTimeout)
		ws, err := e.cfg.Workspaces.Prepare(pctx, w.id)
		cancel()
		if err != nil {
			return provider.Result{ExitCode: -1, Err: fmt.Errorf("prepare workspace: %w", err)}
		}
		e.mu.Lock()
		w.worktreePath, w.branch, w.baseCommit = ws.WorktreePath, ws.Branch, ws.BaseCommit
		e.saveWorkerLocked(w)
		e.changedLocked()
		e.mu.Unlock()
		for _, warn := range ws.Warnings {
			h.Note(warn)
		}
		dir, track = ws.Dir, ws.Track
	}
	if pattern := e.cfg.Policy.Match(t.command); pattern != "" && e.cfg.Governor == nil {
		// Legacy confirm; a native root asked for an approval before
		// admitting the task.
		approved, err := h.Confirm(ctx, fmt.Sprintf("Run `%s`? It matches the confirm policy (%s).", t.command, pattern))
		switch {
		case ctx.Err() != nil:
			return provider.Result{ExitCode: -1, Err: fmt.Errorf("cancelled: %w", context.Cause(ctx))}
		case err != nil:
			return provider.Result{ExitCode: -1, Err: errors.New("not started: the confirm ended without an answer")}
		case !approved:
			return provider.Result{ExitCode: -1, Err: errors.New("not started: denied by the operator")}
		}
	}
	var finish func(context.Context) ([]FileChange, error)
	if track != nil {
		var err error
		if finish, err = track(ctx); err != nil {
			h.Note("file changes are not tracked for this command: " + err.Error())
		}
	}
	env := e.cfg.Env
	if env == nil {
		env = os.Environ()
	}
	// The task's processes carry their session, task and worker
	// (provider.SessionEnv).
	env = append(slices.Clip(env), provider.SessionEnv+"="+e.cfg.SessionID,
		"AGENTS_FLEET_TASK="+t.id, "AGENTS_FLEET_WORKER="+w.id)
	res := e.cfg.Provider.Run(ctx, provider.Task{ID: t.id, Prompt: t.command, Dir: dir, Env: env}, h)
	if finish != nil {
		// Changes are collected even after a cancel: they happened.
		fctx, cancel := context.WithTimeout(context.Background(), workspaceTimeout)
		changes, err := finish(fctx)
		cancel()
		if err != nil {
			h.Note("could not collect file changes: " + err.Error())
		}
		e.publishChanges(w, "shell", changes)
	}
	return res
}

// settle records how a worker's task ended and dispatches the next one.
func (e *Engine) settle(w *worker, t *task, res provider.Result) {
	e.mu.Lock()
	defer e.mu.Unlock()
	w.endedAt = time.Now()
	w.cancel = nil
	e.broker.cancelForTaskLocked(t.id)
	dur := w.endedAt.Sub(w.startedAt).Round(time.Millisecond)
	if res.Err == nil {
		w.status = workerCompleted
		e.hubLocked(w.id, "completed", fmt.Sprintf("%s done in %s", t.id, dur))
		e.saveWorkerLocked(w)
		e.setTaskLocked(t, taskDone, "")
	} else {
		w.status = workerFailed
		t.reason = res.Err.Error()
		e.hubLocked(w.id, "failed", fmt.Sprintf("%s failed after %s: %s", t.id, dur, t.reason))
		e.saveWorkerLocked(w)
		e.setTaskLocked(t, taskFailed, t.reason)
	}
	if t.loopID != "" {
		e.loopSettledLocked(t, res.Err == nil)
	}
	if e.cfg.Governor != nil {
		e.settleNative(Settlement{TaskID: t.id, WorkerID: w.id, WorktreePath: w.worktreePath,
			ExitCode: res.ExitCode, Failed: res.Err != nil, At: w.endedAt})
	}
	e.dispatchLocked()
}

// cancelLocked cancels a task or a worker by id. A pending task fails at
// once; a running one is stopped (its process group killed) and settles.
func (e *Engine) cancelLocked(id string) string {
	if l := e.loopByID[id]; l != nil {
		return e.cancelLoopLocked(l)
	}
	t := e.taskByID[id]
	if w := e.workerByID[id]; w != nil {
		t = e.taskByID[w.taskID]
	}
	if t == nil {
		return fmt.Sprintf("No task, worker or loop %q. /tasks lists them.", id)
	}
	switch t.status {
	case taskPending:
		t.cancelled = true
		t.reason = errCancelled.Error()
		e.setTaskLocked(t, taskFailed, t.reason)
		if t.loopID != "" {
			e.loopSettledLocked(t, false)
		}
		return fmt.Sprintf("Cancelled %s before it started.", t.id)
	case taskRunning, taskBlocked:
		t.cancelled = true
		w := e.workerByID[t.worker]
		if w != nil && w.cancel != nil {
			w.cancel(errCancelled)
		}
		return fmt.Sprintf("Cancelling %s (worker %s).", t.id, t.worker)
	default:
		return fmt.Sprintf("%s has already ended (%s).", t.id, t.status)
	}
}

// host is the provider.Host of one worker's task.
type host struct {
	e   *Engine
	w   *worker
	t   *task
	ctx context.Context // the task's: ends when it is cancelled
}

// outputGroup bounds the lines published between two Throttle calls, so
// a read full of short lines cannot run far past a client's soft bound.
const (
	outputGroupLines = 128
	outputGroupBytes = 32 << 10
)

func (h *host) Output(stream provider.Stream, lines []string) {
	now := nowMs() // the lines of one read arrived together
	h.w.lastActivity.Store(now)
	var st protocol.Stream
	if stream == provider.Stderr {
		st = protocol.StreamStderr
	}
	for len(lines) > 0 {
		n, size := 0, 0
		for n < len(lines) && n < outputGroupLines && size < outputGroupBytes {
			size += len(lines[n])
			n++
		}
		if h.e.cfg.Throttle != nil {
			h.e.cfg.Throttle(h.ctx)
		}
		// One allocation for the group's events, not one a line.
		ts := make([]protocol.Transcript, n)
		ms := make([]protocol.Message, n)
		for i, line := range lines[:n] {
			ts[i] = protocol.Transcript{Role: protocol.RoleTool, Text: line, Agent: h.w.id, Ts: now, Stream: st}
			ms[i] = &ts[i]
		}
		h.e.publishBatch(ms)
		lines = lines[n:]
	}
}

func (h *host) Note(text string) {
	h.e.pub.Broadcast(&protocol.Transcript{Role: protocol.RoleSystem, Text: text, Agent: h.w.id, Ts: nowMs()})
}

func (h *host) ToolStart(c provider.ToolCall) {
	e := h.e
	e.mu.Lock()
	defer e.mu.Unlock()
	now := nowMs()
	h.w.toolUses++
	h.w.lastTool = c.Name + ": " + c.Detail
	h.w.lastActivity.Store(now)
	st := e.tools[c.Name]
	if st == nil {
		st = &toolStat{}
		e.tools[c.Name] = st
	}
	st.count++
	st.lastUsed = now
	e.changedLocked()
	e.pub.Broadcast(&protocol.ToolCall{
		Agent: h.w.id, Tool: c.Name, Phase: protocol.PhaseStart, Ts: now,
		AgentName: h.w.name, Detail: c.Detail, Input: c.Input,
	})
}

func (h *host) ToolComplete(r provider.ToolResult) {
	e := h.e
	e.mu.Lock()
	defer e.mu.Unlock()
	now := nowMs()
	h.w.lastActivity.Store(now)
	e.changedLocked()
	e.pub.Broadcast(&protocol.ToolCall{
		Agent: h.w.id, Tool: r.Name, Phase: protocol.PhaseComplete, Ts: now,
		AgentName: h.w.name, Result: r.Result, IsError: protocol.Bool(r.IsError),
		DurationMs: protocol.Int(r.Duration.Milliseconds()),
	})
}

func (h *host) Ask(ctx context.Context, q provider.Question) (string, error) {
	ans, err := h.e.broker.raise(ctx, h, request{kind: kindAsk, question: q})
	return ans.text, err
}

func (h *host) Confirm(ctx context.Context, summary string) (bool, error) {
	ans, err := h.e.broker.raise(ctx, h, request{kind: kindConfirm, summary: summary})
	return ans.approve, err
}
