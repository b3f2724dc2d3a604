package tui

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/agents-fleet/fleet/protocol"
)

// Test helpers: a model on a fixed clock, a realistic fleet to load it
// with, and the checks every screen must pass.

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// t0 is the fixed "now" of every test.
var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// at is an epoch-ms timestamp d after t0.
func at(d time.Duration) int64 { return t0.Add(d).UnixMilli() }

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// newModel returns a model on a fixed clock.
func newModel(color bool) (*Model, *clock) {
	c := &clock{t: t0}
	m := New(Options{Now: c.now, NoColor: !color})
	return m, c
}

// Fixture frames: a realistic fleet "api-overhaul" with two workers.

func welcome() *protocol.Welcome {
	return &protocol.Welcome{SessionID: "3f2a9c1b77e0d4", SessionName: "api-overhaul", Model: "claude-sonnet-4",
		Cwd: "/src/api", Capabilities: protocol.Capabilities()}
}

func fleetState() *protocol.FleetState {
	return &protocol.FleetState{
		Ts:          at(0),
		Coordinator: protocol.FleetCoordinatorState{SessionID: "3f2a9c1b77e0d4", IsProcessing: true, DispatchPaused: true},
		Workers: []protocol.FleetWorkerSummary{
			{ID: "w-1", Name: "router", Status: "running", ToolUseCount: 42, TokenCount: 51_300, AgentType: "coder",
				TaskID: "t-2", StartedAt: at(-12*time.Minute - 30*time.Second), RecentActivity: "Edit internal/router/handlers.go",
				InputTokens: protocol.Int(40_100), OutputTokens: protocol.Int(11_200), TopTools: []string{"Edit", "Bash", "Read"},
				Git: &protocol.WorkerGit{Branch: "fleet/router", BaseBranch: "main", Ahead: 3, Behind: 1, FilesChanged: 4,
					LinesAdded: 182, LinesRemoved: 37, Uncommitted: 1, Mergeable: protocol.Bool(true),
					Files: []protocol.WorkerGitFile{
						{Path: "internal/router/handlers.go", Status: "added", Added: 120},
						{Path: "internal/router/router.go", Status: "modified", Added: 40, Removed: 30},
						{Path: "internal/router/router_test.go", Status: "modified", Added: 22, Removed: 7},
						{Path: "go.sum", Status: "modified"},
					}}},
			{ID: "w-2", Name: "docs", Status: "completed", ToolUseCount: 9, TokenCount: 8_400, AgentType: "writer",
				TaskID: "t-3", StartedAt: at(-20 * time.Minute), CompletedAt: at(-14 * time.Minute),
				RecentActivity: "Wrote docs/endpoints.md",
				Git: &protocol.WorkerGit{Branch: "fleet/docs", BaseBranch: "main", Ahead: 1, FilesChanged: 1, LinesAdded: 64,
					Mergeable: protocol.Bool(false), Conflicts: []string{"docs/endpoints.md"},
					Files: []protocol.WorkerGitFile{{Path: "docs/endpoints.md", Status: "added", Added: 64}}}},
		},
		WorkerActive: 1,
		WorkerTotal:  2,
		Tasks: protocol.FleetTaskSummary{Done: 1, Running: 1, Pending: 1, Total: 3, Items: []protocol.FleetTaskItem{
			{ID: "t-1", Subject: "Map the API surface", Status: "done", Owner: "planner"},
			{ID: "t-2", Subject: "Split the router into one handler per resource", Status: "running", Owner: "router"},
			{ID: "t-3", Subject: "Document the new endpoints", Status: "pending", Owner: "docs"},
		}},
		Session: &protocol.FleetSessionInfo{Model: "claude-sonnet-4", Provider: "claude", SessionName: "api-overhaul",
			Uptime: protocol.Int((25 * time.Minute).Milliseconds())},
		Tokens: &protocol.FleetTokenState{TotalTokens: protocol.Int(123_456), ContextPercent: protocol.Float(42)},
	}
}

func confirmReq() *protocol.ConfirmRequest {
	return &protocol.ConfirmRequest{ID: "c-17", Ts: at(-2 * time.Minute),
		Summary: "Run a shell command in worker router:\ngo test ./internal/router/... -race -count=1 && go vet ./internal/router/..."}
}

