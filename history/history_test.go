package history

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/protocol"
)

// TestRecordOf: the frames that are history become their rows (transcript
// lines and hub events are the frames themselves), every other frame is
// not history.
func TestRecordOf(t *testing.T) {
	before := time.Now().UnixMilli()
	tr := &protocol.Transcript{Role: protocol.RoleTool, Text: "x", Agent: "w1", Ts: 5, Stream: protocol.StreamStderr}
	hub := &protocol.HubEvent{From: "w1", Kind: "report", To: "coordinator", Text: "done", Ts: 6}
	if r, ok := RecordOf(tr); !ok || r.Transcript != tr || r.Validate() != nil {
		t.Errorf("transcript: %+v %v", r, ok)
	}
	if r, ok := RecordOf(hub); !ok || r.Hub != hub || r.Validate() != nil {
		t.Errorf("hub event: %+v %v", r, ok)
	}
	r, ok := RecordOf(&protocol.UserMessage{Source: "alice", Text: "$ make", RequestID: "r1"})
	if c := r.Conversation; !ok || c == nil || c.Role != protocol.RoleUser || c.Source != "alice" || c.Text != "$ make" ||
		c.RequestID != "r1" || c.Ts < before {
		t.Errorf("userMessage: %+v", c)
	}
	r, ok = RecordOf(&protocol.Reply{Text: "hi", Ts: 7})
	if c := r.Conversation; !ok || c == nil || *c != (ConversationEntry{Role: protocol.RoleAssistant, Text: "hi", Ts: 7}) {
		t.Errorf("reply: %+v", c)
	}
	if r, _ := RecordOf(&protocol.Reply{Text: "no ts"}); r.Conversation.Ts < before {
		t.Errorf("a reply without ts got ts %d", r.Conversation.Ts)
	}
	for _, m := range []protocol.Message{
		&protocol.Status{}, &protocol.FleetState{}, &protocol.ConfirmRequest{ID: "c"}, &protocol.AskRequest{ID: "a"},
		&protocol.ConfirmResolved{ID: "c"}, &protocol.ToolCall{}, &protocol.CommandCatalog{}, &protocol.Hydrate{},
		(*protocol.Transcript)(nil), nil,
	} {
		if r, ok := RecordOf(m); ok || !r.IsZero() {
			t.Errorf("%T is history: %+v", m, r)
		}
	}
}

// TestRecordOfTranscriptAllocatesNothing: task output is most of a
// session, and the journal saves it without an allocation per line.
func TestRecordOfTranscriptAllocatesNothing(t *testing.T) {
	var m protocol.Message = &protocol.Transcript{Role: protocol.RoleTool, Text: "x", Agent: "w1"}
	if n := testing.AllocsPerRun(100, func() { RecordOf(m) }); n != 0 {
		t.Errorf("RecordOf(transcript) allocates %v times", n)
	}
}

