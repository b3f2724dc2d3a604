package controlsock

import (
	"fmt"
	"strings"
	"testing"

	"github.com/agents-fleet/fleet/history"
	"github.com/agents-fleet/fleet/protocol"
)

// worst returns text of at most n encoded bytes (protocol.EncodedLen) made
// of the characters JSON escaping grows the most.
func worst(n int) string {
	pieces := []string{`"`, `\`, "\x00", "\x1f", "\n", "\u2028", "\u2029", "\xff", "é", "🚀", "<&>"}
	var b strings.Builder
	for i, used := 0, 0; ; i++ {
		p := pieces[i%len(pieces)]
		if used+protocol.EncodedLen(p) > n {
			return b.String()
		}
		b.WriteString(p)
		used += protocol.EncodedLen(p)
	}
}

// helloAs attaches with a hello encoded by the codec (clientName may hold
// anything) and reads through replayEnd, decoding every frame strictly.
func (h *harness) helloAs(name string) (*tconn, []protocol.Message) {
	h.t.Helper()
	c := h.dial()
	f, err := protocol.Encode(&protocol.Hello{Token: testToken, ClientKind: protocol.ClientREPL, ClientName: name})
	if err != nil {
		h.t.Fatal(err)
	}
	c.sendRaw(strings.TrimSuffix(string(f), "\n"))
	var replay []protocol.Message
	for {
		m := c.next() // fails on a frame over the cap or one that does not decode
		replay = append(replay, m)
		if m.MessageType() == protocol.TypeReplayEnd {
			return c, replay
		}
	}
}

func (c *tconn) send(m protocol.Message) {
	c.t.Helper()
	f, err := protocol.Encode(m)
	if err != nil {
		c.t.Fatal(err)
	}
	c.sendRaw(strings.TrimSuffix(string(f), "\n"))
}

func hydrateOf(t *testing.T, replay []protocol.Message) *protocol.Hydrate {
	t.Helper()
	for _, m := range replay {
		if hy, ok := m.(*protocol.Hydrate); ok {
			return hy
		}
	}
	t.Fatal("no hydrate in the replay")
	return nil
}

// A prompt as long as MaxPromptText once escaped, of the worst characters,
// from a client whose name and requestId are as long as the server lets
// them be, is admitted and echoed in a frame under the cap; one character
// more is refused with an error that says why, before anything reaches the
// fleet.
func TestPromptAdmissionCountsEscaping(t *testing.T) {
	h := newHarness(t, nil)
	c, _ := h.helloAs(worst(128 * 6))
	text := worst(protocol.MaxPromptText)
	if n := protocol.EncodedLen(text); n < protocol.MaxPromptText-8 || len(text) > protocol.MaxPromptText/2 {
		t.Fatalf("test text: %d bytes, %d encoded", len(text), n)
	}
	id := strings.Repeat("\x01", 256)
	c.send(&protocol.Prompt{Text: text, RequestID: id})
	um := c.nextOf(protocol.TypeUserMessage).(*protocol.UserMessage)
	if um.Text != validUTF8(text) || um.RequestID != id {
		t.Fatalf("echo: %d bytes, requestId %q", len(um.Text), um.RequestID)
	}

	// The fleet measures what it would send: invalid UTF-8 arrives as
	// U+FFFD, which it writes as is.
	over := validUTF8(text)
	over += strings.Repeat(`"`, (protocol.MaxPromptText-protocol.EncodedLen(over))/2+1)
	c.send(&protocol.Prompt{Text: over, RequestID: "over"})
	msg := c.expectError()
	if !strings.HasPrefix(msg, "the prompt is ") || !strings.Contains(msg, fmt.Sprint(protocol.MaxPromptText)) ||
		!strings.HasSuffix(msg, "nothing was queued") {
		t.Fatalf("error: %q", msg)
	}
	c.send(&protocol.Prompt{Text: "after", RequestID: "r2"})
	if um := c.nextOf(protocol.TypeUserMessage).(*protocol.UserMessage); um.RequestID != "r2" {
		t.Fatalf("the refused prompt was echoed: %+v", um)
	}
	h.be.mu.Lock()
	defer h.be.mu.Unlock()
	if len(h.be.prompts) != 2 {
		t.Fatalf("%d prompts reached the fleet, want 2", len(h.be.prompts))
	}
}

// An event too large for a frame is delivered shortened and marked, to
// clients attached and in the replay of later ones, never dropped nor sent
// whole.
func TestOversizeEventsAreShortenedNotDropped(t *testing.T) {
	h := newHarness(t, nil)
	a, _ := h.helloAs("a")
	big := worst(3 * protocol.MaxFrameSize)
	h.srv.Broadcast(&protocol.Reply{Text: big, Ts: 1})
	h.srv.BroadcastBatch([]protocol.Message{
		&protocol.Transcript{Role: protocol.RoleTool, Text: "before", Agent: "w1", Ts: 2},
		&protocol.Transcript{Role: protocol.RoleAssistant, Text: big, Ts: 3},
		&protocol.Transcript{Role: protocol.RoleTool, Text: "after", Agent: "w1", Ts: 4},
	})
	h.srv.Broadcast(&protocol.ConfirmRequest{ID: "c1", Summary: big, Ts: 5})
	many := &protocol.FileChange{Ts: 6}
	for i := range protocol.MaxFrameSize / 40 {
		many.Changes = append(many.Changes, protocol.FileChangeEntry{Path: fmt.Sprint(i), AbsolutePath: "/", Agent: "w", Tool: "t", ChangeType: protocol.ChangeEdited, Ts: 6})
	}
	h.srv.Broadcast(many)

	if r := a.nextOf(protocol.TypeReply).(*protocol.Reply); !marked(r.Text) ||
		!strings.HasPrefix(validUTF8(big), strings.Split(r.Text, "… [truncated")[0]) {
		t.Fatalf("reply of %d bytes", len(r.Text))
	}
	var texts []string
	for len(texts) < 3 {
		texts = append(texts, a.nextOf(protocol.TypeTranscript).(*protocol.Transcript).Text)
	}
	if texts[0] != "before" || !marked(texts[1]) || texts[2] != "after" {
		t.Fatalf("batch order or cut: %.40q", texts)
	}
	if cr := a.nextOf(protocol.TypeConfirmRequest).(*protocol.ConfirmRequest); cr.ID != "c1" || !marked(cr.Summary) {
		t.Fatalf("confirm %q", cr.ID)
	}
	// Not shortenable: a note says what was dropped.
	note := a.nextOf(protocol.TypeTranscript).(*protocol.Transcript)
	if note.Role != protocol.RoleSystem || !strings.Contains(note.Text, "fileChange event was too large") {
		t.Fatalf("note %+v", note)
	}
	if s := h.srv.Stats(); s.FramesShortened != 4 {
		t.Fatalf("FramesShortened = %d, want 4", s.FramesShortened)
	}

	// A later console replays the shortened frames.
	_, replay := h.helloAs("b")
	hy := hydrateOf(t, replay)
	if len(hy.Conversation) != 1 || !marked(hy.Conversation[0].Text) || protocol.EncodedLen(hy.Conversation[0].Text) > history.MaxEntryText {
		t.Fatalf("conversation %d entries", len(hy.Conversation))
	}
	var pending *protocol.ConfirmRequest
	for _, m := range replay {
		if cr, ok := m.(*protocol.ConfirmRequest); ok {
			pending = cr
		}
	}
	if pending == nil || !marked(pending.Summary) {
		t.Fatal("the pending confirm is not replayed shortened")
	}
}

func marked(s string) bool { return strings.Contains(s, "… [truncated ") }

// Hydrate fits the frame cap by construction: many prompts at the limit,
// huge lines and hub events are cut per entry and the window trimmed to
// the budget, newest kept, with truncated set.
func TestHydrateOfHugeEntriesFits(t *testing.T) {
	h := newHarness(t, nil)
	text := worst(protocol.MaxPromptText)
	for i := range 30 {
		h.srv.Broadcast(&protocol.UserMessage{Source: "a", Text: fmt.Sprint(i, text)})
		h.srv.Broadcast(&protocol.Transcript{Role: protocol.RoleTool, Agent: fmt.Sprint("w", i), Text: worst(500 << 10), Ts: int64(100 + i)})
		h.srv.Broadcast(&protocol.HubEvent{From: "coordinator", Kind: "task.created", Text: worst(500 << 10), Ts: int64(100 + i)})
	}
	h.srv.Broadcast(&protocol.Reply{Text: "newest", Ts: 200})
	_, replay := h.helloAs("late")
	hy := hydrateOf(t, replay)
	if !hy.Truncated || len(hy.Conversation) == 0 || hy.Conversation[len(hy.Conversation)-1].Text != "newest" ||
		len(hy.Transcripts) == 0 || len(hy.Hub) == 0 {
		t.Fatalf("truncated %v, %d conversation, %d lines, %d hub", hy.Truncated, len(hy.Conversation), len(hy.Transcripts), len(hy.Hub))
	}
	for _, c := range hy.Conversation[:len(hy.Conversation)-1] {
		if !marked(c.Text) {
			t.Fatal("a long conversation entry is not marked")
		}
	}
	if last := hy.Transcripts[len(hy.Transcripts)-1]; last.Agent != "w29" || !marked(last.Text) {
		t.Fatalf("newest line %q", last.Agent)
	}
}

// Point 3 of issue 21: the session's own lines (the coordinator's, the
// fleet's notes) are sent live without agent, and hydrate files them under
// "coordinator", which hydrate entries require; a strict decoder (c.next)
// reads it. Resumed history too.
func TestCoordinatorLinesInHydrateCarryAnAgent(t *testing.T) {
	h := newHarness(t, nil)
	h.srv.SeedHistory(history.Hydrate(&history.Window{Transcripts: map[string][]history.TranscriptLine{
		"": {{Role: protocol.RoleAssistant, Text: "saved coordinator line", Ts: 1}},
	}}), 0)
	h.srv.Broadcast(&protocol.Transcript{Role: protocol.RoleAssistant, Text: "I'll split this in two.", Ts: 2})
	h.srv.Broadcast(&protocol.Transcript{Role: protocol.RoleSystem, Text: "The session is being saved again.", Ts: 3})
	h.srv.Broadcast(&protocol.Transcript{Role: protocol.RoleTool, Text: "worker line", Agent: "w1", Ts: 4, Stream: protocol.StreamStderr})
	_, replay := h.helloAs("a")
	hy := hydrateOf(t, replay)
	var got []string
	for _, l := range hy.Transcripts {
		got = append(got, l.Agent+":"+l.Text)
	}
	want := "coordinator:saved coordinator line|coordinator:I'll split this in two.|coordinator:The session is being saved again.|w1:worker line"
	if strings.Join(got, "|") != want {
		t.Fatalf("transcripts %q", got)
	}
}

// A resumed session whose saved rows are larger than a frame (saved by a
// build that had no limit) replays a hydrate under the cap.
func TestSeededOversizeRowsAreCut(t *testing.T) {
	h := newHarness(t, nil)
	huge := strings.Repeat("\"\\\x00", 400_000)
	h.srv.SeedHistory(&protocol.Hydrate{
		Conversation: []protocol.HydrateConversationEntry{{Role: protocol.RoleUser, Text: "$ " + huge, Ts: 1}},
		Transcripts:  []protocol.HydrateTranscriptEntry{{Agent: "w1", Role: protocol.RoleSystem, Text: huge, Ts: 2}},
		Hub:          []protocol.HubEvent{{From: "coordinator", Kind: "task.created", Text: "t1: " + huge, Ts: 3}},
	}, 1)
	_, replay := h.helloAs("a")
	hy := hydrateOf(t, replay)
	if len(hy.Conversation) != 1 || !marked(hy.Conversation[0].Text) || len(hy.Transcripts) != 1 || !marked(hy.Transcripts[0].Text) ||
		len(hy.Hub) != 1 || !marked(hy.Hub[0].Text) {
		t.Fatalf("%d/%d/%d entries", len(hy.Conversation), len(hy.Transcripts), len(hy.Hub))
	}
}

// validUTF8 is s as JSON carries it: each byte of invalid UTF-8 replaced
// with U+FFFD.
func validUTF8(s string) string {
	var b strings.Builder
	for _, r := range s {
		b.WriteRune(r) // ranging yields RuneError for each invalid byte
	}
	return b.String()
}