func askReq() *protocol.AskRequest {
	return &protocol.AskRequest{ID: "a-4", Ts: at(-time.Minute), Kind: "choice",
		Question: "Which database should the migration target?",
		Choices: []protocol.AskChoiceOption{
			{Label: "Postgres", Value: "pg", Description: "the production default"},
			{Label: "SQLite", Value: "sqlite", Description: "tests only"},
		},
		AllowFreeform: protocol.Bool(true)}
}

func catalog() *protocol.CommandCatalog {
	return &protocol.CommandCatalog{Commands: []protocol.CommandCatalogEntry{
		{Name: "/help", Kind: "builtin"}, {Name: "/history", Kind: "builtin"}, {Name: "/hub", Kind: "builtin"},
		{Name: "/diff", Kind: "builtin"}, {Name: "/merge", Kind: "builtin"}, {Name: "/tell", Kind: "builtin"},
	}}
}

func hydrate() *protocol.Hydrate {
	return &protocol.Hydrate{
		Conversation: []protocol.HydrateConversationEntry{
			{Role: protocol.RoleUser, Text: "Split the router and document the endpoints.", Ts: at(-21 * time.Minute)},
			{Role: protocol.RoleAssistant, Text: "Planned 3 tasks:\n- t-1 map the API\n- t-2 split the router\n- t-3 document it", Ts: at(-20 * time.Minute)},
		},
		Transcripts: []protocol.HydrateTranscriptEntry{
			{Agent: "router", Role: protocol.RoleAssistant, Text: "Reading the current router.", Ts: at(-12 * time.Minute)},
			{Agent: "router", Role: protocol.RoleTool, Text: "Read internal/router/router.go", Ts: at(-11 * time.Minute)},
			{Agent: "docs", Role: protocol.RoleAssistant, Text: "Documenting 12 endpoints.", Ts: at(-19 * time.Minute)},
		},
		Hub: []protocol.HubEvent{{From: "coordinator", Kind: protocol.HubSpawned, To: "router", Text: "t-2", Ts: at(-12*time.Minute - 30*time.Second)}},
	}
}

func intelFrames() []protocol.Message {
	return []protocol.Message{
		&protocol.FleetIntel{Ts: at(-30 * time.Minute), Summary: protocol.FleetIntelSummary{SessionCount: 14, TotalAgentRuns: 120,
			FailedRuns: 6, SuccessRate: 0.95, TotalTokens: 2_100_000, AvgSessionDurationMs: 754_000,
			TopErrors: []protocol.FleetIntelError{{Message: "context window exceeded", Count: 4}, {Message: "go test failed", Count: 2}}},
			Suggestions: []protocol.FleetIntelSuggestion{{ID: "s1", SuggestionType: "task-sizing", Title: "split tasks over 400 lines", Confidence: 0.87}},
			Skills:      []protocol.FleetIntelSkill{{Name: "go-test", Uses: 40}, {Name: "review", Uses: 12}}},
		&protocol.FleetEvolution{Ts: at(-30 * time.Minute), Shadows: []protocol.FleetEvolutionShadow{{ID: "sh1", Skill: "review",
			Summary: "check error wrapping", Status: "evaluating", Trials: protocol.Int(12),
			BaselineSuccessRate: protocol.Float(0.7), CandidateSuccessRate: protocol.Float(0.82)}},
			Timeline: []protocol.FleetEvolutionRecord{{ID: "e1", Skill: "go-test", Summary: "run -race first",
				SuccessRateBefore: protocol.Float(0.6), SuccessRateAfter: protocol.Float(0.75)}}},
		&protocol.FleetStore{Ts: at(-30 * time.Minute), Counts: []protocol.FleetStoreCount{{Name: "sessions", Count: 14},
			{Name: "agent_runs", Count: 120}, {Name: "steering", Count: 5}}},
		&protocol.FleetExperiment{Ts: at(-30 * time.Minute), Experiments: []protocol.FleetExperimentEntry{{ID: "x1",
			Name: "prompt-style", Status: "completed", Variants: []string{"verbose", "concise"},
			LatestRun: &protocol.FleetExperimentRun{ID: "r1", Winner: "concise", Variants: []protocol.FleetExperimentVariant{
				{Variant: "verbose", Samples: 20, Mean: 0.6, PassRate: 0.6}, {Variant: "concise", Samples: 20, Mean: 0.7, PassRate: 0.8, Lift: protocol.Float(0.12)}}}}}},
	}
}

