package intel

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/agents-fleet/fleet/intel/record"
	"github.com/agents-fleet/fleet/protocol"
)

// seedSummary writes three sessions and seven runs whose aggregates the
// tests below compute by hand:
//
//	s1 (2 h, ended)   r1 claude completed   in 1000 out 200 (cache 5000, not counted)  skill go-test v1
//	                  r2 codex  failed       in  300 out  50  "FAIL ./a 0.1s" (first recorded as completed)
//	                  r3 codex  failed       in  400 out  60  "FAIL ./b 0.3s"         skill lint v1
//	s2 (1 h, ended)   r4 claude cancelled    in  100 out  10
//	                  r5 claude failed       in  500 out   0  "API Error: 529 overloaded" (agent-error)
//	s3 (running)      r6 local  completed                                             skill go-test v2
//	                  r7 local  failed (stall, no message)
func seedSummary(t *testing.T, s *Store) {
	t.Helper()
	write(t, s,
		record.Session{ID: "s1", Name: "first", Provider: "claude", StartedAt: ms(10 * hour), EndedAt: ms(8 * hour)},
		record.Session{ID: "s2", StartedAt: ms(6 * hour), EndedAt: ms(5 * hour)},
		record.Session{ID: "s3", StartedAt: ms(2 * hour)},
	)
	r1 := okRun("s1", "claude", "review the diff", 9*hour)
	r1.ID, r1.InputTokens, r1.OutputTokens, r1.CacheReadTokens = "s1/w1/t1", 1000, 200, 5000
	r1.Skill, r1.SkillVersion, r1.Tools = "go-test", 1, map[string]int64{"shell": 2, "read": 1}
	r2early := okRun("s1", "codex", "$ go test ./a", 9*hour)
	r2early.ID, r2early.InputTokens = "s1/w2/t2", 99999
	r2 := failedRun("s1", "codex", "$ go test ./a", "FAIL ./a 0.1s", 9*hour)
	r2.ID, r2.InputTokens, r2.OutputTokens = "s1/w2/t2", 300, 50
	r3 := failedRun("s1", "codex", "$ go test ./b", "FAIL ./b 0.3s\nmore output", 8*hour+30*60e9)
	r3.ID, r3.InputTokens, r3.OutputTokens, r3.Skill, r3.SkillVersion = "s1/w3/t3", 400, 60, "lint", 1
	r4 := okRun("s2", "claude", "fix it", 5*hour+30*60e9)
	r4.ID, r4.Outcome, r4.Cause, r4.InputTokens, r4.OutputTokens = "s2/w1/t1", record.OutcomeCancelled, record.CauseCancelled, 100, 10
	r5 := okRun("s2", "claude", "fix it", 5*hour+10*60e9)
	r5.ID, r5.Outcome, r5.Cause, r5.Error, r5.InputTokens = "s2/w2/t2", record.OutcomeFailed, record.CauseAgentError, "API Error: 529 overloaded", 500
	r6 := okRun("s3", "local", "$ make", hour)
	r6.ID, r6.Skill, r6.SkillVersion = "s3/w1/t1", "go-test", 2
	r7 := okRun("s3", "local", "$ make", 30*60e9)
	r7.ID, r7.Outcome, r7.Cause = "s3/w2/t2", record.OutcomeFailed, record.CauseStall
	write(t, s, r1, r2early)
	write(t, s, r2, r3, r4, r5, r6, r7)
	write(t, s,
		record.Steering{SessionID: "s1", Source: "prompt", Text: "use table tests", Target: "w1", CreatedAt: ms(9 * hour)},
		record.Steering{SessionID: "s2", Source: "deny", Text: "git push origin main", Target: "w2", CreatedAt: ms(5 * hour)},
		record.Steering{SessionID: "s3", Source: "tell", Text: "stop after make", Target: "w2", CreatedAt: ms(hour)},
	)
}

func TestIntelSummary(t *testing.T) {
	s := openT(t)
	seedSummary(t, s)
	m, err := s.Intel(t.Context(), t0)
	if err != nil {
		t.Fatal(err)
	}
	want := protocol.FleetIntelSummary{
		SessionCount:   3,
		TotalAgentRuns: 7,
		// Not completed: r2, r3, r4 (cancelled), r5, r7.
		FailedRuns: 5,
		// (7 − 5) / 7
		SuccessRate: 2.0 / 7,
		// (1000+200) + (300+50) + (400+60) + (100+10) + (500+0) = 2620; r2's
		// first record (99999) was replaced.
		TotalTokens: 2620,
		// s1 2 h = 7,200,000 ms, s2 1 h = 3,600,000 ms; s3 has not ended:
		// (7,200,000 + 3,600,000) / 2.
		AvgSessionDurationMs: 5_400_000,
		// Judged failures by key (r4 is cancelled, not an error): r2 and r3
		// share "FAIL <path> <n>s"; then by key, "API…" before "stall…".
		TopErrors: []protocol.FleetIntelError{
			{Message: "FAIL <path> <n>s", Count: 2},
			{Message: "API Error: <n> overloaded", Count: 1},
			{Message: "stall (no message)", Count: 1},
		},
	}
	if !reflect.DeepEqual(m.Summary, want) {
		t.Fatalf("summary\n got %+v\nwant %+v", m.Summary, want)
	}
	// go-test: r1 (at 9 h ago) and r6 (1 h ago); lint: r3.
	wantSkills := []protocol.FleetIntelSkill{
		{Name: "go-test", Uses: 2, LastUsedAt: ms(hour)},
		{Name: "lint", Uses: 1, LastUsedAt: ms(8*hour + 30*60e9)},
	}
	if !reflect.DeepEqual(m.Skills, wantSkills) {
		t.Fatalf("skills %+v", m.Skills)
	}
	if m.Ts != t0.UnixMilli() {
		t.Fatalf("ts %d", m.Ts)
	}
	// The message encodes, with [] for the empty suggestions.
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", b)
}

