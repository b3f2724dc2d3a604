package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/agents-fleet/fleet/intel/record"
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
	// The agent it asks for (/spawn, spawn_worker): "" is the fleet's
	// default provider and model; from is who asked ("operator",
	// "coordinator").
	provider, model, from string
	// The worker host (pinHost) or a host label (pinLabel) it must run on
	// (/spawn --host|--label, spawn_worker); "" for none.
	pinHost, pinLabel string
	// retryOf is the settled worker a /retry continues: the task runs
	// there, from its branch, when that worker's worktree is still there.
	retryOf string
	// Native sessions: recorded in the root yet. waitReason is why it
	// waits: the native root, a token budget, or no host that can take it.
	reserved   bool
	waitReason string
	// The run, for the intel store: when it started, the skill it follows,
	// and its worker's accounts at its start.
	startedAt time.Time
	skill     record.SkillUse
	tokensAt  tokens
	toolsAt   []toolCount
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
	// The worker's workspace, once prepared; dir is where its agent runs.
	worktreePath, branch, baseCommit, dir string
	// hostName is the worker host it runs on ("" this machine); a
	// follow-up turn runs there too.
	hostName string
	// The agent behind the worker: its provider ("" is the fleet's
	// default), model, the CLI's session id (to resume it), its tokens
	// and its tools.
	provider, model, agentSession string
	tokens                        tokens
	toolCounts                    []toolCount
	followUps                     []followUp // /tell turns waiting for the current one
	host                          *host      // the live session's host; nil once settled
	recent                        recentLines
	approvals                     int  // native approvals asked for its tool requests (ids <task>.p<N>)
	cleaning                      bool // /clean is removing its worktree
	landing                       bool // /merge is landing its work
	// Its git state (Lander): the last one read, when, and whether it may
	// have changed since.
	git      *protocol.WorkerGit
	gitAt    time.Time
	gitStale bool
	// lastActivity is updated on the hot output path without e.mu.
	lastActivity atomic.Int64 // epoch ms
	// rss is its process tree's resident memory at the last measure
	// (memory.go); overMemory: it was stopped for holding too much.
	rss        int64
	overMemory bool
	// healing is the attempt healing a stall of its turn now (agent.go):
	// the worker is stalled until its agent shows progress again.
	healing atomic.Int32
	// rateUntil is when the rate limit it waits out resets (ratelimit.go);
	// rateReason says which.
	rateUntil  time.Time
	rateReason string
	limited    atomic.Bool // rateUntil is set: progress from the agent clears it
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
	e.activityLocked("coordinator", "task.created", t.id+": "+t.command)
	e.saveTaskLocked(t)
	e.changedLocked()
	return t
}

