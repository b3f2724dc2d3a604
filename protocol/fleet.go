package protocol

// This file holds the dashboard snapshots: fleetState and fleetAnalytics.
// Types with required arrays implement MarshalJSON only to write a nil slice
// as [] (never null); decoding needs nothing special.

// Worker status values used by the local provider (DESIGN §6). Status fields
// are open strings: consumers must accept others.
const (
	WorkerRunning   = "running"
	WorkerIdle      = "idle"
	WorkerCompleted = "completed"
	WorkerFailed    = "failed"
)

// FleetState is the rich live fleet snapshot for dashboards.
type FleetState struct {
	Ts                 int64                    `json:"ts"`
	Coordinator        FleetCoordinatorState    `json:"coordinator"`
	Workers            []FleetWorkerSummary     `json:"workers"`
	WorkerActive       int64                    `json:"workerActive"`
	WorkerTotal        int64                    `json:"workerTotal"`
	Tasks              FleetTaskSummary         `json:"tasks"`
	Session            *FleetSessionInfo        `json:"session,omitempty"`
	Tokens             *FleetTokenState         `json:"tokens,omitempty"`
	WorkerStatusCounts *FleetWorkerStatusCounts `json:"workerStatusCounts,omitempty"`
	// WorkerMax is the configured concurrency cap.
	WorkerMax *int64             `json:"workerMax,omitempty"`
	Loops     []FleetLoopSummary `json:"loops,omitempty"`
	// Budget is an extension (docs/budgets.md): the token budgets, when
	// any is set.
	Budget *FleetBudget `json:"budget,omitempty"`
}

// FleetBudget is the session's token budgets and what the session used.
// A limit of 0 means none.
type FleetBudget struct {
	SessionTokens int64 `json:"sessionTokens"`
	SessionUsed   int64 `json:"sessionUsed"`
	WorkerTokens  int64 `json:"workerTokens"`
}

// MessageType returns TypeFleetState.
func (FleetState) MessageType() string { return TypeFleetState }

// MarshalJSON encodes a nil Workers as [].
func (m FleetState) MarshalJSON() ([]byte, error) {
	type plain FleetState
	p := plain(m)
	p.Workers = nonNil(p.Workers)
	return marshalPlain(p)
}

// FleetCoordinatorState is the coordinator part of FleetState.
type FleetCoordinatorState struct {
	SessionID      string `json:"sessionId,omitempty"`
	IsProcessing   bool   `json:"isProcessing"`
	PlanMode       bool   `json:"planMode"`
	DispatchPaused bool   `json:"dispatchPaused"`
	// StaleMs is the time since the last SDK activity, only while processing
	// with the watchdog active.
	StaleMs *int64 `json:"staleMs,omitempty"`
}

// FleetWorkerSummary is one worker of FleetState, with optional analytics
// enrichment.
type FleetWorkerSummary struct {
	ID             string   `json:"id"`
	Name           string   `json:"name"`
	Status         string   `json:"status"`
	ToolUseCount   int64    `json:"toolUseCount"`
	TokenCount     int64    `json:"tokenCount"`
	AgentType      string   `json:"agentType,omitempty"`
	TaskID         string   `json:"taskId,omitempty"`
	StartedAt      int64    `json:"startedAt,omitempty"`
	LastActivityAt int64    `json:"lastActivityAt,omitempty"`
	WorktreePath   string   `json:"worktreePath,omitempty"`
	TopTools       []string `json:"topTools,omitempty"`
	RecentActivity string   `json:"recentActivity,omitempty"`
	InputTokens    *int64   `json:"inputTokens,omitempty"`
	OutputTokens   *int64   `json:"outputTokens,omitempty"`
	CompletedAt    int64    `json:"completedAt,omitempty"`
	DurationMs     *int64   `json:"durationMs,omitempty"`
	// Git is an extension (docs/landing-work.md): the worker's branch and
	// how its work stands against the base branch. Absent for a worker
	// without a worktree and until the fleet first read it.
	Git *WorkerGit `json:"git,omitempty"`
	// Host is an extension (docs/protocol-decisions.md): the worker host
	// the worker runs on. Absent for a worker on the fleet's own machine.
	Host string `json:"host,omitempty"`
	// State is an extension (docs/protocol-decisions.md): what the worker
	// is doing, finer than Status (WorkerState* values, an open string).
	State string `json:"state,omitempty"`
	// StateReason says why, in words, where it applies: what it waits for,
	// why it failed, the healing attempt.
	StateReason string `json:"stateReason,omitempty"`
	// RateLimitedUntil is when a rate-limited worker resumes (epoch ms).
	RateLimitedUntil int64 `json:"rateLimitedUntil,omitempty"`
	// RSSBytes is the resident memory of the worker's whole process tree,
	// measured at most once a second while it runs; absent where it
	// cannot be measured (not Linux, or a worker host's worker).
	RSSBytes int64 `json:"rssBytes,omitempty"`
}

