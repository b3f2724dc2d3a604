package history

import (
	"errors"
	"reflect"
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
// ts (ties by agent name, an agent's own order kept), truncated when the
// conversation window is not all of it.
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
				{Agent: "", Role: protocol.RoleAssistant, Text: "c", Ts: 3},
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
