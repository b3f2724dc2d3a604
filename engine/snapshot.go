package engine

import (
	"sort"
	"time"

	"github.com/agents-fleet/fleet/protocol"
)

// maxTaskItems bounds fleetState.tasks.items: the most recent tasks, so a
// session with thousands of tasks still sends small snapshots.
const maxTaskItems = 50

// maxShownSettled bounds how many settled workers snapshots list (besides
// every live one): a worker per task would otherwise grow status,
// fleetState and fleetAnalytics without bound. Counts still cover all.
const maxShownSettled = 100

// shownWorkersLocked returns the live workers and the most recent settled
// ones, in creation order.
func (e *Engine) shownWorkersLocked() []*worker {
	settled := 0
	for _, w := range e.workers {
		if w.status == workerCompleted || w.status == workerFailed {
			settled++
		}
	}
	skip := max(0, settled-maxShownSettled)
	out := make([]*worker, 0, len(e.workers)-skip)
	for _, w := range e.workers {
		if skip > 0 && (w.status == workerCompleted || w.status == workerFailed) {
			skip--
			continue
		}
		out = append(out, w)
	}
	return out
}

// publishSnapshotsLocked broadcasts status, fleetState and fleetAnalytics.
func (e *Engine) publishSnapshotsLocked() {
	now := time.Now()
	e.pub.Broadcast(e.statusLocked())
	e.pub.Broadcast(e.fleetStateLocked(now))
	e.pub.Broadcast(e.analyticsLocked(now))
}

type taskCounts struct{ done, running, pending, blocked, failed, total int64 }

func (e *Engine) countTasksLocked() taskCounts {
	var c taskCounts
	for _, t := range e.tasks {
		c.total++
		switch t.status {
		case taskDone:
			c.done++
		case taskRunning:
			c.running++
		case taskPending:
			c.pending++
		case taskBlocked:
			c.blocked++
		case taskFailed:
			c.failed++
		}
	}
	return c
}

// activeWorkersLocked counts live workers (running or idle on a request).
func (e *Engine) activeWorkersLocked() int64 {
	var n int64
	for _, w := range e.workers {
		if w.status == workerRunning || w.status == workerIdle {
			n++
		}
	}
	return n
}

// processingLocked is status.processing and coordinator.isProcessing
// (docs/decisions.md). With an agent coordinator: the coordinator is
// working on a prompt, from the prompt until its reply; workers running
// on their own do not count. With the local provider, which has no
// coordinator session and handles prompts at once: the fleet has work in
// hand (tasks running, blocked or queued behind the cap).
func (e *Engine) processingLocked(c taskCounts) bool {
	if e.cfg.Coordinator != nil {
		return e.coord.busy
	}
	return c.running+c.blocked > 0 || (c.pending > 0 && !e.paused)
}

func (e *Engine) statusLocked() *protocol.Status {
	c := e.countTasksLocked()
	s := &protocol.Status{
		Processing:        e.processingLocked(c),
		Model:             e.cfg.Model,
		Provider:          e.cfg.Provider.Name(),
		RunningFleets:     protocol.Int(1),
		ActiveWorkerCount: protocol.Int(e.activeWorkersLocked()),
		TotalWorkerCount:  protocol.Int(int64(len(e.workers))),
		TasksDone:         protocol.Int(c.done),
		TasksTotal:        protocol.Int(c.total),
		TasksActive:       protocol.Int(c.running + c.blocked),
	}
	for _, w := range e.shownWorkersLocked() {
		s.Workers = append(s.Workers, protocol.StatusWorker{Name: w.name, Status: w.status})
	}
	return s
}