// Worker states (FleetWorkerSummary.State).
const (
	WorkerStateWorking            = "working"
	WorkerStateWaitingForOperator = "waiting-for-operator"
	WorkerStateWaitingForMemory   = "waiting-for-memory"
	WorkerStateRateLimited        = "rate-limited"
	WorkerStateStalled            = "stalled"
	WorkerStateDone               = "done"
	WorkerStateFailed             = "failed"
)

// MaxWorkerGitFiles bounds WorkerGit.Files in a fleetState; filesChanged
// still counts them all.
const MaxWorkerGitFiles = 20

// WorkerGit is a worker's git state (extension of FleetWorkerSummary).
type WorkerGit struct {
	Branch     string `json:"branch"`
	Head       string `json:"head,omitempty"`       // the branch's tip
	BaseBranch string `json:"baseBranch,omitempty"` // what it merges into by default
	BaseCommit string `json:"baseCommit,omitempty"` // merge-base of the tip and baseBranch
	Ahead      int64  `json:"ahead"`                // commits not on baseBranch
	Behind     int64  `json:"behind"`               // baseBranch commits not on the branch
	// Uncommitted counts paths with uncommitted changes or untracked files.
	Uncommitted  int64 `json:"uncommitted"`
	FilesChanged int64 `json:"filesChanged"` // committed and uncommitted, against baseCommit
	LinesAdded   int64 `json:"linesAdded"`
	LinesRemoved int64 `json:"linesRemoved"`
	// Files are the changed files, sorted by path, at most MaxWorkerGitFiles.
	Files []WorkerGitFile `json:"files,omitempty"`
	// Mergeable says whether the work (committed and uncommitted) merges
	// into baseBranch cleanly right now (a dry run); absent when unknown.
	Mergeable *bool    `json:"mergeable,omitempty"`
	Conflicts []string `json:"conflicts,omitempty"` // files that would conflict
	Merged    bool     `json:"merged"`
	// MergedInto is the branch the work was landed in.
	MergedInto string `json:"mergedInto,omitempty"`
	// WorktreeMissing: the worktree directory is gone (deleted or moved by
	// hand); the state is the branch's.
	WorktreeMissing bool  `json:"worktreeMissing,omitempty"`
	UpdatedAt       int64 `json:"updatedAt,omitempty"` // when the fleet read it
}

// WorkerGitFile is one changed file of WorkerGit.
type WorkerGitFile struct {
	Path    string `json:"path"`   // inside the repository
	Status  string `json:"status"` // added, modified, deleted (open string)
	Added   int64  `json:"added"`  // lines; 0 for a binary file
	Removed int64  `json:"removed"`
	Binary  bool   `json:"binary,omitempty"`
}