func TestIntelEmpty(t *testing.T) {
	s := openT(t)
	m, err := s.Intel(t.Context(), t0)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(m)
	want := `{"ts":1748779200000,"summary":{"sessionCount":0,"totalAgentRuns":0,"failedRuns":0,"successRate":0,"totalTokens":0,"avgSessionDurationMs":0,"topErrors":[]},"suggestions":[],"skills":[]}`
	if string(b) != want {
		t.Fatalf("empty fleetIntel\n got %s\nwant %s", b, want)
	}
}

// TestEmptySnapshots: what a fleet home without a store shows is, field
// for field and byte for byte, what an empty store's snapshots are.
func TestEmptySnapshots(t *testing.T) {
	s := openT(t)
	got, err := s.Snapshots(t.Context(), t0)
	if err != nil {
		t.Fatal(err)
	}
	gotMs, wantMs := got.Messages(), EmptySnapshots(t0).Messages()
	if len(gotMs) != 4 || len(wantMs) != 4 {
		t.Fatalf("%d snapshots from the store, %d empty ones; want 4 of each", len(gotMs), len(wantMs))
	}
	for i := range gotMs {
		g, err := json.Marshal(gotMs[i])
		if err != nil {
			t.Fatal(err)
		}
		w, err := json.Marshal(wantMs[i])
		if err != nil {
			t.Fatal(err)
		}
		if string(g) != string(w) {
			t.Errorf("%s\nempty store %s\n   no store %s", gotMs[i].MessageType(), g, w)
		}
	}
}

func TestExplorer(t *testing.T) {
	s := openT(t)
	seedSummary(t, s)
	m, err := s.Explorer(t.Context(), t0)
	if err != nil {
		t.Fatal(err)
	}
	i64 := func(v int64) *int64 { return &v }
	wantSessions := []protocol.FleetStoreSession{
		// s1: 1200 + 350 + 460 = 2010 tokens; r2, r3 failed; 2 h.
		{ID: "s1", Name: "first", StartedAt: ms(10 * hour), TotalTokens: 2010, AgentRuns: 3, FailedRuns: i64(2), DurationMs: i64(7_200_000)},
		// s2: 110 + 500 = 610; r4 (cancelled) and r5 count as failed; 1 h.
		{ID: "s2", StartedAt: ms(6 * hour), TotalTokens: 610, AgentRuns: 2, FailedRuns: i64(2), DurationMs: i64(3_600_000)},
		// s3: no tokens, r7 failed, still running.
		{ID: "s3", StartedAt: ms(2 * hour), TotalTokens: 0, AgentRuns: 2, FailedRuns: i64(1)},
	}
	if !reflect.DeepEqual(m.Sessions, wantSessions) {
		g, _ := json.Marshal(m.Sessions)
		t.Fatalf("sessions %s", g)
	}
	wantSteering := []protocol.FleetStoreSteering{
		{ID: "st-3", Text: "stop after make", CreatedAt: ms(hour), Source: "tell", SessionID: "s3"},
		{ID: "st-2", Text: "git push origin main", CreatedAt: ms(5 * hour), Source: "deny", SessionID: "s2"},
		{ID: "st-1", Text: "use table tests", CreatedAt: ms(9 * hour), Source: "prompt", SessionID: "s1"},
	}
	if !reflect.DeepEqual(m.Steering, wantSteering) {
		t.Fatalf("steering %+v", m.Steering)
	}
	got := map[string]int64{}
	for _, c := range m.Counts {
		got[c.Name] = c.Count
	}
	// 7 runs, r1's two tools, 3 steering entries; suggestion_states is
	// empty because Explorer computes no suggestions.
	want := map[string]int64{"sessions": 3, "runs": 7, "run_tools": 2, "steering": 3, "skills": 0, "shadows": 0,
		"evolutions": 0, "experiments": 0, "experiment_runs": 0, "experiment_variants": 0, "suggestion_states": 0}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("counts %v", got)
	}
}

