package intel

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/intel/record"
)

// fired returns the suggestions of rule, at t0.
func fired(t *testing.T, s *Store, rule string) []Suggestion {
	t.Helper()
	sugs, err := s.Suggestions(t.Context(), t0)
	if err != nil {
		t.Fatal(err)
	}
	var out []Suggestion
	for _, sg := range sugs {
		if sg.Rule == rule {
			out = append(out, sg)
		}
	}
	return out
}

func approx(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// arm returns n runs of provider on task in repo, the first failed of them
// failed.
func arm(prefix, provider, repo, task string, n, failed int) []any {
	var out []any
	for i := range n {
		r := okRun("s1", provider, task, hour)
		if i < failed {
			r = failedRun("s1", provider, task, "exit status 1 "+prefix+itoa(i), hour)
		}
		r.ID, r.Repo = prefix+itoa(i), repo
		out = append(out, r)
	}
	return out
}

func TestRuleProviderFailureRate(t *testing.T) {
	for _, tc := range []struct {
		name      string
		recs      []any
		title     string
		confident float64 // 1 − p, 0 when silent
	}{
		{
			// p = 2/C(10,5) = 2/252.
			name:      "5 of 5 vs 0 of 5",
			recs:      cat(arm("c", "codex", "/repo", "$ go test", 5, 5), arm("l", "claude", "/repo", "$ go vet", 5, 0)),
			title:     "codex workers fail on `go` tasks in /repo where claude does not (5 of 5 vs 0 of 5 runs)",
			confident: 1 - 2.0/252,
		},
		{
			// 0.8 / 0.2 = 4.0×; p = 2·(1+100+2025)/184756 (stats_test).
			name:      "8 of 10 vs 2 of 10",
			recs:      cat(arm("c", "codex", "/repo", "$ go test", 10, 8), arm("l", "claude", "/repo", "$ go test", 10, 2)),
			title:     "codex workers fail 4.0× as often as claude on `go` tasks in /repo (8 of 10 vs 2 of 10 runs)",
			confident: 1 - 4252.0/184756,
		},
		{
			// p = 2/C(8,4) = 0.029 would do, but 4 runs each is below 5.
			name: "too few runs",
			recs: cat(arm("c", "codex", "/repo", "$ go test", 4, 4), arm("l", "claude", "/repo", "$ go test", 4, 0)),
		},
		{
			// p = 20/120 = 0.167 ≥ 0.05.
			name: "not significant",
			recs: cat(arm("c", "codex", "/repo", "$ go test", 5, 3), arm("l", "claude", "/repo", "$ go test", 5, 0)),
		},
		{
			// 0.75 / 0.4 = 1.875 < 2, though p ≈ 0.003.
			name: "ratio below 2",
			recs: cat(arm("c", "codex", "/repo", "$ go test", 40, 30), arm("l", "claude", "/repo", "$ go test", 40, 16)),
		},
		{
			name: "different repositories",
			recs: cat(arm("c", "codex", "/a", "$ go test", 5, 5), arm("l", "claude", "/b", "$ go test", 5, 0)),
		},
		{
			name: "different task kinds",
			recs: cat(arm("c", "codex", "/repo", "$ go test", 5, 5), arm("l", "claude", "/repo", "$ make", 5, 0)),
		},
		{
			// The fifth codex run was cancelled: 4 judged runs.
			name: "cancelled runs are not judged",
			recs: cat(arm("c", "codex", "/repo", "$ go test", 4, 4), arm("l", "claude", "/repo", "$ go test", 5, 0),
				[]any{record.Run{SessionID: "s1", ID: "cx", Provider: "codex", Task: "$ go test", Repo: "/repo",
					Outcome: record.OutcomeCancelled, Cause: record.CauseCancelled, EndedAt: ms(hour)}}),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openT(t)
			write(t, s, tc.recs...)
			got := fired(t, s, RuleProviderFailureRate)
			if tc.title == "" {
				if len(got) != 0 {
					t.Fatalf("fired: %+v", got)
				}
				return
			}
			if len(got) != 1 || got[0].Title != tc.title || !approx(got[0].Confidence, tc.confident) {
				t.Fatalf("got %+v\nwant %q confidence %v", got, tc.title, tc.confident)
			}
			t.Log(got[0].Evidence)
		})
	}
}

// recent makes n failed runs, the i-th ago(i) before t0.
func recent(prefix string, n int, ago func(i int) time.Duration, mk func(ago time.Duration) record.Run) []any {
	var out []any
	for i := range n {
		r := mk(ago(i))
		r.ID = prefix + itoa(i)
		out = append(out, r)
	}
	return out
}

