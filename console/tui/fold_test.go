package tui

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/protocol"
)

func TestFoldEachFrame(t *testing.T) {
	cases := []struct {
		name string
		msg  protocol.Message
		v    view
		want []string
	}{
		{"status", &protocol.Status{Processing: true, Provider: "copilot", Model: "gpt-5"}, viewWorkers,
			[]string{"copilot/gpt-5", "● working"}},
		{"fleetState", fleetState(), viewWorkers,
			[]string{"DISPATCH PAUSED", "router", "docs", "fleet/router ↑3↓1 ✓ 4 files", "tokens 123.5k", "ctx ████░░░░░░ 42%", "up 25m00s"}},
		{"fleetState by value", *fleetState(), viewTasks, []string{"3 tasks · 1 done", "Split the router"}},
		{"fleetAnalytics", liveFrames()[1], viewTimeline, []string{"router ", "█", "running", "Read", "31"}},
		{"hydrate", hydrate(), viewConversation, []string{"user: Split the router", "fleet: Planned 3 tasks:", "- t-3 document it"}},
		{"reply", &protocol.Reply{Text: "line one\nline two"}, viewConversation, []string{"fleet: line one", "       line two"}},
		{"userMessage", &protocol.UserMessage{Source: "telegram", Text: "status?"}, viewConversation, []string{"telegram: status?"}},
		{"toolCall", liveFrames()[5], viewFeed, []string{"✗ router Bash: … exit status 1 (4.2s)"}},
		{"fileChange", liveFrames()[4], viewFeed, []string{"✎ router edited internal/router/handlers.go"}},
		{"hubEvent", liveFrames()[6], viewFeed, []string{"• docs completed: t-3 done"}},
		{"error", &protocol.Error{Message: "model overloaded"}, viewFeed, []string{"12:00:00 ! error model overloaded"}},
		{"confirmRequest", confirmReq(), viewRequests, []string{"confirm c-17", "go test ./internal/router/..."}},
		{"askRequest", askReq(), viewRequests, []string{"ask (choice) a-4", "1) Postgres — the production default", "2) SQLite — tests only"}},
		{"nativeRootResult", liveFrames()[len(liveFrames())-1], viewNative, []string{"root root-7a1 · revision 12", "intent run · phase running", "holds (1)"}},
		{"intel", intelFrames()[0], viewIntel, []string{"success 95%", "4× context window exceeded", "suggestion 87%"}},
		{"evolution", intelFrames()[1], viewIntel, []string{"1 shadow", "70% → 82%"}},
		{"store", intelFrames()[2], viewIntel, []string{"store · sessions 14 · agent_runs 120"}},
		{"experiment", intelFrames()[3], viewIntel, []string{"winner concise (lift +12%, pass 80%)"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, _ := connected(false)
			m.Apply("f1", c.msg, false)
			mustContain(t, screen(m, c.v, 120, 40), c.want...)
		})
	}
}

func TestIgnoredFrames(t *testing.T) {
	m, _ := loaded(false)
	before, state := screen(m, viewWorkers, 80, 24), counts(m)
	m.Apply("f1", &protocol.Pong{}, false)
	m.Apply("f1", &protocol.Unknown{Type: "futureThing", Raw: []byte(`{"type":"futureThing"}`)}, false)
	m.Apply("f1", nil, false)
	if got := screen(m, viewWorkers, 80, 24); got != before || counts(m) != state {
		t.Errorf("ignored frames changed the view:\n%s\n---\n%s", before, got)
	}
}

func TestBoundsHoldAfterFloods(t *testing.T) {
	m, _ := connected(false)
	f := m.cur()
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)

	long := strings.Repeat("x", 1024)
	for i := range 100_000 {
		m.Apply("f1", &protocol.Transcript{Agent: "router", Role: protocol.RoleAssistant, Text: fmt.Sprintf("%d %s", i, long)}, false)
	}
	lg := f.log("router")
	if n := lg.lines.len(); n != maxTranscript {
		t.Fatalf("kept %d transcript lines, want %d", n, maxTranscript)
	}
	if got := lg.lines.at(lg.lines.len() - 1).text; !strings.HasPrefix(got, "99999 ") || len(got) > maxLineBytes {
		t.Errorf("newest line %.20q… (%d bytes), want line 99999 cut to %d bytes", got, len(got), maxLineBytes)
	}
	for i := range 100_000 {
		m.Apply("f1", &protocol.ToolCall{Agent: "w", Tool: "Bash", Phase: protocol.PhaseStart, Detail: long}, false)
		m.Apply("f1", &protocol.Reply{Text: fmt.Sprintf("reply %d\n%s", i, long)}, false)
		m.Apply("f1", &protocol.Transcript{Agent: fmt.Sprintf("w%d", i%1000), Text: "x"}, false)
		if i%2 == 0 {
			m.sendPrompt(fmt.Sprint(i)) // ids awaiting an echo that never comes
		}
	}
	if n := f.feed.len(); n != maxFeed {
		t.Errorf("feed kept %d, want %d", n, maxFeed)
	}
	if n := f.conv.len(); n > maxConversation || f.convBytes > maxConvBytes {
		t.Errorf("conversation kept %d entries, %d bytes", n, f.convBytes)
	}
	if n := len(f.logs); n > maxWorkerLogs {
		t.Errorf("%d worker logs, want at most %d", n, maxWorkerLogs)
	}
	if n := len(f.own.m); n > maxOwnPrompts {
		t.Errorf("%d own prompt ids kept", n)
	}
	// A reply longer than maxEntryLines keeps its head and says so.
	m.Apply("f1", &protocol.Reply{Text: strings.Repeat("diff line\n", 5000)}, false)
	e := f.conv.at(f.conv.len() - 1)
	if len(e.lines) != maxEntryLines+1 || e.lines[maxEntryLines] != "… 3000 more lines" {
		t.Errorf("long reply kept %d lines, last %q", len(e.lines), e.lines[len(e.lines)-1])
	}

	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	grew := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	if grew > 16<<20 { // unbounded buffers would hold ~100 MiB here
		t.Errorf("heap grew by %d MiB after the floods", grew>>20)
	}
	t.Logf("heap grew by %.1f MiB", float64(grew)/(1<<20))
	checkScreen(t, screen(m, viewFeed, 80, 24), 80, 24)
	checkScreen(t, screen(m, viewConversation, 80, 24), 80, 24)
}

