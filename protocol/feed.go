package protocol

import (
	"encoding/json"
	"math"
)

// This file holds the live feeds (fileChange, toolCall, hubEvent) and the
// attach-time bootstrap messages (hydrate, commandCatalog).

// ChangeType is the nature of a file change.
type ChangeType string

// File change types.
const (
	ChangeCreated ChangeType = "created"
	ChangeEdited  ChangeType = "edited"
	ChangeDeleted ChangeType = "deleted"
)

// ToolPhase says whether a toolCall is a start or a completion event.
type ToolPhase string

// Tool call phases.
const (
	PhaseStart    ToolPhase = "start"
	PhaseComplete ToolPhase = "complete"
)

// Hub event kinds named on the protocol page. HubEvent.Kind is an open
// string: consumers must handle others.
const (
	HubReport      = "report"
	HubMessage     = "message"
	HubBroadcast   = "broadcast"
	HubSpawned     = "spawned"
	HubCompleted   = "completed"
	HubFailed      = "failed"
	HubTaskCreated = "task.created"
	HubTaskUpdated = "task.updated"
)

// Hub event kinds this fleet adds (docs/protocol-decisions.md): budget
// notices, a worker's branch merged, a stalled worker healed
// (docs/unattended.md), a worker stopped for its memory.
const (
	HubBudget  = "budget"
	HubMerged  = "merged"
	HubStalled = "stalled"
	HubMemory  = "memory"
	// HubRateLimited: a provider is held by a rate or usage limit;
	// HubResumed: its limit reset (and a worker's session resumed).
	HubRateLimited = "rate-limited"
	HubResumed     = "resumed"
)

// Command catalog kinds. CommandCatalogEntry.Kind is an open string.
const (
	CommandBuiltin  = "builtin"
	CommandWorkflow = "workflow"
)

// ToolResultMax is the cap, in characters, on ToolCall.Result set by the page.
// Truncating is the producer's job; the codec does not enforce it.
const ToolResultMax = 2000

// FileChange is a batch of file changes made by a tool.
type FileChange struct {
	Ts      int64             `json:"ts"`
	Changes []FileChangeEntry `json:"changes"`
}

// MessageType returns TypeFileChange.
func (FileChange) MessageType() string { return TypeFileChange }

// MarshalJSON encodes a nil Changes as [].
func (m FileChange) MarshalJSON() ([]byte, error) {
	type plain FileChange
	p := plain(m)
	p.Changes = nonNil(p.Changes)
	return marshalPlain(p)
}

// FileChangeEntry is one changed file.
type FileChangeEntry struct {
	// Path is relative to the fleet's cwd.
	Path         string     `json:"path"`
	AbsolutePath string     `json:"absolutePath"`
	Agent        string     `json:"agent"`
	Tool         string     `json:"tool"`
	ChangeType   ChangeType `json:"changeType"`
	Ts           int64      `json:"ts"`
}

// ToolCall is the start or completion of a coordinator or worker tool call.
type ToolCall struct {
	Agent     string    `json:"agent"`
	Tool      string    `json:"tool"`
	Phase     ToolPhase `json:"phase"`
	Ts        int64     `json:"ts"`
	AgentName string    `json:"agentName,omitempty"`
	Detail    string    `json:"detail,omitempty"`
	// Input is the tool's parameters (start phase, best effort). Numbers
	// decode as float64, as encoding/json does for map[string]any.
	Input map[string]any `json:"input,omitempty"`
	// Result is the tool result or error (complete phase), at most
	// ToolResultMax characters.
	Result     string `json:"result,omitempty"`
	IsError    *bool  `json:"isError,omitempty"`
	DurationMs *int64 `json:"durationMs,omitempty"`
	// ToolCallID is an extension (docs/protocol-decisions.md): the agent
	// CLI's id for the call, the same on its start and complete events.
	ToolCallID string `json:"toolCallId,omitempty"`
}

// MessageType returns TypeToolCall.
func (ToolCall) MessageType() string { return TypeToolCall }

