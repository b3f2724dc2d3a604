package store

import "errors"

// Session modes (DESIGN §7). The store only keeps the string; resuming with
// the opposite mode is refused by the caller.
const (
	ModeLegacy = "legacy"
	ModeNative = "native"
)

// Session is one fleet session.
type Session struct {
	ID, Name, Cwd, Provider, Model string
	// Mode is ModeLegacy or ModeNative.
	Mode string
	// RepoRoot is the git repository root, "" outside git.
	RepoRoot string
	// StartedAt is epoch ms.
	StartedAt int64
	// LastActive is epoch ms: CreateSession sets it (StartedAt when zero),
	// every Append moves it to the wall clock once per batch.
	LastActive int64
	// Tasks is filled by Sessions, GetSession and Load; CreateSession
	// ignores it.
	Tasks TaskCounts
}

// TaskCounts counts a session's tasks by status. Total includes statuses
// other than the five named ones.
type TaskCounts struct {
	Pending, Running, Blocked, Done, Failed, Total int
}

// ConversationEntry is one operator prompt (Role "user") or coordinator
// reply (Role "assistant").
type ConversationEntry struct {
	Role string
	// Source is the client name/kind of a prompt, "" for replies.
	Source string
	Text   string
	// RequestID echoes the prompt's requestId, "" when none was sent.
	RequestID string
	Ts        int64
}

// TranscriptLine is one worker (or coordinator, Agent "") transcript line.
type TranscriptLine struct {
	Agent, Role, Text string
	// Stream is "stdout", "stderr" or "".
	Stream string
	Ts     int64
}

// HubEvent is one inter-agent activity event (protocol hubEvent).
type HubEvent struct {
	From, Kind, To, Text string
	Ts                   int64
}

// Task is a task's full state; Append upserts it by (session, ID), replacing
// every field, and keeps its creation position.
type Task struct {
	ID, Command, Status, Worker, Reason string
	CreatedAt, UpdatedAt                int64 // epoch ms
	Attempts                            int
	LoopID                              string
	// Planned: created in plan mode, waiting for /go (or manual-start).
	Planned bool
}

// Worker is a worker's full state; Append upserts it by (session, ID) like
// Task.
type Worker struct {
	ID, TaskID, Status, WorktreePath, Branch, BaseCommit string
	StartedAt, EndedAt                                   int64 // epoch ms, 0 when not yet
	LastActivityAt                                       int64 // epoch ms
	ToolUses                                             int64
}

// Counter is a named integer of the session, upserted by (session, Name):
// next task/worker/request numbers, so that ids are never reused after a
// resume.
type Counter struct {
	Name  string
	Value int64
}

// Record is one thing to persist. Exactly one of the pointer fields is set.
type Record struct {
	Conversation *ConversationEntry
	Transcript   *TranscriptLine
	Hub          *HubEvent
	Task         *Task
	Worker       *Worker
	Counter      *Counter
}

// IsZero reports whether no field of r is set (Append refuses such a
// record).
func (r *Record) IsZero() bool {
	return r.Conversation == nil && r.Transcript == nil && r.Hub == nil && r.Task == nil && r.Worker == nil && r.Counter == nil
}

var (
	errEmptyRecord = errors.New("record has no field set")
	errMultiRecord = errors.New("record has more than one field set")
	errEmptyID     = errors.New("task, worker and counter records need an id/name")
)

// check reports whether exactly one field of r is set, and that upserted
// records carry their key.
func (r *Record) check() error {
	n := 0
	var key *string
	if r.Conversation != nil {
		n++
	}
	if r.Transcript != nil {
		n++
	}
	if r.Hub != nil {
		n++
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
		return errEmptyRecord
	case n > 1:
		return errMultiRecord
	case key != nil && *key == "":
		return errEmptyID
	}
	return nil
}