// dispatchLocked starts pending tasks while there is room: under the
// local cap, or on a worker host with a free slot (placeLocked). A task
// that nowhere can take keeps waiting, with the reason when there is one.
func (e *Engine) dispatchLocked() {
	if e.paused || e.closing {
		return
	}
	if e.cfg.Governor != nil {
		e.GovernorChanged() // the root decides what starts (admitLoop)
		return
	}
	l := e.loadLocked()
	for _, t := range e.tasks {
		if e.cfg.Hosts == nil && l.local >= e.cfg.Workers {
			return
		}
		if t.status != taskPending || t.planned || e.budgetHoldsLocked(t) {
			continue
		}
		host, ok, why := e.placeLocked(t, l)
		if !ok {
			e.setWaitLocked(t, why)
			continue
		}
		if e.rateHeldLocked(t) || host == "" && e.memoryHoldsLocked(t) {
			continue
		}
		e.startLocked(t, host)
		l.took(host)
		if host == "" {
			e.startedLocalLocked(t)
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
	e.activityLocked("coordinator", "task.updated", text)
	e.saveTaskLocked(t)
	e.changedLocked()
}

// startLocked spawns a worker for t on worker host host ("" this
// machine) and runs it on its own goroutine.
func (e *Engine) startLocked(t *task, host string) {
	if w := e.retriedWorkerLocked(t); w != nil {
		// A fresh conversation: the old one may live on a host that is gone.
		w.hostName, w.agentSession, t.waitReason = host, "", ""
		e.resumeWorkerLocked(w, t)
		return
	}
	e.nextWorker++
	e.saveCounterLocked(counterWorker, e.nextWorker)
	id := fmt.Sprintf("w%d", e.nextWorker)
	ctx, cancel := context.WithCancelCause(context.Background())
	w := &worker{id: id, name: id, status: workerRunning, taskID: t.id, startedAt: time.Now(), cancel: cancel,
		provider: t.provider, model: t.model, hostName: host}
	w.lastActivity.Store(nowMs())
	e.workers = append(e.workers, w)
	e.workerByID[id] = w
	t.worker = id
	t.startedAt = time.Now()
	t.waitReason = ""
	beginRunLocked(w, t)
	where := ""
	if host != "" {
		where = " on " + host
	}
	e.activityLocked(id, "spawned", t.id+where+": "+t.command)
	e.saveWorkerLocked(w)
	e.setTaskLocked(t, taskRunning, "")

	h := newHost(e, w, t, ctx)
	w.host = h
	e.runWG.Add(1)
	go func() {
		defer e.runWG.Done()
		defer cancel(nil)
		e.finishWork(w, t, e.run(ctx, h))
	}()
}

// settle records how a worker's task ended and dispatches the next one.
func (e *Engine) settle(w *worker, t *task, res provider.TurnEnded) {
	e.mu.Lock()
	defer e.mu.Unlock()
	w.endedAt = time.Now()
	w.cancel = nil
	w.host = nil
	e.broker.cancelForTaskLocked(t.id)
	dur := w.endedAt.Sub(w.startedAt).Round(time.Millisecond)
	if errors.Is(res.Err, ErrNotStarted) && !t.cancelled && !e.closing {
		e.requeueLocked(w, t, res.Err)
		return
	}
	e.recordRunLocked(w, t, res)
	if res.Err == nil {
		w.status = workerCompleted
		e.activityLocked(w.id, "completed", fmt.Sprintf("%s done in %s", t.id, dur))
		e.saveWorkerLocked(w)
		e.setTaskLocked(t, taskDone, "")
	} else {
		w.status = workerFailed
		t.reason = res.Err.Error()
		e.activityLocked(w.id, "failed", fmt.Sprintf("%s failed after %s: %s", t.id, dur, t.reason))
		e.saveWorkerLocked(w)
		e.setTaskLocked(t, taskFailed, t.reason)
	}
	if t.loopID != "" {
		e.loopSettledLocked(t, res.Err == nil)
	}
	if t.from == coordinatorAgent {
		e.reportLocked(w, t, res)
	}
	if e.cfg.Governor != nil {
		e.settleNative(Settlement{TaskID: t.id, WorkerID: w.id, WorktreePath: w.worktreePath,
			ExitCode: res.ExitCode, Failed: res.Err != nil, At: w.endedAt})
	}
	e.runFollowUpsLocked(w, t)
	e.dispatchLocked()
}

// retriedWorkerLocked is the settled worker t retries, or nil when t is
// no retry or that worker cannot take it (its worktree went, or it is busy).
func (e *Engine) retriedWorkerLocked(t *task) *worker {
	w := e.workerByID[t.retryOf]
	if w == nil || w.cleaning || w.landing || (w.status != workerCompleted && w.status != workerFailed) ||
		(e.cfg.Workspaces != nil && w.worktreePath == "") {
		return nil
	}
	return w
}

// cmdRetry starts a failed task again as a new task: on the worker it
// failed on, from that worker's branch (what its last turn left), placed
// afresh: its host may be the one that was lost.
func (e *Engine) cmdRetry(args string) (string, error) {
	id := strings.TrimSpace(args)
	t := e.taskByID[id]
	switch {
	case id == "":
		return "", failure("Usage: /retry TASK")
	case t == nil:
		return "", failf("No task %q. /tasks lists them.", id)
	case t.status != taskFailed:
		return "", failf("%s is %s; /retry starts a failed task again.", id, t.status)
	case e.closing:
		return "", errShutdown
	}
	nt := e.addTaskLocked(t.command)
	nt.provider, nt.model, nt.from, nt.pinHost, nt.pinLabel = t.provider, t.model, "operator", t.pinHost, t.pinLabel
	from := ""
	if w := e.workerByID[t.worker]; w != nil {
		nt.retryOf = w.id
		if e.retriedWorkerLocked(nt) != nil && w.branch != "" {
			from = " on " + w.id + ", from " + w.branch
		}
	}
	e.dispatchLocked()
	return fmt.Sprintf("%s retries %s%s.", nt.id, t.id, from), nil
}

// requeueLocked puts t back in the queue when its worker never started
// (its host was lost before it took the claim): the worker fails, saying
// so, and the task goes to the next free slot, here or on another host.
func (e *Engine) requeueLocked(w *worker, t *task, why error) {
	w.status = workerFailed
	e.activityLocked(w.id, "failed", fmt.Sprintf("%s never started: %s; %s goes back to the queue", w.id, why, t.id))
	e.saveWorkerLocked(w)
	t.worker = ""
	e.setTaskLocked(t, taskPending, "back in the queue: "+why.Error())
	e.dispatchLocked()
}

// followUp is a /tell turn waiting for a busy worker, and who told it.
type followUp struct{ from, text string }

// runFollowUpsLocked starts the /tell turns told to w after its session
// took its last one (while its work was being committed): the first
// resumes the settled worker as a new task and the rest follow it in that
// session, so none is lost. A cancelled worker's are dropped, and its
// transcript says so.
func (e *Engine) runFollowUpsLocked(w *worker, t *task) {
	if len(w.followUps) == 0 {
		return
	}
	if t.cancelled || e.closing {
		e.systemLineLocked(w.id, fmt.Sprintf("Dropped %d follow-up(s) told while %s was ending; /tell it again.", len(w.followUps), w.id))
		w.followUps = nil
		return
	}
	f := w.followUps[0]
	w.followUps = w.followUps[1:]
	nt := e.addTaskLocked(f.text)
	nt.provider, nt.model, nt.from = w.provider, w.model, f.from
	e.resumeWorkerLocked(w, nt)
}

// cancelLocked cancels a task or a worker by id. A pending task fails at
// once; a running one is stopped (its process group killed) and settles.
func (e *Engine) cancelLocked(id string) (string, error) {
	if l := e.loopByID[id]; l != nil {
		return e.cancelLoopLocked(l), nil
	}
	t := e.taskByID[id]
	if w := e.workerByID[id]; w != nil {
		t = e.taskByID[w.taskID]
	}
	if t == nil {
		return "", failf("No task, worker or loop %q. /tasks lists them.", id)
	}
	switch t.status {
	case taskPending:
		t.cancelled = true
		t.reason = errCancelled.Error()
		e.setTaskLocked(t, taskFailed, t.reason)
		if t.loopID != "" {
			e.loopSettledLocked(t, false)
		}
		return fmt.Sprintf("Cancelled %s before it started.", t.id), nil
	case taskRunning, taskBlocked:
		t.cancelled = true
		e.steerLocked("cancel", "/cancel "+id, t.worker)
		w := e.workerByID[t.worker]
		if w != nil && w.cancel != nil {
			w.cancel(errCancelled)
		}
		return fmt.Sprintf("Cancelling %s (worker %s).", t.id, t.worker), nil
	default:
		// Not a failure: what was asked for (the task not running) holds.
		return fmt.Sprintf("%s has already ended (%s).", t.id, t.status), nil
	}
}
