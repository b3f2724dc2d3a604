package engine

import (
	"fmt"
	"time"

	"github.com/agents-fleet/fleet/history"
	"github.com/agents-fleet/fleet/provider"
)

// Persister saves session state. The engine calls it under its lock, in the
// same order as it publishes events, so an implementation that queues both
// into one journal (package journal) stores state and events consistently.
// Optional: a nil Persister saves nothing.
type Persister interface {
	SaveTask(TaskRecord)
	SaveWorker(WorkerRecord)
	SaveCounter(name string, value int64)
	// SaveCoordinator saves the coordinator agent's CLI session, so a
	// resume continues its conversation.
	SaveCoordinator(history.Coordinator)
}

// TaskRecord is a task as saved: the store's row (package history).
type TaskRecord = history.Task

// WorkerRecord is a worker as saved: the store's row (package history).
// An agent provider fills Provider, Model, AgentSessionID, the token
// counts and Prompt.
type WorkerRecord = history.Worker

// Restore is a saved session's state, handed to New to resume it: what
// the store loaded, as is. Tasks and Workers are in creation order;
// Coordinator is the coordinator's CLI session to continue.
type Restore = history.State

// Counter names saved with SaveCounter.
const (
	counterTask    = "task"
	counterWorker  = "worker"
	counterRequest = "request"
	counterLoop    = "loop"
)

// reasonInterrupted is why a task that was running when the previous
// process ended is failed on resume.
const reasonInterrupted = "interrupted"

func (e *Engine) saveTaskLocked(t *task) {
	if e.cfg.Persister == nil {
		return
	}
	e.cfg.Persister.SaveTask(TaskRecord{
		ID: t.id, Command: t.command, Status: t.status, Worker: t.worker, Reason: t.reason,
		LoopID: t.loopID, Attempt: t.attempt, Planned: t.planned,
		CreatedAt: t.createdAt.UnixMilli(), UpdatedAt: nowMs(),
	})
}

func (e *Engine) saveWorkerLocked(w *worker) {
	if e.cfg.Persister == nil {
		return
	}
	var ended int64
	if !w.endedAt.IsZero() {
		ended = w.endedAt.UnixMilli()
	}
	e.cfg.Persister.SaveWorker(WorkerRecord{
		ID: w.id, TaskID: w.taskID, Status: w.status,
		WorktreePath: w.worktreePath, Branch: w.branch, BaseCommit: w.baseCommit,
		StartedAt: w.startedAt.UnixMilli(), EndedAt: ended, LastActivityAt: w.lastActivity.Load(),
		ToolUses: w.toolUses, Provider: e.agentTypeLocked(w), Model: w.model, AgentSessionID: w.agentSession,
		InputTokens: w.tokens.input, OutputTokens: w.tokens.output,
		CacheReadTokens: w.tokens.cacheRead, CacheWriteTokens: w.tokens.cacheWrite, Host: w.hostName,
	})
}

func (e *Engine) saveCoordinatorLocked() {
	if e.cfg.Persister != nil {
		e.cfg.Persister.SaveCoordinator(history.Coordinator{Provider: e.cfg.Provider.Name(), Model: e.coordModel, SessionID: e.coordSession})
	}
}

func (e *Engine) saveCounterLocked(name string, v int) {
	if e.cfg.Persister != nil {
		e.cfg.Persister.SaveCounter(name, int64(v))
	}
}

// restoreLocked loads a saved session: tasks that were running (or blocked
// on a request, which the previous process cancelled) fail as interrupted,
// pending ones queue again, live workers are marked failed, and id counters
// continue where they were so no id is reused.
func (e *Engine) restoreLocked(r *Restore) {
	e.nextTask = int(r.Counters[counterTask])
	e.nextWorker = int(r.Counters[counterWorker])
	e.broker.next = int(r.Counters[counterRequest])
	e.nextLoop = int(r.Counters[counterLoop])
	// Workers that were running on a host run there still: they are taken
	// up again (adoptLocked), their tasks with them.
	adopted := map[string]bool{}
	if e.cfg.Hosts != nil && e.cfg.Governor == nil {
		for _, wr := range r.Workers {
			if (wr.Status == workerRunning || wr.Status == workerIdle) && wr.Host != "" {
				adopted[wr.TaskID] = true
			}
		}
	}
	var adopt []*worker
	for _, tr := range r.Tasks {
		t := &task{
			id: tr.ID, command: tr.Command, status: tr.Status, worker: tr.Worker, reason: tr.Reason,
			loopID: tr.LoopID, attempt: tr.Attempt, planned: tr.Planned,
			createdAt: time.UnixMilli(tr.CreatedAt),
		}
		if (t.status == taskRunning || t.status == taskBlocked) && !adopted[t.id] {
			t.status, t.reason = taskFailed, reasonInterrupted
			e.activityLocked("coordinator", "task.updated", t.id+" failed: "+reasonInterrupted)
			e.saveTaskLocked(t)
			if e.cfg.Governor != nil {
				e.markUncertain(t.id)
			}
		}
		e.tasks = append(e.tasks, t)
		e.taskByID[t.id] = t
	}
	for _, wr := range r.Workers {
		w := &worker{
			id: wr.ID, name: wr.ID, status: wr.Status, taskID: wr.TaskID,
			startedAt: time.UnixMilli(wr.StartedAt), toolUses: wr.ToolUses,
			worktreePath: wr.WorktreePath, branch: wr.Branch, baseCommit: wr.BaseCommit,
			provider: wr.Provider, model: wr.Model, agentSession: wr.AgentSessionID, hostName: wr.Host,
			tokens: tokens{input: wr.InputTokens, output: wr.OutputTokens, cacheRead: wr.CacheReadTokens, cacheWrite: wr.CacheWriteTokens},
		}
		if w.provider == e.cfg.Provider.Name() {
			w.provider = "" // the default, as for a new worker
		}
		e.sessionTokens.add(provider.Usage{InputTokens: wr.InputTokens, OutputTokens: wr.OutputTokens,
			CacheReadTokens: wr.CacheReadTokens, CacheWriteTokens: wr.CacheWriteTokens})
		w.lastActivity.Store(wr.LastActivityAt)
		if wr.EndedAt != 0 {
			w.endedAt = time.UnixMilli(wr.EndedAt)
		}
		if (w.status == workerRunning || w.status == workerIdle) && adopted[w.taskID] {
			adopt = append(adopt, w)
		} else if w.status == workerRunning || w.status == workerIdle {
			w.status = workerFailed
			if w.endedAt.IsZero() {
				w.endedAt = time.UnixMilli(max(wr.LastActivityAt, wr.StartedAt))
			}
			e.saveWorkerLocked(w)
		}
		e.workers = append(e.workers, w)
		e.workerByID[w.id] = w
	}
	for _, w := range adopt {
		if t := e.taskByID[w.taskID]; t != nil {
			e.continueWorkerLocked(w, t, "adopted", e.adoptTurn)
		}
	}
	// The coordinator continues its CLI session when the provider is the
	// same (a session id means nothing to another CLI).
	if c := r.Coordinator; c.SessionID != "" {
		if c.Provider == e.cfg.Provider.Name() {
			e.coordSession, e.coordModel = c.SessionID, c.Model
		} else {
			e.replyLocked(fmt.Sprintf("The session's coordinator ran on %s; this run uses %s, so it starts a new conversation.", c.Provider, e.cfg.Provider.Name()))
		}
	}
	e.changedLocked()
}
