// Package history owns what a fleet session keeps: the rows the store
// persists (conversation entries, transcript lines, hub events, and the
// engine's task, worker, counter and coordinator state), defined once, and
// the one decision of which live frames are part of the session's history
// (RecordOf) together with its inverse, the hydrate a console is sent
// (Hydrate).
//
// The journal saves what RecordOf returns, the control server's replay
// window keeps what RecordOf returns, and a resumed session's hydrate is
// built by Hydrate from what the store loaded: the three cannot disagree on
// what history is. The engine's persisted records (engine.TaskRecord,
// engine.WorkerRecord, engine.Restore) and the store's rows are these
// types, so nothing is copied field by field between them.
//
// The package depends only on protocol and the standard library.
package history

import (
	"errors"

	"github.com/agents-fleet/fleet/protocol"
)

// TranscriptLine is one line of a worker's transcript (Agent is the
// worker), or of the coordinator's (Agent ""). It is the transcript frame
// itself: a line is stored as it was broadcast, stream included, and saving
// a frame copies nothing.
type TranscriptLine = protocol.Transcript

// HubEvent is one inter-agent activity event: the hubEvent frame itself.
type HubEvent = protocol.HubEvent

// ConversationEntry is one operator prompt (Role RoleUser) or coordinator
// reply (Role RoleAssistant).
type ConversationEntry struct {
	Role protocol.Role
	// Source is the client name/kind of a prompt, "" for replies.
	Source string
	Text   string
	// RequestID echoes the prompt's requestId, "" when none was sent.
	RequestID string
	Ts        int64 // epoch ms
}

// HydrateEntry is c as a hydrate conversation entry, its text cut to
// MaxEntryText.
func (c *ConversationEntry) HydrateEntry() protocol.HydrateConversationEntry {
	return protocol.HydrateConversationEntry{Role: c.Role, Text: protocol.CutText(c.Text, MaxEntryText), Ts: c.Ts}
}

// Task is a task's full state. The store upserts it by (session, ID),
// replacing every field and keeping its creation position.
type Task struct {
	ID, Command, Status, Worker, Reason, LoopID string
	Attempt                                     int
	// Planned: created in plan mode, waiting for /go (or manual-start).
	Planned              bool
	CreatedAt, UpdatedAt int64 // epoch ms
}

// Worker is a worker's full state, upserted by (session, ID) like Task.
type Worker struct {
	ID, TaskID, Status               string
	WorktreePath, Branch, BaseCommit string
	// StartedAt, EndedAt and LastActivityAt are epoch ms; EndedAt is 0
	// while the worker is live.
	StartedAt, EndedAt, LastActivityAt int64
	ToolUses                           int64

	// Provider and Model say what ran the worker ("local" for a shell
	// task; "claude", "codex", "copilot" for an agent).
	Provider, Model string
	// AgentSessionID is the agent CLI's own session or thread id, which
	// resumes its conversation (a follow-up turn after the worker
	// settled); "" for a shell task.
	AgentSessionID string
	// Token counts as the model endpoint reported them, each request
	// counted once.
	InputTokens, OutputTokens, CacheReadTokens, CacheWriteTokens int64
	// Prompt is the task text given to the agent.
	Prompt string
	// Host is the worker host it ran on; "" for the fleet's own machine.
	// A follow-up turn runs there too.
	Host string
}

// Counter is a named integer of the session, upserted by (session, Name):
// next task/worker/request numbers, so that ids are never reused after a
// resume.
type Counter struct {
	Name  string
	Value int64
}

// Coordinator is the session's coordinator agent, so that a resume
// continues its conversation in the same CLI session. A session has one;
// saving it replaces the previous one. SessionID is only meaningful to the
// provider that issued it, which is why both are saved together.
type Coordinator struct {
	Provider, Model string
	// SessionID is the coordinator CLI's session/thread id; "" when the
	// coordinator has not started one (or the provider has none).
	SessionID string
}

// Record is one thing to persist. Exactly one of the pointer fields is set.
type Record struct {
	Conversation *ConversationEntry
	Transcript   *TranscriptLine
	Hub          *HubEvent
	Task         *Task
	Worker       *Worker
	Counter      *Counter
	Coordinator  *Coordinator
}

// IsZero reports whether no field of r is set.
func (r *Record) IsZero() bool {
	return r.Conversation == nil && r.Transcript == nil && r.Hub == nil && r.Task == nil &&
		r.Worker == nil && r.Counter == nil && r.Coordinator == nil
}

// Errors of Validate.
var (
	ErrEmptyRecord = errors.New("record has no field set")
	ErrMultiRecord = errors.New("record has more than one field set")
	ErrEmptyID     = errors.New("task, worker and counter records need an id/name")
)

// Validate reports whether exactly one field of r is set, and that the
// upserted kinds carry their key.
func (r *Record) Validate() error {
	n := 0
	var key *string
	for _, set := range [...]bool{r.Conversation != nil, r.Transcript != nil, r.Hub != nil, r.Coordinator != nil} {
		if set {
			n++
		}
	}
	if r.Task != nil {
		n++
		key = &r.Task.ID
	}
	if r.Worker != nil {
		n++
		key = &r.Worker.ID
	}
	if r.Counter != nil {
		n++
		key = &r.Counter.Name
	}
	switch {
	case n == 0:
		return ErrEmptyRecord
	case n > 1:
		return ErrMultiRecord
	case key != nil && *key == "":
		return ErrEmptyID
	}
	return nil
}

// State is the engine's saved state, which a resume starts from
// (engine.Restore is this type).
type State struct {
	Tasks   []Task   // creation order
	Workers []Worker // creation order
	// Counters holds every counter by name.
	Counters map[string]int64
	// Coordinator is the coordinator's CLI session, zero when none was
	// saved.
	Coordinator Coordinator
}
