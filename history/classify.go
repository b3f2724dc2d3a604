package history

import (
	"cmp"
	"slices"
	"time"

	"github.com/agents-fleet/fleet/protocol"
)

// RecordOf says whether the live frame m is part of the session's history
// and, if it is, what row it becomes: a userMessage or a reply is a
// conversation entry, a transcript line and a hub event are themselves.
// Every other frame (snapshots, requests, tool calls, …) is not history:
// the replay sends the newest snapshots and the pending requests, and the
// engine's state is saved as rows of its own.
//
// A transcript's or hub event's record points at m itself, so RecordOf
// allocates nothing for the frames that are most of a session (m must not
// change once published, which engine.Publisher asks anyway). A prompt is
// stamped with the time RecordOf is called (userMessage carries none), as
// is a reply without a ts.
func RecordOf(m protocol.Message) (Record, bool) {
	switch m := m.(type) {
	case *protocol.Transcript:
		if m != nil {
			return Record{Transcript: m}, true
		}
	case *protocol.HubEvent:
		if m != nil {
			return Record{Hub: m}, true
		}
	case *protocol.UserMessage:
		if m != nil {
			return Record{Conversation: &ConversationEntry{Role: protocol.RoleUser, Source: m.Source, Text: m.Text,
				RequestID: m.RequestID, Ts: time.Now().UnixMilli()}}, true
		}
	case *protocol.Reply:
		if m != nil {
			ts := m.Ts
			if ts == 0 {
				ts = time.Now().UnixMilli()
			}
			return Record{Conversation: &ConversationEntry{Role: protocol.RoleAssistant, Text: m.Text, Ts: ts}}, true
		}
	}
	return Record{}, false
}

// Window is a session's recent history as the store loads it for a
// resume (the windows of store.Limits).
type Window struct {
	// Conversation is the newest entries, oldest first.
	Conversation []ConversationEntry
	// ConversationTotal counts all of the session's entries; it is larger
	// than len(Conversation) when the window was truncated.
	ConversationTotal int
	// Transcripts maps each of the most recently active agents to its
	// newest lines, oldest first.
	Transcripts map[string][]TranscriptLine
	// Hub is the newest hub events, oldest first.
	Hub []HubEvent
}

// Hydrate is the hydrate frame of w: what the frames RecordOf kept look
// like to a console that attaches after a resume. Transcript lines of all
// agents are merged by ts (an agent's own lines keep their order; equal ts
// across agents go by agent name, so the result does not depend on map
// order).
func Hydrate(w *Window) *protocol.Hydrate {
	h := &protocol.Hydrate{Truncated: w.ConversationTotal > len(w.Conversation)}
	if len(w.Conversation) > 0 {
		h.Conversation = make([]protocol.HydrateConversationEntry, len(w.Conversation))
		for i := range w.Conversation {
			h.Conversation[i] = w.Conversation[i].HydrateEntry()
		}
	}
	agents := make([]string, 0, len(w.Transcripts))
	n := 0
	for a, lines := range w.Transcripts {
		agents = append(agents, a)
		n += len(lines)
	}
	slices.Sort(agents)
	if n > 0 {
		h.Transcripts = make([]protocol.HydrateTranscriptEntry, 0, n)
	}
	for _, a := range agents {
		for _, l := range w.Transcripts[a] {
			h.Transcripts = append(h.Transcripts, protocol.HydrateTranscriptEntry{Agent: a, Role: l.Role, Text: l.Text, Ts: l.Ts})
		}
	}
	slices.SortStableFunc(h.Transcripts, func(x, y protocol.HydrateTranscriptEntry) int { return cmp.Compare(x.Ts, y.Ts) })
	h.Hub = w.Hub // the same rows: a hub entry is the hubEvent frame
	return h
}