// TestExplorerBounds: ten sessions by token spend, twenty steering entries.
func TestExplorerBounds(t *testing.T) {
	s := openT(t)
	var recs []any
	for i := range 15 {
		r := okRun("s"+itoa(i), "claude", "x", hour)
		r.ID, r.InputTokens = "r"+itoa(i), int64(100*i)
		recs = append(recs, r)
	}
	for i := range 25 {
		recs = append(recs, record.Steering{SessionID: "s000", Source: "prompt", Text: itoa(i), CreatedAt: int64(i)})
	}
	write(t, s, recs...)
	m, err := s.Explorer(t.Context(), t0)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Sessions) != 10 || m.Sessions[0].ID != "s014" || m.Sessions[9].ID != "s005" {
		t.Fatalf("sessions %+v", m.Sessions)
	}
	if len(m.Steering) != 20 || m.Steering[0].Text != "024" || m.Steering[19].Text != "005" {
		t.Fatalf("steering %+v", m.Steering)
	}
}

func TestExperiments(t *testing.T) {
	s := openT(t)
	ctx := t.Context()
	exp := Experiment{ID: "e1", Name: "terse prompts", Hypothesis: "terse prompts pass more", Variants: []string{"control", "terse"}, CreatedAt: 10}
	lift := (0.75 - 0.5) / 0.5 // (terse mean − control mean) / control mean
	p := 0.041
	first := ExperimentRun{ID: "e1-a", StartedAt: 100, CompletedAt: 200, Test: "Fisher exact, two-sided, alpha 0.05",
		Variants: []VariantResult{{Variant: "control", Samples: 20, Passed: 10, Mean: 0.5, PassRate: 0.5, MeanDurationMs: 1500, MeanTokens: 900},
			{Variant: "terse", Samples: 20, Passed: 15, Mean: 0.75, PassRate: 0.75, Lift: &lift}},
		Winner: "terse", PValue: &p}
	second := ExperimentRun{StartedAt: 300, Test: "Fisher exact, two-sided, alpha 0.05"}
	if err := s.SaveExperiment(ctx, exp, first); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveExperiment(ctx, Experiment{ID: "e0", Name: "draft", Variants: []string{"a", "b"}, CreatedAt: 5}, ExperimentRun{ID: "e0-x", StartedAt: 1, CompletedAt: 2}); err != nil {
		t.Fatal(err)
	}
	m, err := s.Experiments(ctx, t0)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(m)
	want := `{"ts":1748779200000,"experiments":[` +
		`{"id":"e1","name":"terse prompts","status":"completed","variants":["control","terse"],"createdAt":10,"hypothesis":"terse prompts pass more",` +
		`"latestRun":{"id":"e1-a","startedAt":100,"variants":[{"variant":"control","samples":20,"mean":0.5,"passRate":0.5},` +
		`{"variant":"terse","samples":20,"mean":0.75,"passRate":0.75,"lift":0.5}],"completedAt":200,"winner":"terse"}},` +
		`{"id":"e0","name":"draft","status":"completed","variants":["a","b"],"createdAt":5,"latestRun":{"id":"e0-x","startedAt":1,"variants":[],"completedAt":2}}]}`
	if string(b) != want {
		t.Fatalf("fleetExperiment\n got %s\nwant %s", b, want)
	}
	// A second run, still going, is the latest; its id is assigned.
	if err := s.SaveExperiment(ctx, exp, second); err != nil {
		t.Fatal(err)
	}
	runs, err := s.ExperimentRuns(ctx, "e1")
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 || runs[0].ID != "e1-run-2" || runs[1].ID != "e1-a" || !reflect.DeepEqual(runs[1].Variants, first.Variants) ||
		*runs[1].PValue != p || runs[0].PValue != nil || runs[1].ExperimentID != "e1" {
		t.Fatalf("runs %+v", runs)
	}
	m, _ = s.Experiments(ctx, t0)
	if e := m.Experiments[0]; e.Status != "running" || e.LatestRun.ID != "e1-run-2" {
		t.Fatalf("after the second run: %+v", e)
	}
	// Saving the run again replaces it.
	second.ID, second.CompletedAt = "e1-run-2", 400
	if err := s.SaveExperiment(ctx, exp, second); err != nil {
		t.Fatal(err)
	}
	if runs, _ = s.ExperimentRuns(ctx, "e1"); len(runs) != 2 || runs[0].CompletedAt != 400 {
		t.Fatalf("replaced run: %+v", runs)
	}
	if _, err := s.ExperimentRuns(ctx, "nope"); err == nil {
		t.Fatal("runs of an unknown experiment")
	}
	bad := first
	bad.Variants = bad.Variants[:1]
	if err := s.SaveExperiment(ctx, exp, bad); err == nil {
		t.Fatal("saved a run with the wrong variants")
	}
	if err := s.SaveExperiment(ctx, Experiment{ID: "e2", Name: "no arms"}, ExperimentRun{}); err == nil {
		t.Fatal("saved an experiment without variants")
	}
}
