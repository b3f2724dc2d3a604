package intel

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/intel/record"
)

// BenchmarkRecorderRun is the cost of one Run enqueue, the only part of the
// Recorder the fleet's hot path pays. "live" runs the writer meanwhile:
// the loop outpaces any database, so most records find the queue full and
// are dropped (dropped/op says how many), which costs the same. "accepted"
// times the path of a record that is queued: no writer runs, and the queue
// is emptied, with the timer stopped, every QueueLimit records.
func BenchmarkRecorderRun(b *testing.B) {
	r := failedRun("s1", "codex", "$ go test ./...", "FAIL ./pkg 0.2s", hour)
	r.ID = "s1/w1/t1"
	r.Tools = map[string]int64{"shell": 3}
	benchEnqueue(b, func(rec *Recorder) { rec.Run(r) })
}

// BenchmarkRecorderSteering is the same for a Steering enqueue.
func BenchmarkRecorderSteering(b *testing.B) {
	st := record.Steering{SessionID: "s1", Source: "deny", Text: "git push origin main", Target: "w1", CreatedAt: ms(hour)}
	benchEnqueue(b, func(rec *Recorder) { rec.Steering(st) })
}

func benchEnqueue(b *testing.B, enqueue func(*Recorder)) {
	b.Run("live", func(b *testing.B) {
		s := openT(b)
		rec := s.NewRecorder(nil)
		defer rec.Close(context.Background())
		b.ReportAllocs()
		for b.Loop() {
			enqueue(rec)
		}
		b.ReportMetric(float64(rec.Dropped())/float64(b.N), "dropped/op")
	})
	b.Run("accepted", func(b *testing.B) {
		rec := newRecorder(openT(b), nil)
		b.ReportAllocs()
		n := 0
		for b.Loop() {
			if n == QueueLimit {
				b.StopTimer()
				rec.mu.Lock()
				clear(rec.pending)
				rec.pending = rec.pending[:0]
				rec.mu.Unlock()
				n = 0
				b.StartTimer()
			}
			enqueue(rec)
			n++
		}
		if rec.Dropped() != 0 {
			b.Fatalf("%d dropped", rec.Dropped())
		}
	})
}

// benchShape is the data set BenchmarkSnapshots reads.
type benchShape struct {
	runs, sessions, providers, kinds, skills int
	// span is how far back the runs go; all of them are in the rules'
	// 7-day window when span ≤ 7 days.
	span time.Duration
}

