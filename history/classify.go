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

// CoordinatorAgent is the agent a hydrate files the session's own
// transcript lines under: the coordinator's and the fleet's notes about
// the session. A live transcript frame leaves agent out for those (the
// protocol: "omitted for coordinator-level lines"), but a hydrate
// transcript entry requires one, and "coordinator" is the agent id
// toolCall and hubEvent already give the coordinator. Replay
// (controlsock) and resume (Hydrate) both file lines by HydrateLine, so a
// console sees the same entries either way (docs/decisions.md, Replay).
const CoordinatorAgent = "coordinator"

// MaxEntryText bounds each text a hydrate carries (protocol.EncodedLen):
// a longer conversation entry, transcript line or hub event text is cut
// with protocol.CutText, so that one huge entry (a prompt at the
// protocol's limit, a row saved by a build that had none) cannot crowd
// out the rest of the window or the frame.
const MaxEntryText = 64 << 10

// HydrateLine returns l as a hydrate carries it: filed under its agent, or
// CoordinatorAgent when it has none, with its text cut to MaxEntryText. It
// returns l itself when nothing changes, a copy otherwise.
func HydrateLine(l *TranscriptLine) *TranscriptLine {
	text := protocol.CutText(l.Text, MaxEntryText)
	if l.Agent != "" && len(text) == len(l.Text) {
		return l
	}
	c := *l
	c.Text = text
	if c.Agent == "" {
		c.Agent = CoordinatorAgent
	}
	return &c
}

// HydrateHubEvent returns ev as a hydrate carries it: its text cut to
// MaxEntryText (ev itself when it fits, a copy otherwise).
func HydrateHubEvent(ev *HubEvent) *HubEvent {
	text := protocol.CutText(ev.Text, MaxEntryText)
	if len(text) == len(ev.Text) {
		return ev
	}
	c := *ev
	c.Text = text
	return &c
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
		for i := range w.Transcripts[a] {
			l := w.Transcripts[a][i]
			l.Agent = a
			e := HydrateLine(&l)
			h.Transcripts = append(h.Transcripts, protocol.HydrateTranscriptEntry{Agent: e.Agent, Role: e.Role, Text: e.Text, Ts: e.Ts})
		}
	}
	slices.SortStableFunc(h.Transcripts, func(x, y protocol.HydrateTranscriptEntry) int { return cmp.Compare(x.Ts, y.Ts) })
	h.Hub = w.Hub // the same rows: a hub entry is the hubEvent frame
	cloned := false
	for i := range w.Hub {
		if e := HydrateHubEvent(&w.Hub[i]); e != &w.Hub[i] {
			if !cloned {
				h.Hub, cloned = slices.Clone(w.Hub), true // cut a copy, not the window
			}
			h.Hub[i] = *e
		}
	}
	return h
}
