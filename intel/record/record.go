// Package record holds the plain values a fleet records into its
// intelligence store (package intel): sessions, agent runs and how they
// ended, operator steering, and the skill a task follows. It has no
// storage in it, so the engine can build these values without importing
// the SQLite store.
package record

import "strings"

// Session is one fleet session as recorded.
type Session struct {
	ID        string
	Name      string
	Cwd       string
	Repo      string // repository top level; "" outside git
	Provider  string // the fleet's default provider
	Model     string
	Mode      string // "legacy" or "native"
	StartedAt int64  // epoch ms
	EndedAt   int64  // epoch ms; 0 while it runs (set by a later Session record)
}

// Outcomes of a Run.
const (
	OutcomeCompleted = "completed"
	OutcomeFailed    = "failed"
	OutcomeCancelled = "cancelled"
)

// Run is one agent run: a worker's task, or one follow-up turn of it.
type Run struct {
	SessionID string
	// ID is unique per run: "<session>/<worker>/<task>".
	ID       string
	Worker   string
	TaskID   string
	Provider string
	Model    string
	Task     string // the task text, at most MaxText bytes
	// Skill, when the task used one: its name and version, and the shadow
	// candidate's id when the run used the candidate instead.
	Skill        string
	SkillVersion int
	Shadow       string
	Repo         string // repository top level; "" outside git
	Worktree     string
	Host         string // the worker host it ran on; "" for the fleet's own machine
	StartedAt    int64  // epoch ms
	EndedAt      int64
	Outcome      string // OutcomeCompleted, OutcomeFailed, OutcomeCancelled
	ExitCode     int
	// Error is the failure as the fleet reported it (at most MaxText
	// bytes); Cause is what the fleet knows about it (a Cause* constant,
	// "" when it does not know), from which intel.Classify derives the class.
	Error string
	Cause string
	// Class is intel.Classify's verdict. intel's Recorder ignores it (the store
	// classifies every run it writes); the store's SkillFailures fills it in.
	Class string
	// Tokens as the provider reported them.
	InputTokens, OutputTokens, CacheReadTokens, CacheWriteTokens int64
	// Tools counts the run's tool uses by tool name.
	Tools map[string]int64
}

// Causes the engine knows when a run fails (Run.Cause).
const (
	CauseCancelled  = "cancelled"   // the operator cancelled it
	CauseShutdown   = "shutdown"    // the fleet stopped
	CauseStall      = "stall"       // no activity for limits.agentStallTimeoutMs
	CauseBudget     = "budget"      // a token budget stop that was not raised
	CausePermission = "permission"  // an operator denied a tool or command
	CauseWorkspace  = "workspace"   // the worktree could not be prepared
	CauseStart      = "start"       // the provider's CLI could not be started
	CauseExit       = "exit"        // a command or CLI exited non-zero
	CauseAgentError = "agent-error" // the CLI reported an error (API error, its own failure)
)

// Steering is an operator action that changed running work: a prompt, an
// answer to a question, a confirm or deny, a native decision, a /tell, a
// /cancel.
type Steering struct {
	SessionID string
	Source    string // "prompt", "answer", "approve", "deny", "tell", "cancel", "native:<action>"
	Text      string // at most MaxText bytes
	Target    string // the worker or task it was about; "" for the session
	CreatedAt int64
}

// MaxText bounds every text the store keeps (task, error, steering).
const MaxText = 4 << 10

// SkillUse is the skill a task follows: its text and what to record.
type SkillUse struct {
	Name    string
	Version int
	Shadow  string // the shadow candidate's id when this run uses it
	Text    string // the skill's instructions or template
}

// Apply makes the task text of a task following the skill: the template
// with {task} replaced, or the instructions followed by the task.
func (s SkillUse) Apply(task string) string {
	if strings.Contains(s.Text, "{task}") {
		return strings.ReplaceAll(s.Text, "{task}", task)
	}
	return strings.TrimRight(s.Text, "\n") + "\n\nTask: " + task
}