func TestWorkerLogsEvictLeastRecentlyWritten(t *testing.T) {
	m, _ := connected(false)
	f := m.cur()
	m.Apply("f1", &protocol.Transcript{Agent: "keep", Text: "a"}, false)
	for i := 1; i < maxWorkerLogs; i++ {
		m.Apply("f1", &protocol.Transcript{Agent: fmt.Sprintf("w%d", i), Text: "a"}, false)
	}
	m.Apply("f1", &protocol.Transcript{Agent: "keep", Text: "b"}, false) // written again: now the newest
	m.Apply("f1", &protocol.Transcript{Agent: "new", Text: "a"}, false)
	if f.logs["keep"] == nil || f.logs["new"] == nil || f.logs["w1"] != nil || len(f.logs) != maxWorkerLogs {
		t.Errorf("keep=%v new=%v w1=%v, %d logs", f.logs["keep"] != nil, f.logs["new"] != nil, f.logs["w1"] != nil, len(f.logs))
	}
}

// counts is what a re-attach must not change.
func counts(m *Model) string {
	f := m.cur()
	n := 0
	for _, lg := range f.logs {
		n += lg.lines.len()
	}
	return fmt.Sprintf("conv=%d transcripts=%d feed=%d pending=%d dismissed=%d", f.conv.len(), n, f.feed.len(), len(f.pending()), f.dismissed.len())
}

func TestReattachDoesNotDuplicate(t *testing.T) {
	m, _ := newModel(false)
	m.SetFleets([]FleetRef{{ID: "f1", Name: "api"}})
	attach(m, "f1")
	for _, f := range liveFrames() {
		m.Apply("f1", f, false)
	}
	// Live lines of a real session are part of the next hydrate.
	h := hydrate()
	h.Transcripts = append(h.Transcripts,
		protocol.HydrateTranscriptEntry{Agent: "router", Text: "Splitting handlers by resource."},
		protocol.HydrateTranscriptEntry{Agent: "router", Text: "Edit internal/router/handlers.go"},
		protocol.HydrateTranscriptEntry{Agent: "router", Text: "--- FAIL: TestRoutes (0.01s)"},
		protocol.HydrateTranscriptEntry{Agent: "router", Text: "The test expects /v1 prefixes."})
	h.Conversation = append(h.Conversation,
		protocol.HydrateConversationEntry{Role: protocol.RoleUser, Text: "how far along is the router?"},
		protocol.HydrateConversationEntry{Role: protocol.RoleAssistant, Text: "router: 3 of 5 resources split; tests failing on /v1 prefixes."})
	h.Hub = append(h.Hub, *liveFrames()[6].(*protocol.HubEvent))
	replay := func() {
		m.Connected("f1", welcome())
		for _, f := range replayFrames() {
			if _, ok := f.(*protocol.Hydrate); ok {
				f = h
			}
			m.Apply("f1", f, true)
		}
	}
	replay()
	m.Alerts()
	want := counts(m)
	wantReq := screen(m, viewRequests, 80, 24)
	for range 3 {
		m.Disconnected("f1", errors.New("EOF"), time.Second)
		replay()
	}
	if got := counts(m); got != want {
		t.Errorf("after re-attaching: %s, want %s", got, want)
	}
	if got := screen(m, viewRequests, 80, 24); got != wantReq {
		t.Errorf("requests view changed:\n%s\n--- want\n%s", got, wantReq)
	}
	if a := m.Alerts(); len(a) != 0 {
		t.Errorf("replayed requests alerted: %q", a)
	}
}

func TestRestartedFleetDropsOldSession(t *testing.T) {
	m, _ := loaded(false)
	m.Disconnected("f1", errors.New("EOF"), time.Second)
	w := welcome()
	w.SessionID = "new-session"
	m.Connected("f1", w)
	m.Apply("f1", &protocol.ReplayEnd{}, true)
	if c := counts(m); c != "conv=0 transcripts=0 feed=0 pending=0 dismissed=0" {
		t.Errorf("after a restart: %s", c)
	}
	mustContain(t, screen(m, viewWorkers, 80, 24), "no workers yet")
}