// replayFrames is what the fleet sends between welcome and replayEnd.
func replayFrames() []protocol.Message {
	out := []protocol.Message{catalog()}
	out = append(out, intelFrames()...)
	return append(out, hydrate(), confirmReq(), askReq(), fleetState(), &protocol.ReplayEnd{})
}

func liveFrames() []protocol.Message {
	return []protocol.Message{
		&protocol.Status{Processing: true, Provider: "claude", Model: "claude-sonnet-4"},
		&protocol.FleetAnalytics{Ts: at(0),
			ToolUsage: []protocol.ToolUsageEntry{{ToolName: "Read", Count: 31}, {ToolName: "Edit", Count: 12}, {ToolName: "Bash", Count: 8}},
			WorkerTimeline: []protocol.WorkerTimelineEntry{
				{ID: "w-2", Name: "docs", AgentType: "writer", StartedAt: at(-20 * time.Minute), CompletedAt: at(-14 * time.Minute), Status: "completed"},
				{ID: "w-1", Name: "router", AgentType: "coder", StartedAt: at(-12*time.Minute - 30*time.Second), Status: "running"},
			}},
		&protocol.ToolCall{Agent: "w-1", AgentName: "router", Tool: "Bash", Phase: protocol.PhaseStart, Ts: at(-3 * time.Minute), Detail: "go build ./..."},
		&protocol.ToolCall{Agent: "w-1", AgentName: "router", Tool: "Bash", Phase: protocol.PhaseComplete, Ts: at(-3*time.Minute + 2*time.Second),
			DurationMs: protocol.Int(1800), IsError: protocol.Bool(false)},
		&protocol.FileChange{Ts: at(-2*time.Minute - 30*time.Second), Changes: []protocol.FileChangeEntry{
			{Path: "internal/router/handlers.go", Agent: "router", Tool: "Edit", ChangeType: protocol.ChangeEdited, Ts: at(-2*time.Minute - 30*time.Second)}}},
		&protocol.ToolCall{Agent: "w-1", AgentName: "router", Tool: "Bash", Phase: protocol.PhaseComplete, Ts: at(-90 * time.Second),
			DurationMs: protocol.Int(4200), IsError: protocol.Bool(true), Result: "--- FAIL: TestRoutes (0.01s)\nexit status 1"},
		&protocol.HubEvent{From: "docs", Kind: protocol.HubCompleted, Ts: at(-14 * time.Minute), Text: "t-3 done"},
		&protocol.Error{Message: "budget: 80% of the session token budget used"},
		&protocol.Transcript{Agent: "router", Role: protocol.RoleAssistant, Text: "Splitting handlers by resource.", Ts: at(-4 * time.Minute)},
		&protocol.Transcript{Agent: "router", Role: protocol.RoleTool, Text: "Edit internal/router/handlers.go", Ts: at(-3 * time.Minute)},
		&protocol.Transcript{Agent: "router", Role: protocol.RoleTool, Stream: protocol.StreamStderr, Text: "--- FAIL: TestRoutes (0.01s)", Ts: at(-90 * time.Second)},
		&protocol.Transcript{Agent: "router", Role: protocol.RoleAssistant, Kind: protocol.TranscriptReasoning, Text: "The test expects /v1 prefixes.", Ts: at(-80 * time.Second)},
		&protocol.UserMessage{Source: "telegram", Text: "how far along is the router?"},
		&protocol.Reply{Text: "router: 3 of 5 resources split; tests failing on /v1 prefixes.", Ts: at(-time.Minute)},
		&protocol.NativeRootResult{ID: protocol.String("console-boot"), Result: protocol.NativeResult{Kind: protocol.NativeKindStatus,
			Root: &protocol.NativeRootStatus{ID: "root-7a1", Revision: 12, Intent: "run", Phase: "running",
				Grant: protocol.NativeGrant{SessionID: "3f2a9c1b77e0d4", PolicyVersion: "v3"},
				Tasks: []protocol.NativeTask{{ID: "t-1", State: "settled"}, {ID: "t-2", State: "running"}, {ID: "t-3", State: "reserved"}},
				Holds: []protocol.NativeHold{{HoldHash: "h-9c2e11aa04", Reason: "waiting for a human decision", TaskID: "t-3"}},
				Decisions: []protocol.NativeDecision{{ID: "d-1", TaskID: "t-1", Verdict: "approve", Rationale: "API map reviewed",
					EvidenceHash: "e1", Consumed: true}},
				PendingReceipts: []protocol.NativeReceipt{{OperationID: "op-41", Action: "pause", RootID: "root-7a1", Revision: 13, Status: "persisted"}},
				Effects:         []protocol.NativeEffect{{ID: "x1", TaskID: "t-2", Kind: "worker-run", State: "started"}}}}},
	}
}