func hoursAgo(i int) time.Duration { return time.Duration(i+1) * hour }

func TestRuleRecurringError(t *testing.T) {
	goFail := func(ago time.Duration) record.Run {
		return failedRun("s1", "codex", "$ go test ./store", "FAIL ./store 0.41s", ago)
	}
	t.Run("fires at 3", func(t *testing.T) {
		s := openT(t)
		write(t, s, recent("r", 3, hoursAgo, goFail)...)
		got := fired(t, s, RuleRecurringError)
		// Confidence 1 − 2^−(3−2).
		if len(got) != 1 || got[0].Title != "`go` tasks failed 3 times in 7 days with: FAIL <path> <n>s" || !approx(got[0].Confidence, 0.5) {
			t.Fatalf("got %+v", got)
		}
		t.Log(got[0].Evidence)
	})
	t.Run("4 of two kinds", func(t *testing.T) {
		s := openT(t)
		write(t, s, recent("r", 3, hoursAgo, goFail)...)
		r := failedRun("s1", "claude", "$ make test", "FAIL ./api 2.5s", hour)
		r.ID = "other"
		write(t, s, r)
		got := fired(t, s, RuleRecurringError)
		if len(got) != 1 || got[0].Title != "Agent runs failed 4 times in 7 days with: FAIL <path> <n>s" || !approx(got[0].Confidence, 0.75) ||
			!strings.Contains(got[0].Evidence, "codex 3, claude 1") {
			t.Fatalf("got %+v", got)
		}
	})
	t.Run("third is older than 7 days", func(t *testing.T) {
		s := openT(t)
		write(t, s, recent("r", 3, func(i int) time.Duration { return []time.Duration{hour, 2 * day, 7*day + time.Minute}[i] }, goFail)...)
		if got := fired(t, s, RuleRecurringError); len(got) != 0 {
			t.Fatalf("fired: %+v", got)
		}
	})
	t.Run("classes with their own rule", func(t *testing.T) {
		s := openT(t)
		write(t, s, recent("r", 3, hoursAgo, func(ago time.Duration) record.Run {
			r := goFail(ago)
			r.Cause = record.CauseBudget
			return r
		})...)
		if got := fired(t, s, RuleRecurringError); len(got) != 0 {
			t.Fatalf("fired: %+v", got)
		}
	})
	t.Run("cancellations are not errors", func(t *testing.T) {
		s := openT(t)
		write(t, s, recent("r", 3, hoursAgo, func(ago time.Duration) record.Run {
			r := goFail(ago)
			r.Outcome, r.Cause = record.OutcomeCancelled, record.CauseCancelled
			return r
		})...)
		if got := fired(t, s, RuleRecurringError); len(got) != 0 {
			t.Fatalf("fired: %+v", got)
		}
	})
}

func TestRuleBudgetStops(t *testing.T) {
	budget := func(ago time.Duration) record.Run {
		r := failedRun("s1", "claude", "refactor the store", "worker budget reached", ago)
		r.Cause = record.CauseBudget
		return r
	}
	s := openT(t)
	write(t, s, recent("r", 2, func(i int) time.Duration { return []time.Duration{hour, 7*day + hour}[i] }, budget)...)
	if got := fired(t, s, RuleBudgetStops); len(got) != 0 {
		t.Fatalf("1 in the window fired: %+v", got)
	}
	write(t, s, recent("x", 1, hoursAgo, budget)...)
	got := fired(t, s, RuleBudgetStops)
	// Confidence 1 − 2^−(2−1).
	if len(got) != 1 || !strings.HasPrefix(got[0].Title, "2 runs were stopped by a token budget in 7 days: raise budgets.workerTokens") ||
		!approx(got[0].Confidence, 0.5) {
		t.Fatalf("got %+v", got)
	}
}

func TestRuleStalls(t *testing.T) {
	stall := func(provider string) func(time.Duration) record.Run {
		return func(ago time.Duration) record.Run {
			r := okRun("s1", provider, "write docs", ago)
			r.Outcome, r.Cause = record.OutcomeFailed, record.CauseStall
			return r
		}
	}
	s := openT(t)
	write(t, s, recent("a", 2, hoursAgo, stall("claude"))...)
	if got := fired(t, s, RuleStalls); len(got) != 0 {
		t.Fatalf("2 stalls fired: %+v", got)
	}
	write(t, s, recent("b", 1, hoursAgo, stall("codex"))...)
	got := fired(t, s, RuleStalls)
	if len(got) != 1 || got[0].Title != "3 runs stalled in 7 days (claude 2, codex 1): raise limits.agentStallTimeoutMs or check the model endpoint" ||
		!approx(got[0].Confidence, 0.5) {
		t.Fatalf("got %+v", got)
	}
}