func (e *Engine) fleetStateLocked(now time.Time) *protocol.FleetState {
	c := e.countTasksLocked()
	nowMs := now.UnixMilli()
	fs := &protocol.FleetState{
		Ts: nowMs,
		Coordinator: protocol.FleetCoordinatorState{
			SessionID:      e.cfg.SessionID,
			IsProcessing:   e.processingLocked(c),
			PlanMode:       e.planMode,
			DispatchPaused: e.paused,
			StaleMs:        e.coordinatorStaleMsLocked(),
		},
		Workers:      make([]protocol.FleetWorkerSummary, 0, len(e.workers)),
		WorkerActive: e.activeWorkersLocked(),
		WorkerTotal:  int64(len(e.workers)),
		Tasks: protocol.FleetTaskSummary{
			Done: c.done, Running: c.running, Pending: c.pending, Blocked: c.blocked, Total: c.total,
		},
		Session: &protocol.FleetSessionInfo{
			Model:       e.cfg.Model,
			Provider:    e.cfg.Provider.Name(),
			SessionName: e.cfg.SessionName,
			Uptime:      protocol.Int(now.Sub(e.started).Milliseconds()),
		},
		// Known counts, zero included (the local provider uses no model).
		Tokens:             e.sessionTokens.state(),
		WorkerStatusCounts: &protocol.FleetWorkerStatusCounts{},
		WorkerMax:          protocol.Int(int64(e.cfg.Workers)),
		Loops:              e.loopSummariesLocked(),
	}
	if e.budget.session > 0 || e.budget.workerDefault > 0 {
		fs.Budget = &protocol.FleetBudget{SessionTokens: e.budget.session, SessionUsed: e.sessionTokens.total(), WorkerTokens: e.budget.workerDefault}
	}
	for _, w := range e.workers {
		switch w.status {
		case workerRunning:
			fs.WorkerStatusCounts.Running++
		case workerIdle:
			fs.WorkerStatusCounts.Idle++
		case workerCompleted:
			fs.WorkerStatusCounts.Completed++
		case workerFailed:
			fs.WorkerStatusCounts.Failed++
		}
	}
	for _, w := range e.shownWorkersLocked() {
		ws := protocol.FleetWorkerSummary{
			ID:             w.id,
			Name:           w.name,
			Status:         w.status,
			ToolUseCount:   w.toolUses,
			TokenCount:     w.tokens.total(),
			AgentType:      e.agentTypeLocked(w),
			TaskID:         w.taskID,
			StartedAt:      w.startedAt.UnixMilli(),
			LastActivityAt: w.lastActivity.Load(),
			InputTokens:    protocol.Int(w.tokens.input),
			OutputTokens:   protocol.Int(w.tokens.output),
			RecentActivity: w.lastTool,
			WorktreePath:   w.worktreePath,
			Host:           w.hostName,
			RSSBytes:       w.rss,
		}
		ws.State, ws.StateReason = e.workerStateLocked(w)
		if ws.State == protocol.WorkerStateRateLimited {
			ws.RateLimitedUntil = w.rateUntil.UnixMilli()
		}
		ws.TopTools = topTools(w.toolCounts, 5)
		ws.Git = w.git
		end := now
		if !w.endedAt.IsZero() {
			end = w.endedAt
			ws.CompletedAt = w.endedAt.UnixMilli()
		}
		ws.DurationMs = protocol.Int(end.Sub(w.startedAt).Milliseconds())
		fs.Workers = append(fs.Workers, ws)
	}
	first := max(0, len(e.tasks)-maxTaskItems)
	for _, t := range e.tasks[first:] {
		item := protocol.FleetTaskItem{ID: t.id, Subject: protocol.CutText(t.command, maxSubject), Status: t.status, Owner: t.worker}
		if t.status == taskPending {
			item.WaitReason = t.waitReason
		}
		fs.Tasks.Items = append(fs.Tasks.Items, item)
	}
	return fs
}

func (e *Engine) analyticsLocked(now time.Time) *protocol.FleetAnalytics {
	a := &protocol.FleetAnalytics{
		Ts:             now.UnixMilli(),
		ToolUsage:      make([]protocol.ToolUsageEntry, 0, len(e.tools)),
		WorkerTimeline: make([]protocol.WorkerTimelineEntry, 0, len(e.workers)),
	}
	for name, st := range e.tools {
		a.ToolUsage = append(a.ToolUsage, protocol.ToolUsageEntry{ToolName: name, Count: st.count, LastUsedAt: st.lastUsed})
	}
	sort.Slice(a.ToolUsage, func(i, j int) bool { return a.ToolUsage[i].ToolName < a.ToolUsage[j].ToolName })
	for _, w := range e.shownWorkersLocked() {
		entry := protocol.WorkerTimelineEntry{
			ID: w.id, Name: w.name, AgentType: e.agentTypeLocked(w),
			StartedAt: w.startedAt.UnixMilli(), Status: w.status,
			ToolUseCount: w.toolUses, TokenCount: w.tokens.total(),
		}
		if !w.endedAt.IsZero() {
			entry.CompletedAt = w.endedAt.UnixMilli()
		}
		a.WorkerTimeline = append(a.WorkerTimeline, entry)
	}
	return a
}

// agentTypeLocked is the provider behind w.
func (e *Engine) agentTypeLocked(w *worker) string {
	if w.provider != "" {
		return w.provider
	}
	return e.cfg.Provider.Name()
}

// state is the account as fleetState.tokens: every count is known (zero
// included); context fields only once an agent reported them.
func (t tokens) state() *protocol.FleetTokenState {
	s := &protocol.FleetTokenState{
		InputTokens:      protocol.Int(t.input),
		OutputTokens:     protocol.Int(t.output),
		TotalTokens:      protocol.Int(t.total()),
		CacheReadTokens:  protocol.Int(t.cacheRead),
		CacheWriteTokens: protocol.Int(t.cacheWrite),
	}
	if t.contextTokens > 0 {
		s.ContextTokens = protocol.Int(t.contextTokens)
	}
	if t.contextWindow > 0 {
		s.ContextLimit = protocol.Int(t.contextWindow)
		if t.contextTokens > 0 {
			pct := float64(t.contextTokens) * 100 / float64(t.contextWindow)
			s.ContextPercent = &pct
		}
	}
	return s
}