// FleetTokenState is token and context-window data; every field is optional.
type FleetTokenState struct {
	ContextTokens    *int64   `json:"contextTokens,omitempty"`
	ContextLimit     *int64   `json:"contextLimit,omitempty"`
	ContextPercent   *float64 `json:"contextPercent,omitempty"`
	MessagesLength   *int64   `json:"messagesLength,omitempty"`
	InputTokens      *int64   `json:"inputTokens,omitempty"`
	OutputTokens     *int64   `json:"outputTokens,omitempty"`
	TotalTokens      *int64   `json:"totalTokens,omitempty"`
	CacheReadTokens  *int64   `json:"cacheReadTokens,omitempty"`
	CacheWriteTokens *int64   `json:"cacheWriteTokens,omitempty"`
}

// FleetTaskSummary is task counts plus sampled items.
type FleetTaskSummary struct {
	Done    int64           `json:"done"`
	Running int64           `json:"running"`
	Pending int64           `json:"pending"`
	Blocked int64           `json:"blocked"`
	Total   int64           `json:"total"`
	Items   []FleetTaskItem `json:"items,omitempty"`
}

// FleetTaskItem is one sampled task.
type FleetTaskItem struct {
	ID      string `json:"id"`
	Subject string `json:"subject"`
	Status  string `json:"status"`
	Owner   string `json:"owner,omitempty"`
	// WaitReason is an extension (docs/protocol-decisions.md): why a
	// pending task does not start yet ("waiting for a host with label
	// gpu"); absent when it only waits for a free slot.
	WaitReason string `json:"waitReason,omitempty"`
}

// FleetSessionInfo is session telemetry.
type FleetSessionInfo struct {
	Model       string `json:"model,omitempty"`
	Provider    string `json:"provider,omitempty"`
	SessionName string `json:"sessionName,omitempty"`
	// Uptime is in milliseconds.
	Uptime *int64 `json:"uptime,omitempty"`
}

// FleetWorkerStatusCounts is the worker rollup; all four counts are required
// within the object.
type FleetWorkerStatusCounts struct {
	Running   int64 `json:"running"`
	Idle      int64 `json:"idle"`
	Completed int64 `json:"completed"`
	Failed    int64 `json:"failed"`
}

// FleetLoopSummary is one active goal-driven loop.
type FleetLoopSummary struct {
	ID        string `json:"id"`
	Goal      string `json:"goal"`
	Iteration int64  `json:"iteration"`
	// Max is the iteration cap; 0 means the loop has none.
	Max    int64  `json:"max"`
	Status string `json:"status"`
}

// FleetAnalytics is the periodic analytics snapshot.
type FleetAnalytics struct {
	Ts             int64                 `json:"ts"`
	ToolUsage      []ToolUsageEntry      `json:"toolUsage"`
	WorkerTimeline []WorkerTimelineEntry `json:"workerTimeline"`
}

// MessageType returns TypeFleetAnalytics.
func (FleetAnalytics) MessageType() string { return TypeFleetAnalytics }

// MarshalJSON encodes nil required arrays as [].
func (m FleetAnalytics) MarshalJSON() ([]byte, error) {
	type plain FleetAnalytics
	p := plain(m)
	p.ToolUsage = nonNil(p.ToolUsage)
	p.WorkerTimeline = nonNil(p.WorkerTimeline)
	return marshalPlain(p)
}

// ToolUsageEntry is aggregated usage of one tool.
type ToolUsageEntry struct {
	ToolName   string `json:"toolName"`
	Count      int64  `json:"count"`
	LastUsedAt int64  `json:"lastUsedAt,omitempty"`
}

// WorkerTimelineEntry is one worker on the Gantt-style timeline.
type WorkerTimelineEntry struct {
	ID           string `json:"id"`
	Name         string `json:"name"`
	AgentType    string `json:"agentType"`
	StartedAt    int64  `json:"startedAt"`
	Status       string `json:"status"`
	ToolUseCount int64  `json:"toolUseCount"`
	TokenCount   int64  `json:"tokenCount"`
	CompletedAt  int64  `json:"completedAt,omitempty"`
}
