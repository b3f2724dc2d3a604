package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/agents-fleet/fleet/intel/record"
	"github.com/agents-fleet/fleet/provider"
)

// What the fleet's MCP tools do (package fleetmcp serves them to the
// coordinator agent; the daemon adapts these methods to its interface).
// caller is the agent the tool's token belongs to.

// WorkerInfo is a worker as the tools list it.
type WorkerInfo struct {
	ID, Status, TaskID, Task, Provider, Model, Branch string
	Host                                              string // its worker host; "" for this machine
	InputTokens, OutputTokens                         int64
	LastActivity                                      string
}

// TaskInfo is a task as the tools list it.
type TaskInfo struct {
	ID, Status, Worker, Text, Reason string
}

// SpawnWorker queues a task for a new worker; the worker id is known once
// it is dispatched ("" while the task waits for room under the cap, or for
// a host that can take it).
func (e *Engine) SpawnWorker(ctx context.Context, caller string, s Spawn) (taskID, workerID string, err error) {
	var use record.SkillUse
	if s.Skill != "" {
		if e.cfg.Intel == nil {
			return "", "", errors.New("skills need the intel store, which is unavailable in this fleet")
		}
		// Files and the database: without e.mu.
		if use, err = e.cfg.Intel.Skill(ctx, s.Skill); err != nil {
			return "", "", err
		}
		s.Text = use.Apply(s.Text)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	t, err := e.spawnLocked(caller, s)
	if err != nil {
		return "", "", err
	}
	t.skill = use
	return t.id, t.worker, nil
}

// Workers lists the workers the snapshots show.
func (e *Engine) Workers() []WorkerInfo {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []WorkerInfo
	for _, w := range e.shownWorkersLocked() {
		wi := WorkerInfo{ID: w.id, Status: w.status, TaskID: w.taskID, Provider: e.agentTypeLocked(w), Model: w.model,
			Branch: w.branch, Host: w.hostName, InputTokens: w.tokens.input, OutputTokens: w.tokens.output, LastActivity: w.lastTool}
		if t := e.taskByID[w.taskID]; t != nil {
			wi.Task = oneLine(t.command, 300)
		}
		out = append(out, wi)
	}
	return out
}

// Tasks lists the most recent tasks.
func (e *Engine) Tasks() []TaskInfo {
	e.mu.Lock()
	defer e.mu.Unlock()
	first := max(0, len(e.tasks)-maxTaskItems)
	out := make([]TaskInfo, 0, len(e.tasks)-first)
	for _, t := range e.tasks[first:] {
		out = append(out, TaskInfo{ID: t.id, Status: t.status, Worker: t.worker, Text: oneLine(t.command, 300), Reason: t.reason})
	}
	return out
}

// WorkerOutput returns up to n of a worker's most recent transcript lines.
func (e *Engine) WorkerOutput(id string, n int) ([]string, error) {
	e.mu.Lock()
	w := e.workerByID[id]
	e.mu.Unlock()
	if w == nil {
		return nil, fmt.Errorf("no worker %q", id)
	}
	return w.recent.last(n), nil
}

// TellWorker sends a follow-up turn to a worker.
func (e *Engine) TellWorker(caller, id, text string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.tellLocked(caller, id, text)
}

// CancelWorker stops a worker's task.
func (e *Engine) CancelWorker(caller, id string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	w := e.workerByID[id]
	if w == nil {
		return fmt.Errorf("no worker %q", id)
	}
	if w.status != workerRunning && w.status != workerIdle {
		return fmt.Errorf("%s has already settled (%s)", id, w.status)
	}
	e.activityLocked(caller, "cancel", id)
	e.cancelLocked(id)
	return nil
}

// AskOperator raises an ask for an agent and waits for the answer.
func (e *Engine) AskOperator(ctx context.Context, caller string, q provider.Question) (string, error) {
	h, err := e.hostFor(caller)
	if err != nil {
		return "", err
	}
	return h.Ask(ctx, q)
}

// ConfirmOperator raises a confirm for an agent and waits for the answer.
func (e *Engine) ConfirmOperator(ctx context.Context, caller, summary string) (bool, error) {
	h, err := e.hostFor(caller)
	if err != nil {
		return false, err
	}
	return h.Confirm(ctx, caller+": "+summary)
}

func (e *Engine) hostFor(agent string) (*host, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if agent == coordinatorAgent {
		if e.coord.h == nil {
			return nil, errors.New("the coordinator has no session")
		}
		return e.coord.h, nil
	}
	w := e.workerByID[agent]
	if w == nil || w.host == nil {
		return nil, fmt.Errorf("no live agent %q", agent)
	}
	return w.host, nil
}
