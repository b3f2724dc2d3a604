package console

import (
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/agents-fleet/fleet/protocol"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRender(t *testing.T) {
	yes := protocol.Bool(true)
	tests := []struct {
		name   string
		m      protocol.Message
		replay bool
		want   []string
	}{
		{"transcript", &protocol.Transcript{Role: protocol.RoleTool, Agent: "w1", Text: "building…"}, false,
			[]string{"[w1] building…"}},
		{"transcript stderr", &protocol.Transcript{Role: protocol.RoleTool, Agent: "w1", Text: "oops", Stream: protocol.StreamStderr}, false,
			[]string{"[w1 stderr] oops"}},
		{"transcript coordinator multi-line", &protocol.Transcript{Role: protocol.RoleAssistant, Text: "a\r\nb\n"}, false,
			[]string{"[coordinator] a", "[coordinator] b"}},
		{"transcript escapes neutralised", &protocol.Transcript{Agent: "w1", Text: "\x1b[2Jgone\tx"}, false,
			[]string{"[w1] \uFFFD[2Jgone x"}},
		{"invalid UTF-8 neutralised", &protocol.Transcript{Agent: "w1", Text: "a\x9b2Jb\xffc"}, false,
			[]string{"[w1] a\uFFFD2Jb\uFFFDc"}},
		{"tool start", &protocol.ToolCall{Agent: "a1", AgentName: "w1", Tool: "shell", Phase: protocol.PhaseStart, Detail: "make test"}, false,
			[]string{"▶ w1 shell: make test"}},
		{"tool ok", &protocol.ToolCall{Agent: "w1", Tool: "shell", Phase: protocol.PhaseComplete, DurationMs: protocol.Int(1200)}, false,
			[]string{"✓ w1 shell 1.2s"}},
		{"tool failed", &protocol.ToolCall{Agent: "w1", Tool: "shell", Phase: protocol.PhaseComplete, IsError: yes, Result: "exit 2", DurationMs: protocol.Int(300)}, false,
			[]string{"✗ w1 shell exit 2 (0.3s)"}},
		{"tool failed long output", &protocol.ToolCall{Agent: "w1", Tool: "shell", Phase: protocol.PhaseComplete, IsError: yes, Result: "out\nerr: boom\n"}, false,
			[]string{"✗ w1 shell … err: boom"}},
		{"tool failed no result", &protocol.ToolCall{Agent: "w1", Tool: "shell", Phase: protocol.PhaseComplete, IsError: yes}, false,
			[]string{"✗ w1 shell failed"}},
		{"hub lifecycle", &protocol.HubEvent{From: "w1", Kind: "spawned", Text: "t1: make test"}, false,
			[]string{"• w1 spawned: t1: make test"}},
		{"hub message", &protocol.HubEvent{From: "coordinator", Kind: "message", To: "w2", Text: "stop"}, false,
			[]string{"• coordinator message → w2: stop"}},
		{"reply", &protocol.Reply{Text: "done.\nall green"}, false,
			[]string{"fleet: done.", "       all green"}},
		{"user message", &protocol.UserMessage{Source: "bot", Text: "status?"}, false,
			[]string{"bot: status?"}},
		{"ask choice", &protocol.AskRequest{ID: "ask-1", Question: "Which env?", Kind: "choice",
			Choices: []protocol.AskChoiceOption{{Label: "staging", Value: "stg"}, {Label: "prod", Value: "prod"}}}, false,
			[]string{"? [ask-1] Which env? choices: 1) staging 2) prod (/answer <n>)"}},
		{"ask freeform", &protocol.AskRequest{ID: "ask-2", Question: "Name?", Kind: "freeform"}, false,
			[]string{"? [ask-2] Name? (/answer <text>)"}},
		{"confirm", &protocol.ConfirmRequest{ID: "confirm-1", Summary: "Deploy?"}, false,
			[]string{"? [confirm-1] Deploy? (/yes or /no)"}},
		{"resolved approved", &protocol.ConfirmResolved{ID: "confirm-1", Approved: true, Kind: protocol.KindConfirm, Reason: protocol.ReasonAnswered}, false,
			[]string{"✓ confirm-1 answered (approved)"}},
		{"resolved legacy denied", &protocol.ConfirmResolved{ID: "confirm-1"}, false,
			[]string{"✓ confirm-1 answered (denied)"}},
		{"resolved ask", &protocol.ConfirmResolved{ID: "ask-1", Approved: true, Kind: protocol.KindAsk, Reason: protocol.ReasonAnswered}, false,
			[]string{"✓ ask-1 answered"}},
		{"resolved superseded", &protocol.ConfirmResolved{ID: "confirm-2", Approved: true, Kind: protocol.KindConfirm, Reason: protocol.ReasonSuperseded}, false,
			[]string{"✓ confirm-2 superseded: answered elsewhere (approved)"}},
		{"resolved expired", &protocol.ConfirmResolved{ID: "ask-3", Kind: protocol.KindAsk, Reason: protocol.ReasonExpired}, false,
			[]string{"✗ ask-3 expired"}},
		{"resolved cancelled", &protocol.ConfirmResolved{ID: "ask-4", Kind: protocol.KindAsk, Reason: protocol.ReasonCancelled}, false,
			[]string{"✗ ask-4 cancelled"}},
		{"error", &protocol.Error{Message: "bad token"}, false, []string{"error: bad token"}},
		{"file change", &protocol.FileChange{Changes: []protocol.FileChangeEntry{{Path: "a.go", Agent: "w1", ChangeType: protocol.ChangeEdited}}}, false,
			[]string{"✎ w1 edited a.go"}},
		{"replayed confirm", &protocol.ConfirmRequest{ID: "confirm-1", Summary: "Deploy?"}, true,
			[]string{"· ? [confirm-1] Deploy? (/yes or /no)"}},
		{"welcome", &protocol.Welcome{SessionID: "s1", Model: "local", Cwd: "/src"}, false,
			[]string{"attached: session s1, model local, in /src"}},
		{"status silent", &protocol.Status{Processing: true}, false, nil},
		{"fleetState silent", &protocol.FleetState{}, false, nil},
		{"fleetAnalytics silent", &protocol.FleetAnalytics{}, false, nil},
		{"pong silent", &protocol.Pong{}, false, nil},
		{"unknown silent", &protocol.Unknown{Type: "future"}, false, nil},
		{"replayEnd without history", &protocol.ReplayEnd{}, true, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := NewRenderer(false).Render(tc.m, tc.replay)
			if !slices.Equal(got, tc.want) {
				t.Errorf("Render =\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}

func TestRenderReplayBoundary(t *testing.T) {
	r := NewRenderer(false)
	if got := r.Render(&protocol.Hydrate{Conversation: []protocol.HydrateConversationEntry{
		{Role: protocol.RoleUser, Text: "hi"}, {Role: protocol.RoleAssistant, Text: "hello"},
	}}, true); !slices.Equal(got, []string{"· user: hi", "· fleet: hello"}) {
		t.Errorf("hydrate = %q", got)
	}
	if got := r.Render(&protocol.ReplayEnd{}, true); !slices.Equal(got, []string{LiveMarker}) {
		t.Errorf("replayEnd = %q", got)
	}
	if got := r.Render(&protocol.Reply{Text: "x"}, false); !slices.Equal(got, []string{"fleet: x"}) {
		t.Errorf("live = %q", got)
	}
}

func TestRenderHydrateWindow(t *testing.T) {
	var conv []protocol.HydrateConversationEntry
	for i := range 25 {
		conv = append(conv, protocol.HydrateConversationEntry{Role: protocol.RoleAssistant, Text: strings.Repeat("x", i+1)})
	}
	got := NewRenderer(false).Render(&protocol.Hydrate{Conversation: conv}, true)
	if len(got) != maxHydrateLines+1 || !strings.Contains(got[0], "earlier conversation") {
		t.Fatalf("hydrate = %q", got)
	}
	if want := "· fleet: " + strings.Repeat("x", 25); got[len(got)-1] != want {
		t.Errorf("last line = %q, want %q", got[len(got)-1], want)
	}
}

func TestRenderColor(t *testing.T) {
	got := NewRenderer(true).Render(&protocol.Error{Message: "boom"}, false)
	if len(got) != 1 || !strings.Contains(got[0], "\x1b[31m") || !strings.HasSuffix(got[0], "boom") {
		t.Errorf("coloured error = %q", got)
	}
	plain := NewRenderer(false).Render(&protocol.Error{Message: "boom"}, false)
	if strings.Contains(plain[0], "\x1b") {
		t.Errorf("uncoloured output has escapes: %q", plain)
	}
}

func TestSummary(t *testing.T) {
	r := NewRenderer(false)
	if got := r.Summary(); !slices.Equal(got, []string{"no status received yet"}) {
		t.Errorf("empty summary = %q", got)
	}
	r.Render(&protocol.Status{Processing: true, Model: "m", ActiveWorkerCount: protocol.Int(1), TotalWorkerCount: protocol.Int(2)}, false)
	got := strings.Join(r.Summary(), "\n")
	for _, want := range []string{"coordinator: processing, model m", "workers: 1 active / 2"} {
		if !strings.Contains(got, want) {
			t.Errorf("status summary missing %q:\n%s", want, got)
		}
	}
	r.Render(&protocol.FleetState{
		Coordinator: protocol.FleetCoordinatorState{DispatchPaused: true},
		Workers: []protocol.FleetWorkerSummary{{ID: "w1", Name: "w1", Status: "running", TaskID: "t1", RecentActivity: "make test"},
			{ID: "w2", Name: "w2", Status: "running", TaskID: "t2", Host: "gpu-1"}},
		WorkerActive: 1, WorkerTotal: 1,
		Tasks: protocol.FleetTaskSummary{Done: 2, Running: 1, Total: 3,
			Items: []protocol.FleetTaskItem{{ID: "t1", Subject: "make test", Status: "running"}}},
		Tokens: &protocol.FleetTokenState{ContextPercent: protocol.Float(42)},
	}, false)
	r.Render(&protocol.FleetAnalytics{ToolUsage: []protocol.ToolUsageEntry{{ToolName: "shell", Count: 7}}}, false)
	got = strings.Join(r.Summary(), "\n")
	for _, want := range []string{
		"coordinator: idle (dispatch paused)",
		"workers: 1 active / 1",
		"w1           running    task t1  make test",
		"w2@gpu-1     running    task t2",
		"tasks: 2 done, 1 running, 0 pending, 0 blocked, 3 total",
		"usage: context 42%",
		"tools: shell 7",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("fleetState summary missing %q:\n%s", want, got)
		}
	}
}

func TestFormatMs(t *testing.T) {
	for ms, want := range map[int64]string{45: "45ms", 300: "0.3s", 1200: "1.2s", 59_999: "1m0s", 59_900: "59.9s", 125_000: "2m5s", -1: "0s"} {
		if got := formatMs(ms); got != want {
			t.Errorf("formatMs(%d) = %q, want %q", ms, got, want)
		}
	}
}