func TestRulePermissionDenials(t *testing.T) {
	deny := func(text, target string) record.Steering {
		return record.Steering{SessionID: "s1", Source: "deny", Text: text, Target: target, CreatedAt: ms(hour)}
	}
	s := openT(t)
	write(t, s, deny("git push origin main", "w1"), deny("git push origin main", "w2"),
		record.Steering{SessionID: "s1", Source: "approve", Text: "git push origin main", CreatedAt: ms(hour)},
		deny("Bash: rm -rf /tmp/a1", "w1"), deny("Bash: rm -rf /var/tmp/b2", "w3"))
	if got := fired(t, s, RulePermissionDenials); len(got) != 0 {
		t.Fatalf("2 denials fired: %+v", got)
	}
	write(t, s, deny("git push origin main", "w1"), deny("Bash: rm -rf ./build", "w1"))
	got := fired(t, s, RulePermissionDenials)
	if len(got) != 2 {
		t.Fatalf("got %+v", got)
	}
	byTitle := map[string]Suggestion{}
	for _, sg := range got {
		byTitle[sg.Title] = sg
	}
	for _, title := range []string{
		"`git push origin main` was denied 3 times: add it to the policy (confirmPatterns, or the provider's permission settings) so that workers stop asking",
		"`Bash: rm -rf <path>` was denied 3 times: add it to the policy (confirmPatterns, or the provider's permission settings) so that workers stop asking",
	} {
		if sg, ok := byTitle[title]; !ok || !approx(sg.Confidence, 0.5) {
			t.Errorf("missing %q in %+v", title, got)
		}
	}
	if ev := byTitle["`git push origin main` was denied 3 times: add it to the policy (confirmPatterns, or the provider's permission settings) so that workers stop asking"].Evidence; !strings.Contains(ev, "w1 2, w2 1") {
		t.Errorf("evidence %q", ev)
	}
}

func TestRuleSkillRegression(t *testing.T) {
	skillRuns := func(prefix string, version, n, passed int, shadow string) []any {
		var out []any
		for i := range n {
			r := okRun("s1", "claude", "deploy", hour)
			if i >= passed {
				r = failedRun("s1", "claude", "deploy", "boom", hour)
			}
			r.ID, r.Skill, r.SkillVersion, r.Shadow = prefix+itoa(i), "deploy", version, shadow
			out = append(out, r)
		}
		return out
	}
	for _, tc := range []struct {
		name      string
		recs      []any
		title     string
		confident float64
	}{
		// 1 − P(X ≤ 2 | 5, ½) = 1 − 16/32.
		{"2 of 5", skillRuns("a", 2, 5, 2, ""), "skill `deploy` v2 succeeded in 2 of 5 runs (40%): run /learn deploy", 0.5},
		// 1 − P(X ≤ 1 | 6, ½) = 1 − 7/64.
		{"1 of 6", skillRuns("a", 1, 6, 1, ""), "skill `deploy` v1 succeeded in 1 of 6 runs (17%): run /learn deploy", 1 - 7.0/64},
		{"3 of 5", skillRuns("a", 2, 5, 3, ""), "", 0},
		{"0 of 4", skillRuns("a", 2, 4, 0, ""), "", 0},
		// v1 was bad; v2, the newest with runs, is fine.
		{"newer version fixed it", cat(skillRuns("a", 1, 6, 0, ""), skillRuns("b", 2, 5, 4, "")), "", 0},
		// A shadow's runs are not the version's.
		{"shadow runs", cat(skillRuns("a", 2, 5, 5, ""), skillRuns("b", 2, 5, 0, "sh-1")), "", 0},
		// Cancelled runs are not judged: 2 of 4 judged.
		{"cancelled not judged", cat(skillRuns("a", 2, 4, 2, ""), []any{record.Run{SessionID: "s1", ID: "c", Skill: "deploy", SkillVersion: 2,
			Outcome: record.OutcomeCancelled, EndedAt: ms(hour)}}), "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openT(t)
			write(t, s, tc.recs...)
			got := fired(t, s, RuleSkillRegression)
			if tc.title == "" {
				if len(got) != 0 {
					t.Fatalf("fired: %+v", got)
				}
				return
			}
			if len(got) != 1 || got[0].Title != tc.title || !approx(got[0].Confidence, tc.confident) {
				t.Fatalf("got %+v", got)
			}
		})
	}
}