func TestValidate(t *testing.T) {
	for name, c := range map[string]struct {
		r    Record
		want error
	}{
		"empty":       {Record{}, ErrEmptyRecord},
		"two":         {Record{Transcript: &TranscriptLine{}, Hub: &HubEvent{}}, ErrMultiRecord},
		"task id":     {Record{Task: &Task{}}, ErrEmptyID},
		"worker id":   {Record{Worker: &Worker{}}, ErrEmptyID},
		"counter":     {Record{Counter: &Counter{}}, ErrEmptyID},
		"coordinator": {Record{Coordinator: &Coordinator{}}, nil},
		"task":        {Record{Task: &Task{ID: "t1"}}, nil},
	} {
		if err := c.r.Validate(); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
}

// TestHydrate: the hydrate of a loaded window, transcript lines merged by
// ts (ties by agent name, an agent's own order kept), the session's own
// lines filed under "coordinator" (hydrate entries require an agent),
// truncated when the conversation window is not all of it.
func TestHydrate(t *testing.T) {
	w := &Window{
		Conversation: []ConversationEntry{{Role: protocol.RoleUser, Source: "alice", Text: "hi", RequestID: "r", Ts: 1},
			{Role: protocol.RoleAssistant, Text: "hello", Ts: 2}},
		ConversationTotal: 5,
		Transcripts: map[string][]TranscriptLine{
			"w2": {{Agent: "w2", Role: protocol.RoleTool, Text: "b1", Ts: 10}, {Agent: "w2", Role: protocol.RoleTool, Text: "b2", Ts: 10}},
			"w1": {{Agent: "w1", Role: protocol.RoleTool, Text: "a1", Ts: 10, Stream: protocol.StreamStderr},
				{Agent: "w1", Role: protocol.RoleSystem, Text: "a2", Ts: 11}},
			"": {{Role: protocol.RoleAssistant, Text: "c", Ts: 3}},
		},
		Hub: []HubEvent{{From: "w1", Kind: "report", Text: "r", Ts: 4}},
	}
	for range 20 { // map order must not matter
		h := Hydrate(w)
		want := &protocol.Hydrate{
			Conversation: []protocol.HydrateConversationEntry{{Role: protocol.RoleUser, Text: "hi", Ts: 1},
				{Role: protocol.RoleAssistant, Text: "hello", Ts: 2}},
			Transcripts: []protocol.HydrateTranscriptEntry{
				{Agent: "coordinator", Role: protocol.RoleAssistant, Text: "c", Ts: 3},
				{Agent: "w1", Role: protocol.RoleTool, Text: "a1", Ts: 10},
				{Agent: "w2", Role: protocol.RoleTool, Text: "b1", Ts: 10},
				{Agent: "w2", Role: protocol.RoleTool, Text: "b2", Ts: 10},
				{Agent: "w1", Role: protocol.RoleSystem, Text: "a2", Ts: 11},
			},
			Hub:       []protocol.HubEvent{{From: "w1", Kind: "report", Text: "r", Ts: 4}},
			Truncated: true,
		}
		if !reflect.DeepEqual(h, want) {
			t.Fatalf("hydrate:\n got %+v\nwant %+v", h, want)
		}
	}
	if h := Hydrate(&Window{}); h.Truncated || h.Conversation != nil || h.Transcripts != nil || h.Hub != nil {
		t.Errorf("empty window: %+v", h)
	}
}

// TestHydrateCutsHugeRows: rows saved by a build that had no limit (a
// 1,000,000-byte prompt, the task events and lines it made) come out of
// Hydrate cut to MaxEntryText and marked, and the window is left as it was.
func TestHydrateCutsHugeRows(t *testing.T) {
	huge := strings.Repeat("\"\\\x00é\u2028", 200_000)
	w := &Window{
		Conversation: []ConversationEntry{{Role: protocol.RoleUser, Text: huge, Ts: 1}, {Role: protocol.RoleAssistant, Text: "ok", Ts: 2}},
		Transcripts: map[string][]TranscriptLine{
			"w1": {{Agent: "w1", Role: protocol.RoleTool, Text: huge, Ts: 3}},
			"":   {{Role: protocol.RoleSystem, Text: huge, Ts: 4}},
		},
		Hub: []HubEvent{{From: "coordinator", Kind: "task.created", Text: "t1: " + huge, Ts: 5}, {From: "w1", Kind: "spawned", Text: "small", Ts: 6}},
	}
	h := Hydrate(w)
	cut := func(what, s string) {
		t.Helper()
		if n := protocol.EncodedLen(s); n > MaxEntryText || !strings.Contains(s, "… [truncated ") {
			t.Errorf("%s: %d bytes encoded, %q…", what, n, s[:min(len(s), 40)])
		}
	}
	cut("conversation", h.Conversation[0].Text)
	cut("worker line", h.Transcripts[0].Text)
	cut("coordinator line", h.Transcripts[1].Text)
	cut("hub event", h.Hub[0].Text)
	if h.Conversation[1].Text != "ok" || h.Hub[1].Text != "small" || h.Transcripts[1].Agent != CoordinatorAgent {
		t.Errorf("small entries changed: %+v", h)
	}
	if w.Hub[0].Text != "t1: "+huge || w.Transcripts[""][0].Text != huge {
		t.Error("Hydrate modified the window")
	}
	if f, err := protocol.Encode(h); err != nil || len(f) > protocol.MaxFrameSize {
		t.Errorf("the hydrate does not fit a frame: %v", err)
	}
}
