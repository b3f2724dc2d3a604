package tui

import (
	"errors"
	"fmt"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/agents-fleet/fleet/protocol"
)

// screen renders view v of m at w×h.
func screen(m *Model, v view, w, h int) string {
	m.Resize(w, h)
	m.view = v
	return m.View()
}

func mustContain(t *testing.T, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Errorf("view lacks %q:\n%s", sub, s)
		}
	}
}

func mustNotContain(t *testing.T, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			t.Errorf("view has %q:\n%s", sub, s)
		}
	}
}

func connected(color bool) (*Model, *clock) {
	m, c := newModel(color)
	m.SetFleets([]FleetRef{{ID: "f1", Name: "api"}})
	m.Connected("f1", welcome())
	m.Apply("f1", &protocol.ReplayEnd{}, true)
	return m, c
}

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

func TestTranscriptFold(t *testing.T) {
	m, _ := connected(false)
	m.Apply("f1", fleetState(), false)
	m.Apply("f1", &protocol.Transcript{Agent: "router", Role: protocol.RoleAssistant, Text: "one\ntwo\n"}, false)
	m.Apply("f1", &protocol.Transcript{Agent: "router", Role: protocol.RoleTool, Stream: protocol.StreamStderr, Text: "boom"}, false)
	lg := m.cur().log("router")
	if lg == nil || lg.lines.len() != 3 {
		t.Fatalf("router log: %+v", lg)
	}
	press(m, "enter")
	mustContain(t, screen(m, viewWorkers, 80, 24), "  one", "  two", "! boom", "3 lines", "following")
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
	return fmt.Sprintf("conv=%d transcripts=%d feed=%d pending=%d dismissed=%d", f.conv.len(), n, f.feed.len(), len(f.pending), f.dismissed.len())
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

func TestRequestResolvedWhileAwayGoesOnReattach(t *testing.T) {
	m, _ := loaded(false)
	m.Disconnected("f1", errors.New("EOF"), time.Second)
	// The confirm was answered on the fleet's terminal meanwhile: the
	// replay re-sends only the ask.
	m.Connected("f1", welcome())
	for _, f := range replayFrames() {
		if _, ok := f.(*protocol.ConfirmRequest); !ok {
			m.Apply("f1", f, true)
		}
	}
	if p := m.cur().pending; len(p) != 1 || p[0].id != "a-4" {
		t.Fatalf("pending after re-attach: %d", len(p))
	}
	mustNotContain(t, screen(m, viewRequests, 100, 30), "c-17")
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

func TestConfirmResolved(t *testing.T) {
	reasons := []struct {
		reason protocol.ResolvedReason
		notice string
	}{
		{protocol.ReasonSuperseded, "dismissed: answered elsewhere"},
		{protocol.ReasonAnswered, "dismissed: answered elsewhere"},
		{"", "dismissed: answered elsewhere"},
		{protocol.ReasonExpired, "dismissed: expired"},
		{protocol.ReasonCancelled, "dismissed: cancelled"},
	}
	for _, r := range reasons {
		t.Run(string(r.reason), func(t *testing.T) {
			m, _ := loaded(false)
			m.Apply("f1", &protocol.ConfirmResolved{ID: "c-17", Kind: protocol.KindConfirm, Reason: r.reason}, false)
			if len(m.cur().pending) != 1 || m.cur().pending[0].id != "a-4" {
				t.Fatalf("pending after resolve: %d", len(m.cur().pending))
			}
			s := screen(m, viewRequests, 100, 30)
			mustContain(t, s, r.notice+" (c-17) — Run a shell command in worker router: go test", "1 request waiting")
			mustNotContain(t, s, "confirm c-17")
		})
	}
	t.Run("ours", func(t *testing.T) {
		m, _ := loaded(false)
		m.view = viewRequests
		acts := press(m, "y")
		if len(acts) != 1 {
			t.Fatalf("y: %v", acts)
		}
		mustContain(t, screen(m, viewRequests, 100, 30), "answering… (approve)")
		// The fleet reports our own answer as superseded to the others.
		m.Apply("f1", &protocol.ConfirmResolved{ID: "c-17", Approved: true, Reason: protocol.ReasonSuperseded}, false)
		mustNotContain(t, screen(m, viewRequests, 100, 30), "dismissed", "c-17")
	})
	t.Run("replay", func(t *testing.T) {
		m, _ := loaded(false)
		m.Apply("f1", &protocol.ConfirmResolved{ID: "c-17", Reason: protocol.ReasonExpired}, true)
		mustNotContain(t, screen(m, viewRequests, 100, 30), "dismissed", "c-17")
	})
	t.Run("last five", func(t *testing.T) {
		m, _ := connected(false)
		for i := range 8 {
			id := fmt.Sprintf("c-%d", i)
			m.Apply("f1", &protocol.ConfirmRequest{ID: id, Summary: "job " + id}, false)
			m.Apply("f1", &protocol.ConfirmResolved{ID: id, Reason: protocol.ReasonExpired}, false)
		}
		s := screen(m, viewRequests, 100, 30)
		if n := strings.Count(s, "dismissed: expired"); n != maxDismissed {
			t.Errorf("%d notices, want %d:\n%s", n, maxDismissed, s)
		}
		mustContain(t, s, "job c-7", "job c-3")
		mustNotContain(t, s, "job c-2")
	})
}

func TestOwnPromptEchoShownOnceAsOurs(t *testing.T) {
	m, _ := connected(false)
	press(m, ":")
	m.Key(Key{Text: "run the tests"})
	acts := press(m, "enter")
	p := sentPrompt(t, acts)
	if p.Text != "run the tests" || !strings.HasPrefix(p.RequestID, "req-") {
		t.Fatalf("prompt %+v", p)
	}
	m.Apply("f1", &protocol.UserMessage{Source: "fleet-console", Text: "run the tests", RequestID: p.RequestID}, false)
	m.Apply("f1", &protocol.UserMessage{Source: "telegram", Text: "and lint", RequestID: "req-other"}, false)
	s := screen(m, viewConversation, 80, 24)
	if body := strings.Join(lines(s)[3:21], "\n"); strings.Count(body, "run the tests") != 1 {
		t.Errorf("own prompt not shown exactly once:\n%s", s)
	}
	mustContain(t, s, "you: run the tests", "telegram: and lint")
	mustNotContain(t, s, "fleet-console:")
}

// hostile carries terminal escapes: clear screen, an OSC title and hyperlink,
// a bell, C1 CSI as a rune and as a raw byte, a bidi override.
const hostile = "\x1b[2J\x1b]0;owned\x07\x1b]8;;http://x\x1b\\link\u009b31m\x9b32m\u202e\a\r\n"

func TestFleetTextNeverInjectsEscapes(t *testing.T) {
	h := func(s string) string { return s + hostile + s }
	for _, color := range []bool{false, true} {
		m, c := newModel(color)
		m.SetFleets([]FleetRef{{ID: "f1", Name: h("api"), Cwd: h("/src")}, {ID: "f2", Name: h("web")}})
		w := welcome()
		w.SessionName, w.SessionID, w.Model = h("name"), h("sid"), h("model")
		m.Connected("f1", w)
		st := fleetState()
		st.Workers[0].Name, st.Workers[0].Status, st.Workers[0].AgentType = h("router"), h("running"), h("coder")
		st.Workers[0].TaskID, st.Workers[0].RecentActivity = h("t"), h("act")
		st.Workers[0].Git.Branch, st.Workers[0].Git.Files[0].Path, st.Workers[0].Git.Files[0].Status = h("br"), h("p"), h("added")
		st.Workers[1].Git.Conflicts = []string{h("conflict")}
		st.Workers[0].TopTools = []string{h("tool")}
		st.Tasks.Items[0].Subject, st.Tasks.Items[0].Owner, st.Tasks.Items[0].ID = h("subj"), h("own"), h("id")
		st.Session.Provider = h("prov")
		frames := []protocol.Message{
			st,
			&protocol.Status{Provider: h("prov"), Model: h("model")},
			&protocol.Transcript{Agent: h("router"), Text: h("line")},
			&protocol.Transcript{Agent: st.Workers[0].Name, Text: h("line")},
			&protocol.ToolCall{Agent: h("a"), AgentName: h("n"), Tool: h("t"), Detail: h("d"), Phase: protocol.PhaseStart},
			&protocol.ToolCall{Agent: h("a"), Tool: h("t"), Result: h("r"), IsError: protocol.Bool(true), Phase: protocol.PhaseComplete},
			&protocol.FileChange{Changes: []protocol.FileChangeEntry{{Path: h("p"), Agent: h("a"), ChangeType: protocol.ChangeType(h("c"))}}},
			&protocol.HubEvent{From: h("f"), Kind: h("k"), To: h("t"), Text: h("x")},
			&protocol.Error{Message: h("err")},
			&protocol.Reply{Text: h("reply")},
			&protocol.UserMessage{Source: h("src"), Text: h("txt")},
			&protocol.ConfirmRequest{ID: h("c"), Summary: h("sum")},
			&protocol.AskRequest{ID: h("a"), Question: h("q"), Kind: h("k"), Choices: []protocol.AskChoiceOption{{Label: h("l"), Value: "v", Description: h("d")}}},
			&protocol.CommandCatalog{Commands: []protocol.CommandCatalogEntry{{Name: "/" + h("cmd")}, {Name: "/" + h("cmd2")}}},
			&protocol.FleetAnalytics{ToolUsage: []protocol.ToolUsageEntry{{ToolName: h("tool"), Count: 3}},
				WorkerTimeline: []protocol.WorkerTimelineEntry{{Name: h("w"), Status: h("s"), StartedAt: at(-time.Minute)}}},
			&protocol.Hydrate{Conversation: []protocol.HydrateConversationEntry{{Role: protocol.Role(h("role")), Text: h("c")}},
				Transcripts: []protocol.HydrateTranscriptEntry{{Agent: h("router"), Text: h("t")}}},
			&protocol.FleetIntel{Summary: protocol.FleetIntelSummary{TopErrors: []protocol.FleetIntelError{{Message: h("e")}}},
				Suggestions: []protocol.FleetIntelSuggestion{{Title: h("t"), SuggestionType: h("s")}}, Skills: []protocol.FleetIntelSkill{{Name: h("s")}}},
			&protocol.FleetEvolution{Shadows: []protocol.FleetEvolutionShadow{{Skill: h("s"), Summary: h("x"), Status: h("st")}},
				Timeline: []protocol.FleetEvolutionRecord{{Skill: h("s"), Summary: h("x")}}},
			&protocol.FleetStore{Counts: []protocol.FleetStoreCount{{Name: h("n")}}, Steering: []protocol.FleetStoreSteering{{Text: h("t")}}},
			&protocol.FleetExperiment{Experiments: []protocol.FleetExperimentEntry{{Name: h("n"), Status: h("s"),
				LatestRun: &protocol.FleetExperimentRun{Winner: h("w")}}}},
			&protocol.NativeRootResult{Result: protocol.NativeResult{Kind: protocol.NativeKindRoots, Roots: []protocol.NativeRootInfo{
				{ID: h("r1"), Intent: h("i"), Phase: h("p")}, {ID: h("r2")}}}},
			&protocol.NativeRootResult{Result: protocol.NativeResult{Kind: protocol.NativeKindStatus, Root: &protocol.NativeRootStatus{
				ID: h("root"), Intent: h("i"), Phase: h("p"), Grant: protocol.NativeGrant{SessionID: h("s"), PolicyVersion: h("v")},
				Tasks: []protocol.NativeTask{{State: h("s")}}, Holds: []protocol.NativeHold{{HoldHash: h("h"), Reason: h("r"), TaskID: h("t")}},
				Decisions:       []protocol.NativeDecision{{ID: h("d"), Verdict: h("v"), TaskID: h("t"), Rationale: h("r")}},
				PendingReceipts: []protocol.NativeReceipt{{OperationID: h("o"), Action: h("a"), Status: h("s")}}}}},
			&protocol.NativeRootResult{Result: protocol.NativeResult{Kind: protocol.NativeKindError, Code: h("c"), Message: h("m")}},
		}
		for _, f := range frames {
			m.Apply("f1", f, false)
		}
		m.Apply("f2", &protocol.ConfirmRequest{ID: "x", Summary: h("other")}, false)
		screens := map[string]string{}
		for v := viewWorkers; v <= viewIntel; v++ {
			screens[fmt.Sprint("view ", v)] = screen(m, v, 100, 40)
		}
		m.view = viewWorkers
		press(m, "enter")
		screens["detail"] = m.View()
		press(m, "/")
		m.Key(Key{Text: "line"})
		press(m, "enter")
		screens["search"] = m.View()
		press(m, "esc", "esc", "F")
		screens["picker"] = m.View()
		press(m, "esc", ":", "/", "tab")
		screens["completion"] = m.View()
		press(m, "esc", "esc")
		m.Disconnected("f1", errors.New(h("dial")), 3*time.Second)
		m.view = viewNative
		screens["disconnected"] = m.View()
		c.t = c.t.Add(time.Hour)
		for name, s := range screens {
			checkEscapes(t, fmt.Sprintf("color=%v %s", color, name), s, color)
		}
		alerts := m.Alerts()
		if len(alerts) == 0 {
			t.Fatal("no alerts")
		}
		for _, a := range alerts {
			if a != "\a" {
				checkEscapes(t, "alert", a[1:len(a)-1], false)
			}
		}
	}
}

var sgr = regexp.MustCompile(`\x1b\[[0-9;]*m`)

// checkEscapes: NoColor views have no escape at all, colour views only our
// SGR styles; neither has another control character, invalid UTF-8 or a
// bidi control.
func checkEscapes(t *testing.T, name, s string, color bool) {
	t.Helper()
	rest := s
	if color {
		rest = sgr.ReplaceAllString(s, "")
	}
	if !utf8.ValidString(rest) {
		t.Errorf("%s: invalid UTF-8 reached the view: %q", name, rest)
	}
	for _, r := range rest {
		if (unicode.IsControl(r) && r != '\n') || unicode.Is(unicode.Bidi_Control, r) {
			t.Errorf("%s: %U reached the view: %q", name, r, rest)
			return
		}
	}
}

func TestAlerts(t *testing.T) {
	t.Run("unfocused", func(t *testing.T) {
		m, _ := connected(false)
		m.view = viewRequests
		m.Focused(false)
		m.Apply("f1", confirmReq(), false)
		// The summary's line break becomes a space; the text is cut to 120 runes.
		full := "fleet api-overhaul: needs input: Run a shell command in worker router: go test ./internal/router/... -race -count=1 && go vet ./internal/router/..."
		want := []string{"\a", "\x1b]9;" + string([]rune(full)[:maxAlertRunes-1]) + "…\x07"}
		if got := m.Alerts(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("alerts %q, want %q", got, want)
		}
		if got := m.Alerts(); len(got) != 0 {
			t.Errorf("alerts not cleared: %q", got)
		}
		m.Apply("f1", confirmReq(), false) // the same request again
		if got := m.Alerts(); len(got) != 0 {
			t.Errorf("second alert for one request: %q", got)
		}
	})
	t.Run("focused on requests", func(t *testing.T) {
		m, _ := connected(false)
		m.view = viewRequests
		m.Apply("f1", askReq(), false)
		if got := m.Alerts(); len(got) != 0 {
			t.Errorf("alert while watching the queue: %q", got)
		}
	})
	t.Run("other view", func(t *testing.T) {
		m, _ := connected(false)
		m.Apply("f1", askReq(), false)
		if got := m.Alerts(); len(got) != 2 || !strings.Contains(got[1], "needs input: Which database") {
			t.Errorf("alerts %q", got)
		}
	})
	t.Run("other fleet", func(t *testing.T) {
		m, _ := connected(false)
		m.SetFleets([]FleetRef{{ID: "f1"}, {ID: "f2", Name: "web"}})
		m.view = viewRequests
		m.Apply("f2", askReq(), false)
		if got := m.Alerts(); len(got) != 2 || !strings.Contains(got[1], "fleet web: needs input") {
			t.Errorf("alerts %q", got)
		}
	})
	t.Run("replay", func(t *testing.T) {
		m, _ := connected(false)
		m.Focused(false)
		m.Apply("f1", askReq(), true)
		if got := m.Alerts(); len(got) != 0 {
			t.Errorf("replay alerted: %q", got)
		}
	})
	modes := []struct {
		mode NotifyMode
		want string
	}{
		{NotifyBell, `["\a"]`},
		{NotifyOSC777, `["\x1b]777;notify;fleet console;fleet api-overhaul: needs input: Which database should the migration target?\a"]`},
		{NotifyBell | NotifyOSC9 | NotifyOSC777, `["\a" "\x1b]9;fleet api-overhaul: needs input: Which database should the migration target?\a" "\x1b]777;notify;fleet console;fleet api-overhaul: needs input: Which database should the migration target?\a"]`},
		{NotifyOff | NotifyBell, `[]`},
	}
	for _, c := range modes {
		m := New(Options{Now: func() time.Time { return t0 }, NoColor: true, Notify: c.mode})
		m.Connected("f1", welcome())
		m.Apply("f1", askReq(), false)
		if got := fmt.Sprintf("%q", m.Alerts()); got != c.want {
			t.Errorf("mode %b: %s, want %s", c.mode, got, c.want)
		}
	}
}

func TestAlertTextClipped(t *testing.T) {
	m, _ := connected(false)
	m.Apply("f1", &protocol.ConfirmRequest{ID: "c", Summary: strings.Repeat("é", 500) + hostile}, false)
	a := m.Alerts()
	if len(a) != 2 {
		t.Fatalf("alerts %q", a)
	}
	body := strings.TrimSuffix(strings.TrimPrefix(a[1], "\x1b]9;"), "\x07")
	if n := len([]rune(body)); n != maxAlertRunes || !strings.HasSuffix(body, "…") {
		t.Errorf("alert text is %d runes: %q", n, body)
	}
}

func TestConnectionStateInHeader(t *testing.T) {
	m, c := loaded(false)
	m.Disconnected("f1", errors.New("dial unix /run/f1.sock: connection refused"), 5*time.Second)
	c.t = c.t.Add(2 * time.Second)
	s := screen(m, viewWorkers, 120, 40)
	mustContain(t, s, "RECONNECTING in 3s: dial unix /run/f1.sock: connection refused")
	m.Connected("f1", welcome())
	mustNotContain(t, screen(m, viewWorkers, 120, 40), "RECONNECTING")

	n, _ := newModel(false)
	n.SetFleets([]FleetRef{{ID: "f1", Name: "api"}})
	mustContain(t, screen(n, viewWorkers, 80, 24), "fleet api", "CONNECTING", "connecting to api…")
}

func TestStaleness(t *testing.T) {
	m, c := loaded(false)
	st := fleetState()
	st.Coordinator.StaleMs = protocol.Int(12_000)
	m.Apply("f1", st, false)
	mustContain(t, screen(m, viewWorkers, 120, 40), "stale 12s")
	mustNotContain(t, screen(m, viewWorkers, 120, 40), "no frames")
	c.t = c.t.Add(45 * time.Second)
	mustContain(t, screen(m, viewWorkers, 160, 40), "no frames for 45s", "up 25m45s")
	m.Apply("f1", &protocol.Pong{}, false)
	mustNotContain(t, screen(m, viewWorkers, 120, 40), "no frames")
}

func TestSetFleetsKeepsStateByID(t *testing.T) {
	m, _ := loaded(false)
	m.SetFleets([]FleetRef{{ID: "f0", Name: "new"}, {ID: "f1", Name: "api"}})
	if m.Selected() != "f1" || len(m.cur().pending) != 2 {
		t.Errorf("selected %q, pending %d", m.Selected(), len(m.cur().pending))
	}
	// The selected fleet left the registry (it stopped): it stays selected,
	// shown as stopped, rather than the console jumping to a fleet it is
	// not attached to; a fleet that is neither listed nor selected goes.
	m.SetFleets([]FleetRef{{ID: "f0", Name: "new"}})
	m.Disconnected("f1", errStopped, 0)
	if m.Selected() != "f1" || m.fleets["f2"] != nil {
		t.Errorf("after f1 stopped: selected %q, f2 kept %v", m.Selected(), m.fleets["f2"] != nil)
	}
	s := screen(m, viewWorkers, 100, 24)
	mustContain(t, s, "fleet api-overhaul", "RECONNECTING…: the fleet stopped; waiting for it to start again")
	mustNotContain(t, s, "fleet new", "CONNECTING ")
	// Following it to its successor drops the stopped one.
	m.Select("f0")
	if m.fleets["f1"] != nil {
		t.Error("the stopped fleet is kept after the console moved on")
	}
	mustContain(t, screen(m, viewWorkers, 100, 24), "fleet new", "CONNECTING", "connecting to new…")
	// Frames the old connection still delivers do not bring it back (its
	// requests would count as waiting in another fleet).
	m.Apply("f1", askReq(), false)
	if m.fleets["f1"] != nil {
		t.Error("a frame of the stopped fleet brought it back")
	}
	mustNotContain(t, screen(m, viewWorkers, 100, 24), "waiting in other fleets")
}

// The header shows how much of the session's token budget is used.
func TestHeaderBudget(t *testing.T) {
	m, _ := connected(false)
	fs := fleetState()
	fs.Budget = &protocol.FleetBudget{SessionTokens: 10000, SessionUsed: 8500}
	m.Apply("f1", fs, false)
	mustContain(t, screen(m, viewWorkers, 120, 24), "budget 8.5k/10.0k (85%)")
	fs.Budget = &protocol.FleetBudget{WorkerTokens: 500}
	m.Apply("f1", fs, false)
	mustContain(t, screen(m, viewWorkers, 120, 24), "budget 500/worker")
}

// TestSkippedEntriesAreNoted: the client left malformed hydrate entries
// out (client.Conn.Skipped); the rest is folded as usual and the feed says
// how many were skipped, among the errors.
func TestSkippedEntriesAreNoted(t *testing.T) {
	m, _ := newModel(false)
	m.SetFleets([]FleetRef{{ID: "f1", Name: "api"}})
	m.Connected("f1", welcome())
	m.Apply("f1", &protocol.Hydrate{Conversation: []protocol.HydrateConversationEntry{{Role: protocol.RoleUser, Text: "add a greeting", Ts: 1}}}, true)
	m.Skipped("f1", protocol.TypeHydrate, 2)
	m.Skipped("f1", protocol.TypeFleetState, 1)
	f := m.fleetFor("f1")
	var got []string
	for i := range f.feed.len() {
		if e := f.feed.at(i); e.kind == feedErrors {
			got = append(got, e.what)
		}
	}
	if strings.Join(got, "|") != "2 history entries skipped (malformed)|1 malformed fleetState entry skipped" || f.conv.len() != 1 {
		t.Fatalf("feed %q, %d conversation entries", got, f.conv.len())
	}
}