// HubEvent is one inter-agent activity event. It is also the element type of
// Hydrate.Hub, where each element is a full hubEvent message object: its
// MarshalJSON writes "type":"hubEvent" first, so json.Marshal of a HubEvent
// (alone or nested) and Encode produce the same object.
type HubEvent struct {
	From string `json:"from"`
	// Kind is an open string, see the Hub* constants.
	Kind string `json:"kind"`
	Ts   int64  `json:"ts"`
	To   string `json:"to,omitempty"`
	Text string `json:"text,omitempty"`
}

// MessageType returns TypeHubEvent.
func (HubEvent) MessageType() string { return TypeHubEvent }

// hubEventFields is HubEvent without its methods: the payload the codec
// marshals after writing the type key.
type hubEventFields HubEvent

// MarshalJSON encodes the event as a hubEvent message object, "type" first.
// Its size is not capped here: the frame it is part of is.
func (m HubEvent) MarshalJSON() ([]byte, error) {
	b, err := appendFrame(nil, TypeHubEvent, hubEventFields(m), math.MaxInt)
	if err != nil {
		return nil, err
	}
	return b[:len(b)-1], nil
}

// UnmarshalJSON decodes a hubEvent object. A "type" key, when present, must
// be "hubEvent"; it may be absent.
func (m *HubEvent) UnmarshalJSON(b []byte) error {
	var t struct {
		Type *string `json:"type"`
	}
	if err := json.Unmarshal(b, &t); err != nil {
		return err
	}
	if t.Type != nil && *t.Type != TypeHubEvent {
		return &DecodeError{Type: TypeHubEvent, Msg: `hubEvent: field "type" must be "hubEvent"`}
	}
	return json.Unmarshal(b, (*hubEventFields)(m))
}

// Hydrate is the history backfill sent once on attach.
type Hydrate struct {
	Conversation []HydrateConversationEntry `json:"conversation"`
	Transcripts  []HydrateTranscriptEntry   `json:"transcripts"`
	Hub          []HubEvent                 `json:"hub"`
	// Truncated is true when the conversation was capped to a recent window.
	Truncated bool `json:"truncated"`
}

// MessageType returns TypeHydrate.
func (Hydrate) MessageType() string { return TypeHydrate }

// MarshalJSON encodes nil required arrays as [].
func (m Hydrate) MarshalJSON() ([]byte, error) {
	type plain Hydrate
	p := plain(m)
	p.Conversation = nonNil(p.Conversation)
	p.Transcripts = nonNil(p.Transcripts)
	p.Hub = nonNil(p.Hub)
	return marshalPlain(p)
}

// HydrateConversationEntry is one line of recent conversation.
type HydrateConversationEntry struct {
	Role Role   `json:"role"`
	Text string `json:"text"`
	Ts   int64  `json:"ts"`
}

// HydrateTranscriptEntry is one past per-worker transcript line.
type HydrateTranscriptEntry struct {
	Agent string `json:"agent"`
	Role  Role   `json:"role"`
	Text  string `json:"text"`
	Ts    int64  `json:"ts"`
}

// CommandCatalog is the full slash-command catalog pushed on attach.
type CommandCatalog struct {
	Commands []CommandCatalogEntry `json:"commands"`
}

// MessageType returns TypeCommandCatalog.
func (CommandCatalog) MessageType() string { return TypeCommandCatalog }

// MarshalJSON encodes a nil Commands as [].
func (m CommandCatalog) MarshalJSON() ([]byte, error) {
	type plain CommandCatalog
	p := plain(m)
	p.Commands = nonNil(p.Commands)
	return marshalPlain(p)
}

// CommandCatalogEntry is one slash command.
type CommandCatalogEntry struct {
	// Name is the command as typed, with its leading slash ("/help").
	Name        string `json:"name"`
	Description string `json:"description"`
	// Kind is an open string: CommandBuiltin or CommandWorkflow.
	Kind string `json:"kind"`
	// Category groups commands for display (e.g. "session", "tasks").
	Category string `json:"category"`
}