// TestSuggestionStates: a dismissed suggestion stays dismissed, under the
// same id, when more data makes its rule fire harder; an accepted one is
// no longer pending; CreatedAt is when it first fired.
func TestSuggestionStates(t *testing.T) {
	s := openT(t)
	ctx := t.Context()
	goFail := func(ago time.Duration) record.Run { return failedRun("s1", "codex", "$ go test", "FAIL ./x 1s", ago) }
	budget := func(ago time.Duration) record.Run {
		r := goFail(ago)
		r.Cause = record.CauseBudget
		return r
	}
	write(t, s, cat(recent("e", 3, hoursAgo, goFail), recent("b", 2, hoursAgo, budget))...)
	first, err := s.Suggestions(ctx, t0)
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != 2 || first[0].State != StatePending || first[1].State != StatePending {
		t.Fatalf("first: %+v", first)
	}
	ids := map[string]string{}
	for _, sg := range first {
		ids[sg.Rule] = sg.ID
		if sg.CreatedAt != t0.UnixMilli() {
			t.Fatalf("CreatedAt %d", sg.CreatedAt)
		}
	}
	if err := s.SetSuggestionState(ctx, ids[RuleRecurringError], StateDismissed); err != nil {
		t.Fatal(err)
	}
	if err := s.SetSuggestionState(ctx, ids[RuleBudgetStops], StateAccepted); err != nil {
		t.Fatal(err)
	}
	// Two more of the same failure, and a stall streak, an hour later.
	later := t0.Add(hour)
	write(t, s, recent("e2", 2, hoursAgo, goFail)...)
	write(t, s, recent("st", 3, hoursAgo, func(ago time.Duration) record.Run {
		r := okRun("s1", "claude", "x", ago)
		r.Outcome, r.Cause = record.OutcomeFailed, record.CauseStall
		return r
	})...)
	all, err := s.Suggestions(ctx, later)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 3 {
		t.Fatalf("%+v", all)
	}
	// Pending first, then accepted, then dismissed.
	if all[0].Rule != RuleStalls || all[0].State != StatePending || all[0].CreatedAt != later.UnixMilli() ||
		all[1].ID != ids[RuleBudgetStops] || all[1].State != StateAccepted || all[1].CreatedAt != t0.UnixMilli() ||
		all[2].ID != ids[RuleRecurringError] || all[2].State != StateDismissed || !approx(all[2].Confidence, 0.875) ||
		!strings.Contains(all[2].Title, "failed 5 times") {
		t.Fatalf("after more data: %+v", all)
	}
	m, err := s.Intel(ctx, later)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Suggestions) != 1 || m.Suggestions[0].SuggestionType != RuleStalls || m.Suggestions[0].ID != all[0].ID {
		t.Fatalf("fleetIntel suggestions %+v", m.Suggestions)
	}
	// Reopened, it is pending again.
	if err := s.SetSuggestionState(ctx, ids[RuleBudgetStops], StatePending); err != nil {
		t.Fatal(err)
	}
	if m, _ = s.Intel(ctx, later); len(m.Suggestions) != 2 {
		t.Fatalf("after reopening: %+v", m.Suggestions)
	}
	if err := s.SetSuggestionState(ctx, "sg-0000000000000000", StateDismissed); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown id: %v", err)
	}
	if err := s.SetSuggestionState(ctx, ids[RuleStalls], "maybe"); err == nil {
		t.Fatal("accepted state maybe")
	}
}

// TestSetStateBeforeListing: a suggestion that fires can be decided on
// before anything listed it.
func TestSetStateBeforeListing(t *testing.T) {
	s := openT(t)
	write(t, s, recent("e", 3, hoursAgo, func(ago time.Duration) record.Run {
		return failedRun("s1", "codex", "$ go test", "FAIL ./x 1s", ago)
	})...)
	id := suggestionID(RuleRecurringError, "FAIL <path> <n>s")
	if err := s.SetSuggestionState(t.Context(), id, StateDismissed); err != nil {
		t.Fatal(err)
	}
	if got := fired(t, s, RuleRecurringError); len(got) != 1 || got[0].State != StateDismissed {
		t.Fatalf("got %+v", got)
	}
}
