package store

import "github.com/agents-fleet/fleet/history"

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

// The rows the store persists are package history's (docs/store.md,
// Schema); these aliases let callers of the store name them without
// importing history.
type (
	Record            = history.Record
	ConversationEntry = history.ConversationEntry
	TranscriptLine    = history.TranscriptLine
	HubEvent          = history.HubEvent
	Task              = history.Task
	Worker            = history.Worker
	Counter           = history.Counter
	Coordinator       = history.Coordinator
)
