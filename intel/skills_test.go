package intel

import (
	"errors"
	"reflect"
	"testing"

	"github.com/agents-fleet/fleet/intel/record"
	"github.com/agents-fleet/fleet/protocol"
)

func TestRegisterSkill(t *testing.T) {
	s := openT(t)
	ctx := t.Context()
	for i, tc := range []struct {
		name, content string
		want          int
	}{
		{"review", "v1 text", 1},
		{"review", "v2 text", 2},
		{"review", "v1 text", 1}, // the same content again: its version
		{"other", "v1 text", 1},  // versions are per skill
		{"review", "v3 text", 3},
	} {
		v, err := s.RegisterSkill(ctx, tc.name, tc.content)
		if err != nil {
			t.Fatal(err)
		}
		if v.Version != tc.want || v.Skill != tc.name || len(v.Hash) != 64 || v.CreatedAt != t0.UnixMilli() {
			t.Errorf("%d: RegisterSkill(%s, %s) = %+v, want version %d", i, tc.name, tc.content, v, tc.want)
		}
	}
	if _, err := s.RegisterSkill(ctx, "", "x"); err == nil {
		t.Error("registered a skill without a name")
	}
}

// TestShadowLifecycle seeds runs of skill review at version 2 and of its
// shadow, and checks the A/B score and the evolution against these
// numbers:
//
//	base v2:  4 completed, 2 failed, 1 cancelled → judged 6, passed 4 → 4/6
//	shadow:   3 completed, 1 failed, 1 shutdown  → 5 trials, judged 4, passed 3 → 3/4
func TestShadowLifecycle(t *testing.T) {
	s := openT(t)
	ctx := t.Context()
	for _, c := range []string{"v1", "v2"} {
		if _, err := s.RegisterSkill(ctx, "review", c); err != nil {
			t.Fatal(err)
		}
	}
	sh, err := s.AddShadow(ctx, Shadow{Skill: "review", BaseVersion: 2, Content: "v3", Summary: "check the tests first", Author: "coordinator"})
	if err != nil {
		t.Fatal(err)
	}
	want := Shadow{ID: "sh-1", Skill: "review", BaseVersion: 2, Content: "v3", Summary: "check the tests first",
		Author: "coordinator", Status: ShadowEvaluating, CreatedAt: t0.UnixMilli()}
	if sh != want {
		t.Fatalf("AddShadow = %+v", sh)
	}
	other, err := s.AddShadow(ctx, Shadow{Skill: "lint", Content: "l", Summary: "s", Author: "operator"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddShadow(ctx, Shadow{Skill: "lint", Content: "l", Author: "someone"}); err == nil {
		t.Fatal("AddShadow accepted an unknown author")
	}

	use := func(r record.Run, shadow string) record.Run {
		r.Skill, r.SkillVersion, r.Shadow = "review", 2, shadow
		return r
	}
	cancelled := use(okRun("s1", "claude", "x", 3*hour), "")
	cancelled.Outcome, cancelled.Cause = record.OutcomeCancelled, record.CauseCancelled
	shutdown := use(okRun("s1", "claude", "x", 3*hour), "sh-1")
	shutdown.Outcome, shutdown.Cause = record.OutcomeCancelled, record.CauseShutdown
	write(t, s, cat(
		runs(4, "b-ok", use(okRun("s1", "claude", "x", 5*hour), "")),
		runs(2, "b-fail", use(failedRun("s1", "claude", "x", "boom", 4*hour), "")),
		[]any{func() record.Run { cancelled.ID = "b-cancel"; return cancelled }()},
		runs(3, "c-ok", use(okRun("s1", "claude", "x", 2*hour), "sh-1")),
		runs(1, "c-fail", use(failedRun("s1", "claude", "x", "bang", hour), "sh-1")),
		[]any{func() record.Run { shutdown.ID = "c-shutdown"; return shutdown }()},
	)...)

	ev, err := s.Evolution(ctx, t0)
	if err != nil {
		t.Fatal(err)
	}
	f := func(v float64) *float64 { return &v }
	i := func(v int64) *int64 { return &v }
	wantShadows := []protocol.FleetEvolutionShadow{
		{ID: "sh-1", Skill: "review", Summary: "check the tests first", CreatedAt: t0.UnixMilli(), Status: "evaluating",
			Trials: i(5), BaselineSuccessRate: f(4.0 / 6), CandidateSuccessRate: f(3.0 / 4)},
		// lint has no runs: nothing to compare yet.
		{ID: "sh-2", Skill: "lint", Summary: "s", CreatedAt: t0.UnixMilli(), Status: "evaluating", Trials: i(0)},
	}
	if !reflect.DeepEqual(ev.Shadows, wantShadows) {
		t.Fatalf("shadows\n got %+v\nwant %+v", ev.Shadows, wantShadows)
	}

	rec, err := s.ApplyShadow(ctx, "sh-1")
	if err != nil {
		t.Fatal(err)
	}
	wantRec := protocol.FleetEvolutionRecord{ID: "ev-1", Skill: "review", Summary: "check the tests first",
		AppliedAt: t0.UnixMilli(), Version: i(3), SuccessRateBefore: f(4.0 / 6), SuccessRateAfter: f(3.0 / 4)}
	if !reflect.DeepEqual(rec, wantRec) {
		t.Fatalf("ApplyShadow = %+v", rec)
	}
	if _, err := s.ApplyShadow(ctx, "sh-1"); !errors.Is(err, ErrShadowDecided) {
		t.Fatalf("applying twice: %v", err)
	}
	if err := s.RejectShadow(ctx, other.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.RejectShadow(ctx, other.ID); !errors.Is(err, ErrShadowDecided) {
		t.Fatalf("rejecting twice: %v", err)
	}
	if _, err := s.ApplyShadow(ctx, "sh-99"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown shadow: %v", err)
	}
	if _, err := s.Shadow(ctx, "bogus"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("bogus id: %v", err)
	}
	got, err := s.Shadow(ctx, "sh-1")
	if err != nil || got.Status != ShadowApplied {
		t.Fatalf("Shadow(sh-1) = %+v, %v", got, err)
	}
	all, err := s.Shadows(ctx, "")
	if err != nil || len(all) != 2 || all[1].Status != ShadowRejected {
		t.Fatalf("Shadows = %+v, %v", all, err)
	}
	if lint, _ := s.Shadows(ctx, "lint"); len(lint) != 1 || lint[0].ID != "sh-2" {
		t.Fatalf("Shadows(lint) = %+v", lint)
	}

	ev, err = s.Evolution(ctx, t0)
	if err != nil {
		t.Fatal(err)
	}
	if len(ev.Shadows) != 0 || !reflect.DeepEqual(ev.Timeline, []protocol.FleetEvolutionRecord{wantRec}) {
		t.Fatalf("after apply: shadows %+v timeline %+v", ev.Shadows, ev.Timeline)
	}
	wantSkills := []protocol.FleetEvolutionSkill{
		// 7 base runs + 5 shadow runs; (4 + 3) passed of (6 + 4) judged.
		{Name: "review", Uses: 12, SuccessRate: 0.7, EvolutionCount: 1, LastEvolvedAt: t0.UnixMilli()},
	}
	if !reflect.DeepEqual(ev.Skills, wantSkills) {
		t.Fatalf("skills %+v", ev.Skills)
	}
	if v, _ := s.RegisterSkill(ctx, "review", "v3"); v.Version != 3 {
		t.Fatalf("the applied content is version %d", v.Version)
	}

	// SkillFailures: the judged failures, newest first (the shadow's
	// failure 1 h ago, then the base's two 4 h ago), not the cancelled run.
	fails, err := s.SkillFailures(ctx, "review", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(fails) != 3 || fails[0].ID != "c-fail-000" || fails[0].Error != "bang" || fails[0].Class != "exit-code:1" ||
		fails[0].SessionID != "s1" || fails[0].Shadow != "sh-1" || fails[1].Error != "boom" {
		t.Fatalf("SkillFailures = %+v", fails)
	}
	if fails, _ := s.SkillFailures(ctx, "review", 1); len(fails) != 1 {
		t.Fatalf("SkillFailures(n=1) = %d runs", len(fails))
	}
}