// seedBench writes shape's runs to s: a quarter fail (a mix of classes and
// 50 error messages), a third use a skill (one of the skills' versions or,
// for a few, a shadow), every run used three tools; plus 5,000 steering
// entries (a tenth are denials), 12 evaluating shadows, 30 evolutions and
// 10 experiments of 5 runs each.
func seedBench(b *testing.B, s *Store, sh benchShape) {
	b.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	providers := []string{"claude", "codex", "copilot", "local"}[:sh.providers]
	verbs := []string{"go", "npm", "make", "cargo", "pytest", "fix", "add", "refactor", "update", "write",
		"review", "test", "lint", "build", "deploy", "docs", "bench", "migrate", "debug", "port"}[:sh.kinds]
	classes := []struct{ cause, text string }{
		{record.CauseExit, "FAIL ./pkg/%d %d.%ds"}, {record.CauseAgentError, "API Error: 529 overloaded (request req_%x)"},
		{record.CauseStall, ""}, {record.CauseBudget, "worker budget of %d tokens reached"}, {record.CauseCancelled, ""},
		{record.CauseExit, "error: cannot find module %d"}, {record.CauseAgentError, "the model refused: %d"},
	}
	start := t0.Add(-sh.span)
	var items []item
	flush := func() {
		if err := s.writeItems(ctx, items); err != nil {
			b.Fatal(err)
		}
		items = items[:0]
	}
	for i := range sh.sessions {
		at := start.Add(time.Duration(i) * sh.span / time.Duration(sh.sessions))
		items = append(items, item{kind: itemSession, sess: record.Session{ID: fmt.Sprintf("s%03d", i), Name: fmt.Sprint("fleet ", i),
			Repo: fmt.Sprintf("/src/repo%d", i%5), Provider: providers[i%len(providers)], Mode: "legacy",
			StartedAt: at.UnixMilli(), EndedAt: at.Add(sh.span / time.Duration(sh.sessions)).UnixMilli()}})
	}
	for i := range sh.runs {
		si := i * sh.sessions / sh.runs
		at := start.Add(time.Duration(i) * sh.span / time.Duration(sh.runs)).UnixMilli()
		r := record.Run{SessionID: fmt.Sprintf("s%03d", si), ID: fmt.Sprintf("s%03d/w%d/t%d", si, i%8, i),
			Worker: fmt.Sprint("w", i%8), TaskID: fmt.Sprint("t", i), Provider: providers[rng.IntN(len(providers))],
			Task: verbs[rng.IntN(len(verbs))] + " the thing", Repo: fmt.Sprintf("/src/repo%d", si%5),
			StartedAt: at - 60_000, EndedAt: at, Outcome: record.OutcomeCompleted, InputTokens: rng.Int64N(50_000),
			OutputTokens: rng.Int64N(5_000), Tools: map[string]int64{"shell": 2, "read": 5, "edit": 1}}
		if rng.IntN(3) == 0 {
			k := rng.IntN(sh.skills)
			r.Skill, r.SkillVersion = fmt.Sprint("skill-", k), 1+rng.IntN(3)
			if rng.IntN(20) == 0 {
				r.Shadow = fmt.Sprint("sh-", 1+k)
			}
		}
		if rng.IntN(4) == 0 {
			c := classes[rng.IntN(len(classes))]
			r.Outcome, r.Cause, r.ExitCode = record.OutcomeFailed, c.cause, 1
			if c.cause == record.CauseCancelled {
				r.Outcome = record.OutcomeCancelled
			}
			if c.text != "" {
				r.Error = fmt.Sprintf(c.text, rng.IntN(50), rng.IntN(100), rng.IntN(10))
			}
		}
		items = append(items, item{kind: itemRun, run: r})
		if len(items) == QueueLimit {
			flush()
		}
	}
	for i := range 5000 {
		st := record.Steering{SessionID: fmt.Sprintf("s%03d", i%sh.sessions), Source: "prompt", Text: fmt.Sprint("do it like this ", i),
			Target: fmt.Sprint("w", i%8), CreatedAt: start.Add(time.Duration(i) * sh.span / 5000).UnixMilli()}
		if i%10 == 0 {
			st.Source, st.Text = "deny", fmt.Sprintf("Bash: git push origin fleet/s%03d/w%d", i%sh.sessions, i%8)
		}
		items = append(items, item{kind: itemSteering, steer: st})
	}
	flush()
	for k := range sh.skills {
		for v := 1; v <= 3; v++ {
			if _, err := s.RegisterSkill(ctx, fmt.Sprint("skill-", k), fmt.Sprint("content ", k, v)); err != nil {
				b.Fatal(err)
			}
		}
	}
	for k := range 12 {
		if _, err := s.AddShadow(ctx, Shadow{Skill: fmt.Sprint("skill-", k%sh.skills), BaseVersion: 3,
			Content: fmt.Sprint("patched ", k), Summary: "tighter steps", Author: "coordinator"}); err != nil {
			b.Fatal(err)
		}
	}
	for k := range 30 {
		sh, err := s.AddShadow(ctx, Shadow{Skill: fmt.Sprint("skill-", k%sh.skills), BaseVersion: 3,
			Content: fmt.Sprint("applied ", k), Summary: "evolved", Author: "operator"})
		if err == nil {
			_, err = s.ApplyShadow(ctx, sh.ID)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	for e := range 10 {
		exp := Experiment{ID: fmt.Sprint("exp-", e), Name: "prompt style", Variants: []string{"control", "terse"}}
		for r := range 5 {
			lift := 0.1
			run := ExperimentRun{StartedAt: int64(r), CompletedAt: int64(r + 1), Winner: "terse", Test: "Fisher exact",
				Variants: []VariantResult{{Variant: "control", Samples: 20, Passed: 10, Mean: 0.5, PassRate: 0.5},
					{Variant: "terse", Samples: 20, Passed: 11, Mean: 0.55, PassRate: 0.55, Lift: &lift}}}
			if err := s.SaveExperiment(ctx, exp, run); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkSnapshots builds each snapshot over 100,000 stored runs across
// 200 sessions, 4 providers, 20 task kinds and 10 skills. "spread" spreads
// them over 90 days; "recent" puts all of them in the last 7 days, the
// worst case for the windowed rules.
func BenchmarkSnapshots(b *testing.B) {
	for _, ds := range []struct {
		name string
		span time.Duration
	}{{"spread", 90 * day}, {"recent", 7*day - hour}} {
		b.Run(ds.name, func(b *testing.B) {
			s := openT(b)
			seedBench(b, s, benchShape{runs: 100_000, sessions: 200, providers: 4, kinds: 20, skills: 10, span: ds.span})
			ctx := context.Background()
			for _, snap := range []struct {
				name string
				fn   func() error
			}{
				{"Intel", func() error { _, err := s.Intel(ctx, t0); return err }},
				{"Evolution", func() error { _, err := s.Evolution(ctx, t0); return err }},
				{"Explorer", func() error { _, err := s.Explorer(ctx, t0); return err }},
				{"Experiments", func() error { _, err := s.Experiments(ctx, t0); return err }},
				{"Suggestions", func() error { _, err := s.Suggestions(ctx, t0); return err }},
			} {
				b.Run(snap.name, func(b *testing.B) {
					for b.Loop() {
						if err := snap.fn(); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		})
	}
}

// BenchmarkWriteBatch is the writer's side: one transaction of QueueLimit
// runs (each with three tools), as the Recorder writes a full queue.
func BenchmarkWriteBatch(b *testing.B) {
	s := openT(b)
	items := make([]item, QueueLimit)
	n := 0
	for b.Loop() {
		for i := range items {
			r := failedRun(fmt.Sprint("s", n%200), "codex", "$ go test ./...", "FAIL ./pkg 0.2s", hour)
			r.ID, r.Tools = fmt.Sprint("r", n), map[string]int64{"shell": 2, "read": 5, "edit": 1}
			items[i] = item{kind: itemRun, run: r}
			n++
		}
		if err := s.writeItems(context.Background(), items); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "records/s")
}