// loaded is the model with the whole fixture applied to fleet f1.
func loaded(color bool) (*Model, *clock) {
	m, c := newModel(color)
	m.SetFleets([]FleetRef{{ID: "f1", Name: "api", Cwd: "/src/api"}, {ID: "f2", Name: "web", Cwd: "/src/web"}})
	m.Select("f1")
	attach(m, "f1")
	for _, f := range liveFrames() {
		m.Apply("f1", f, false)
	}
	m.Alerts()
	return m, c
}

func connected(color bool) (*Model, *clock) {
	m, c := newModel(color)
	m.SetFleets([]FleetRef{{ID: "f1", Name: "api"}})
	m.Connected("f1", welcome())
	m.Apply("f1", &protocol.ReplayEnd{}, true)
	return m, c
}

// attach simulates an attach: Connected, then the replay burst.
func attach(m *Model, id string) {
	m.Connected(id, welcome())
	for _, f := range replayFrames() {
		m.Apply(id, f, true)
	}
}

func lines(s string) []string { return strings.Split(s, "\n") }

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

// checkScreen asserts the View contract: exactly h lines of at most w cells.
func checkScreen(t *testing.T, s string, w, h int) {
	t.Helper()
	ls := lines(s)
	if len(ls) != h {
		t.Fatalf("%d lines, want %d:\n%s", len(ls), h, s)
	}
	for i, l := range ls {
		if n := ansi.StringWidth(l); n > w {
			t.Errorf("line %d is %d cells wide (max %d): %q", i, n, w, l)
		}
	}
}

func golden(t *testing.T, name string, m *Model, w, h int) string {
	t.Helper()
	m.Resize(w, h)
	got := m.View()
	checkScreen(t, got, w, h)
	if strings.Contains(got, "\x1b") {
		t.Fatalf("NoColor view has an escape sequence: %q", got)
	}
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return got
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./console/tui -update)", err)
	}
	if got+"\n" != string(want) {
		t.Errorf("%s differs from %s:\n--- got\n%s\n--- want\n%s", name, path, got, want)
	}
	return got
}

func press(m *Model, keys ...string) []Action {
	var acts []Action
	for _, k := range keys {
		acts = append(acts, m.Key(key(k))...)
	}
	return acts
}

// key turns "enter" into Key{Name: "enter"} and "x" into Key{Text: "x"}.
func key(k string) Key {
	if len([]rune(k)) == 1 {
		return Key{Text: k}
	}
	return Key{Name: k}
}

func typeText(m *Model, s string) { m.Key(Key{Text: s}) }

// sentPrompt returns the Prompt of the one Send in acts.
func sentPrompt(t *testing.T, acts []Action) *protocol.Prompt {
	t.Helper()
	if len(acts) != 1 {
		t.Fatalf("actions %#v, want one Send", acts)
	}
	s, ok := acts[0].(Send)
	if !ok {
		t.Fatalf("action %#v, want a Send", acts[0])
	}
	p, ok := s.Msg.(*protocol.Prompt)
	if !ok || s.Fleet != "f1" {
		t.Fatalf("sent %#v to %q, want a Prompt to f1", s.Msg, s.Fleet)
	}
	if !strings.HasPrefix(p.RequestID, "req-") || len(p.RequestID) < 10 {
		t.Errorf("prompt without a fresh request id: %+v", p)
	}
	return p
}

// sentOnly returns the message of the one Send to f1 in acts.
func sentOnly(t *testing.T, acts []Action) protocol.Message {
	t.Helper()
	if len(acts) != 1 {
		t.Fatalf("actions %#v, want one Send", acts)
	}
	s, ok := acts[0].(Send)
	if !ok || s.Fleet != "f1" {
		t.Fatalf("action %#v, want a Send to f1", acts[0])
	}
	return s.Msg
}
