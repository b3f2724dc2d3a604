package experiment

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agents-fleet/fleet/provider"
	"github.com/agents-fleet/fleet/provider/local"
)

func TestFisherExactKnownValues(t *testing.T) {
	// Known values: Fisher's tea tasting (34/70) and the two tables the
	// brief names; the rest computed exactly in rational arithmetic from
	// the hypergeometric distribution (Python's fractions and math.comb).
	for _, c := range []struct {
		a, b, c, d int64
		want       float64
	}{
		{3, 1, 1, 3, 0.4857143},      // the lady tasting tea
		{10, 0, 0, 10, 1.082509e-05}, // 2/C(20,10)
		{0, 10, 10, 0, 1.082509e-05}, // its mirror
		{10, 0, 5, 5, 0.03250774},    // 2 × 252/15504: the e2e experiment
		{10, 0, 1, 9, 1.19076e-04},
		{1, 9, 11, 3, 0.002759456},
		{20, 0, 14, 6, 0.02019602},
		{2, 8, 8, 2, 0.02301414},
		{9, 1, 3, 7, 0.01976661},   // just below alpha
		{12, 8, 5, 15, 0.05355099}, // just above alpha
		{4, 6, 6, 4, 0.6562818},
		{4, 0, 2, 2, 0.4285714},
		{10, 6, 10, 4, 0.7089455},
		{200, 0, 0, 200, 1.942643e-119}, // tiny, still finite
		{5, 5, 5, 5, 1},                 // identical arms
		{7, 3, 7, 3, 1},                 // equal rates
		{100, 100, 100, 100, 1},         // large, equal
		{0, 5, 0, 5, 1},                 // all fail
		{1, 0, 0, 1, 1},                 // 2 × 1/2, capped at 1
		{10, 10, 0, 0, 1},               // one arm without samples
		{3, 0, 0, 0, 1},                 // a single cell
		{0, 0, 0, 0, 1},                 // no data
		{-1, 0, 0, 0, 1},                // bad input
	} {
		got := FisherExact(c.a, c.b, c.c, c.d)
		if !near(got, c.want) {
			t.Errorf("FisherExact(%d %d; %d %d) = %.7g, want %.7g", c.a, c.b, c.c, c.d, got, c.want)
		}
	}
}

// near compares at 4 significant digits, the precision of the table.
func near(got, want float64) bool {
	if want == 0 {
		return got == 0
	}
	return math.Abs(got-want)/want < 1e-4
}

func fmtP(p *float64) string {
	if p == nil {
		return "none"
	}
	return FormatP(*p)
}

func stats(arms ...[3]int64) []VariantStats {
	var out []VariantStats
	for i, a := range arms {
		v := VariantStats{Variant: fmt.Sprintf("v%d", i), Samples: a[0], Passed: a[1]}
		if v.Samples > 0 {
			v.PassRate = float64(v.Passed) / float64(v.Samples)
		}
		out = append(out, v)
	}
	return out
}

func TestDecide(t *testing.T) {
	for _, c := range []struct {
		name     string
		arms     [][3]int64 // samples, passed
		winner   string
		compared string
		p        float64 // -1: no p-value
		reason   string
	}{
		{"clear winner: control", [][3]int64{{10, 10}, {10, 5}}, "v0", "v0 v1", 0.03250774, "passes more often"},
		{"clear winner: a later arm", [][3]int64{{10, 0}, {10, 1}, {10, 10}}, "v2", "v2 v1", 1.19076e-04, "passes more often"},
		{"tie for the highest rate", [][3]int64{{10, 5}, {10, 5}}, "", "v0 v1", 1, "tie for the highest"},
		{"tie with different sizes", [][3]int64{{4, 2}, {10, 3}, {10, 5}}, "", "v0 v2", 1, "tie for the highest"},
		{"not significant", [][3]int64{{10, 6}, {10, 4}}, "", "v0 v1", 0.6562818, "not significant"},
		{"best against the next, not the worst", [][3]int64{{10, 10}, {10, 9}, {10, 0}}, "", "v0 v1", 1, "not significant"},
		{"an arm without samples is left out", [][3]int64{{0, 0}, {10, 10}, {10, 5}}, "v1", "v1 v2", 0.03250774, "passes more often"},
		{"only one arm has samples", [][3]int64{{10, 10}, {0, 0}}, "", "", -1, "fewer than two"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var arms [][3]int64 = c.arms
			d := Decide(stats(arms...))
			if d.Winner != c.winner || strings.Join(d.Compared, " ") != c.compared || !strings.Contains(d.Reason, c.reason) || d.Test != TestName {
				t.Fatalf("Decide = %+v", d)
			}
			switch {
			case c.p < 0 && d.PValue != nil:
				t.Fatalf("p = %v, want none", *d.PValue)
			case c.p >= 0 && (d.PValue == nil || !near(*d.PValue, c.p)):
				t.Fatalf("p = %v, want %v", fmtP(d.PValue), c.p)
			}
		})
	}
}

func TestSummarise(t *testing.T) {
	vs := []VariantStats{{Variant: "a"}, {Variant: "b"}, {Variant: "c"}}
	Summarise(vs, []Sample{
		{Variant: "a", Pass: true, DurationMs: 10, Tokens: 100},
		{Variant: "a", Pass: false, DurationMs: 30, Tokens: 300},
		{Variant: "b", Pass: true, DurationMs: 5},
		{Variant: "b", SetupError: true, DurationMs: 1000},  // not counted
		{Variant: "b", Interrupted: true, DurationMs: 1000}, // not counted
		{Variant: "x", Pass: true},                          // no such arm
	})
	a, b, c := vs[0], vs[1], vs[2]
	if a.Samples != 2 || a.Passed != 1 || a.PassRate != 0.5 || a.Mean != 0.5 || a.MeanDurationMs != 20 || a.MeanTokens != 200 || a.Lift != nil {
		t.Fatalf("a: %+v", a)
	}
	if b.Samples != 1 || b.Passed != 1 || b.PassRate != 1 || b.MeanDurationMs != 5 || b.Lift == nil || *b.Lift != 1 {
		t.Fatalf("b: %+v", b)
	}
	if c.Samples != 0 || c.Lift != nil {
		t.Fatalf("c: %+v", c)
	}
	// A control that never passes gives no lift.
	vs = []VariantStats{{Variant: "a"}, {Variant: "b"}}
	Summarise(vs, []Sample{{Variant: "a"}, {Variant: "b", Pass: true}})
	if vs[1].Lift != nil {
		t.Fatalf("lift against a zero control: %v", *vs[1].Lift)
	}
}

const validFile = `{
  "id": "greeting-v2",
  "name": "Greeting check",
  "hypothesis": "The shorter prompt passes as often",
  "tasks": ["printf 'hello\\n' > greeting.txt"],
  "check": "grep -q hello greeting.txt",
  "samples": 6,
  "timeoutMs": 120000,
  "permissions": "allow",
  "variants": [
    {"name": "control", "provider": "local"},
    {"name": "terse", "provider": "local", "prompt": "{task} && echo done"},
    {"name": "claude", "provider": "claude", "model": "claude-sonnet-4-5", "skill": "greet"}
  ]
}`

func TestParse(t *testing.T) {
	f, err := Parse([]byte(validFile))
	if err != nil {
		t.Fatal(err)
	}
	if f.ID != "greeting-v2" || f.Samples != 6 || f.TimeoutMs != 120000 || f.Permissions != "allow" || len(f.Variants) != 3 ||
		f.Variants[0].Prompt != "{task}" || f.Variants[2].Model != "claude-sonnet-4-5" || f.Variants[2].Skill != "greet" || f.Total() != 18 {
		t.Fatalf("%+v", f)
	}
	f, err = Parse([]byte(`{"name": "  Greeting check: v2!  ", "tasks": ["true"], "check": "true",
		"variants": [{"name": "a", "provider": "local"}, {"name": "b", "provider": "local"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if f.ID != "greeting-check-v2" || f.Name != "Greeting check: v2!" || f.Samples != DefaultSamples || f.TimeoutMs != DefaultTimeoutMs || f.Permissions != "deny" {
		t.Fatalf("defaults: %+v", f)
	}
	if got := slug(strings.Repeat("ab ", 40)); len(got) > 64 || strings.HasSuffix(got, "-") || !idRE.MatchString(got) {
		t.Fatalf("long slug %q", got)
	}
}

func TestParseErrors(t *testing.T) {
	base := `"name": "n", "tasks": ["true"], "check": "true"`
	two := `"variants": [{"name": "a", "provider": "local"}, {"name": "b", "provider": "local"}]`
	for _, c := range []struct{ file, want string }{
		{``, "empty"},
		{`[]`, "want a JSON object"},
		{`{"name": "n"} {}`, "more than one value"},
		{`{"name": 3}`, "name: want a string"},
		{`{` + base + `, ` + two + `, "sample": 3}`, `unknown field "sample"`},
		{`{"tasks": ["true"], "check": "true", ` + two + `}`, "name: required"},
		{`{"name": "n\nm", "tasks": ["true"], "check": "true", ` + two + `}`, "name: one line"},
		{`{"name": "!!!", "tasks": ["true"], "check": "true", ` + two + `}`, "id: cannot derive"},
		{`{"id": "Bad_Id", ` + base + `, ` + two + `}`, `id: "Bad_Id"`},
		{`{"name": "n", "check": "true", ` + two + `}`, "tasks: required"},
		{`{"name": "n", "tasks": ["true", " "], "check": "true", ` + two + `}`, "tasks[1]: empty"},
		{`{"name": "n", "tasks": ["true"], ` + two + `}`, "check: required"},
		{`{` + base + `, "samples": 0, ` + two + `}`, "samples: 0: want 1..200"},
		{`{` + base + `, "samples": 201, ` + two + `}`, "samples: 201"},
		{`{` + base + `, "samples": "5", ` + two + `}`, "samples: want an integer"},
		{`{` + base + `, "timeoutMs": 10, ` + two + `}`, "timeoutMs: 10"},
		{`{` + base + `, "permissions": "ask", ` + two + `}`, `permissions: "ask"`},
		{`{` + base + `, "variants": [{"name": "a", "provider": "local"}]}`, "variants: 1 variants; want 2..8"},
		{`{` + base + `}`, "variants: 0 variants"},
		{`{` + base + `, "variants": [{"name": "a", "provider": "local"}, {"provider": "local"}]}`, "variants[1].name: required"},
		{`{` + base + `, "variants": [{"name": "a", "provider": "local"}, {"name": "a b", "provider": "local"}]}`, `variants[1].name: "a b"`},
		{`{` + base + `, "variants": [{"name": "a", "provider": "local"}, {"name": "a", "provider": "local"}]}`, "also variants[0]'s name"},
		{`{` + base + `, "variants": [{"name": "a", "provider": "local"}, {"name": "b"}]}`, "variants[1].provider: required"},
		{`{` + base + `, "variants": [{"name": "a", "provider": "local"}, {"name": "b", "provider": "gpt"}]}`, `variants[1].provider: unknown provider "gpt"`},
		{`{` + base + `, "variants": [{"name": "a", "provider": "local", "model": "x"}, {"name": "b", "provider": "local"}]}`, "variants[0].model: the local provider"},
		{`{` + base + `, "variants": [{"name": "a", "provider": "local"}, {"name": "b", "provider": "local", "prompt": "do it"}]}`, "variants[1].prompt: must contain {task}"},
		{`{` + base + `, "variants": [{"name": "a", "provider": "local"}, {"name": "b", "provider": "local", "skill": "../x"}]}`, "variants[1].skill"},
		{`{` + base + `, "variants": [{"name": "a", "provider": "local"}, {"name": "b", "provider": "local", "extra": 1}]}`, `unknown field "extra"`},
	} {
		_, err := Parse([]byte(c.file))
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, ErrInvalid) {
			t.Errorf("Parse(%s) = %v, want an error containing %q", c.file, err, c.want)
		}
	}
	// The bound on the total work.
	var arms []string
	for i := range 8 {
		arms = append(arms, fmt.Sprintf(`{"name": "v%d", "provider": "local"}`, i))
	}
	tasks := strings.TrimSuffix(strings.Repeat(`"true",`, 10), ",")
	_, err := Parse([]byte(`{"name": "n", "tasks": [` + tasks + `], "check": "true", "samples": 200, "variants": [` + strings.Join(arms, ",") + `]}`))
	if err == nil || !strings.Contains(err.Error(), "16000 samples; at most 10000") {
		t.Errorf("total bound: %v", err)
	}
	// The bound on the file.
	if _, err := Parse(bytes.Repeat([]byte(" "), MaxFileSize+1)); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("size bound: %v", err)
	}
}

func TestTaskText(t *testing.T) {
	v := Variant{Prompt: "{task} && echo done"}
	if got := v.TaskText("make", ""); got != "make && echo done" {
		t.Fatal(got)
	}
	if got := v.TaskText("make", "set -e; {task}\n"); got != "set -e; make && echo done\n" {
		t.Fatal(got)
	}
	if got := v.TaskText("make", "Be brief.\n"); got != "Be brief.\n\nTask: make && echo done" {
		t.Fatal(got)
	}
}

func TestHostAnswers(t *testing.T) {
	ctx := t.Context()
	opts := []provider.PermissionOption{{ID: "r", Kind: provider.Reject}, {ID: "once", Kind: provider.AllowOnce}, {ID: "always", Kind: provider.AllowAlways}}
	allow, deny := newHost(true), newHost(false)
	if d, _ := allow.Permission(ctx, provider.PermissionRequest{Options: opts}); !d.Allow || d.OptionID != "once" {
		t.Fatalf("allow with options: %+v", d)
	}
	if d, _ := allow.Permission(ctx, provider.PermissionRequest{}); !d.Allow {
		t.Fatalf("allow: %+v", d)
	}
	if d, _ := allow.Permission(ctx, provider.PermissionRequest{Options: opts[:1]}); d.Allow || d.OptionID != "r" {
		t.Fatalf("allow without an allow option: %+v", d)
	}
	if d, _ := deny.Permission(ctx, provider.PermissionRequest{Options: opts}); d.Allow || d.OptionID != "r" || d.Message == "" {
		t.Fatalf("deny: %+v", d)
	}
	if _, err := deny.Ask(ctx, provider.Question{Text: "?"}); !errors.Is(err, provider.ErrNoAnswer) {
		t.Fatalf("ask: %v", err)
	}
	if ok, err := deny.Confirm(ctx, "?"); ok || err != nil {
		t.Fatalf("confirm: %v %v", ok, err)
	}
	allow.Event(provider.Usage{InputTokens: 10, OutputTokens: 5, CacheReadTokens: 100})
	allow.Event(provider.Usage{InputTokens: 1})
	allow.Event(provider.TurnEnded{Result: "first"})
	allow.Event(provider.TurnEnded{Result: "second"}) // never blocks
	if allow.tokens() != 16 || (<-allow.ended).Result != "first" {
		t.Fatal("events")
	}
}

// gitRepo makes a repository with one commit and returns its directory.
func gitRepo(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	dir := t.TempDir()
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q", "--allow-empty", "-m", "root"},
	} {
		if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return dir
}

func worktreeCount(t *testing.T, repo string) int {
	t.Helper()
	out, err := exec.Command("git", "-C", repo, "worktree", "list", "--porcelain").Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(out), "worktree ")
}

func branches(t *testing.T, repo string) string {
	t.Helper()
	out, err := exec.Command("git", "-C", repo, "branch", "--format=%(refname:short)").Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

func localOptions(repo string, t *testing.T) Options {
	return Options{
		Dir:       repo,
		FleetHome: t.TempDir(),
		Providers: map[string]provider.Provider{"local": &local.Provider{}},
		RunID:     "test1",
	}
}

// A real run with the local provider in a real repository: every sample
// gets its own worktree (a file left by one sample is not in the next),
// the variables reach the task and the check, a flaky arm fails exactly on
// its even samples, and nothing is left behind.
func TestRunLocal(t *testing.T) {
	repo := gitRepo(t)
	f, err := Parse([]byte(`{
		"name": "Flaky check",
		"tasks": ["test ! -e left.txt && echo \"$FLEET_EXPERIMENT_VARIANT\" > left.txt && echo out"],
		"check": "grep -qx \"$FLEET_EXPERIMENT_VARIANT\" left.txt && test \"$FLEET_EXPERIMENT_TASK\" = 1 && { [ \"$FLEET_EXPERIMENT_VARIANT\" = control ] || [ $((FLEET_EXPERIMENT_SAMPLE % 2)) = 1 ]; }",
		"samples": 4,
		"variants": [
			{"name": "control", "provider": "local"},
			{"name": "flaky", "provider": "local", "prompt": "{task} && echo \"$FLEET_EXPERIMENT_ID\""}
		]
	}`))
	if err != nil {
		t.Fatal(err)
	}
	o := localOptions(repo, t)
	o.Parallel = 3
	var progress atomic.Int32
	o.Progress = func(Sample) { progress.Add(1) } // concurrent with Parallel > 1
	res, err := Run(t.Context(), f, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Samples) != 8 || progress.Load() != 8 || res.SetupErrors != 0 || res.ExperimentID != "flaky-check" || res.ID != "test1" {
		t.Fatalf("result: %+v", res)
	}
	c, fl := res.Variants[0], res.Variants[1]
	if c.Samples != 4 || c.Passed != 4 || fl.Samples != 4 || fl.Passed != 2 || fl.Lift == nil || *fl.Lift != -0.5 {
		t.Fatalf("variants: %+v %+v", c, fl)
	}
	for _, s := range res.Samples {
		wantPass := s.Variant == "control" || s.Sample%2 == 1
		if s.Pass != wantPass || s.Task != 1 || (s.Pass != (s.Error == "")) {
			t.Fatalf("sample %+v", s)
		}
		if !s.Pass && !strings.HasPrefix(s.Error, "check failed: exit status 1") {
			t.Fatalf("error text: %q", s.Error)
		}
	}
	// 4/4 against 2/4 is not significant.
	if res.Winner != "" || res.PValue == nil || !near(*res.PValue, 0.4285714) {
		t.Fatalf("decision: %+v", res.Decision)
	}
	if n := worktreeCount(t, repo); n != 1 {
		t.Fatalf("%d worktrees left", n)
	}
	if b := branches(t, repo); b != "main" {
		t.Fatalf("branches left: %s", b)
	}
	if _, err := os.Stat(filepath.Join(o.FleetHome, "worktrees", "exp-test1")); !os.IsNotExist(err) {
		t.Fatalf("worktree root left: %v", err)
	}
	var out bytes.Buffer
	if err := WriteReport(&out, f, res); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Experiment flaky-check: Flaky check", "control  local     4        4       100.0%", "(control)", "-50.0%",
		"No winner: the data cannot tell (p = 0.4286)", "2 sample(s) failed:", "flaky task 1 sample 2: fail"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

// A failed turn is a fail and the check does not run; a task that
// outlives the timeout is a fail that says so; --keep leaves the
// worktrees.
func TestRunFailuresAndKeep(t *testing.T) {
	repo := gitRepo(t)
	f, err := Parse([]byte(`{
		"name": "failures",
		"tasks": ["if [ \"$FLEET_EXPERIMENT_VARIANT\" = slow ]; then sleep 30; fi; echo why >&2; exit 3"],
		"check": "touch checked",
		"samples": 1,
		"timeoutMs": 1000,
		"variants": [{"name": "fails", "provider": "local"}, {"name": "slow", "provider": "local"}]
	}`))
	if err != nil {
		t.Fatal(err)
	}
	o := localOptions(repo, t)
	o.Keep = true
	res, err := Run(t.Context(), f, o)
	if err != nil {
		t.Fatal(err)
	}
	fails, slow := res.Samples[0], res.Samples[1]
	if fails.Pass || !strings.Contains(fails.Error, "task failed: exit status 3: why") || fails.SetupError {
		t.Fatalf("failed turn: %+v", fails)
	}
	if slow.Pass || !strings.Contains(slow.Error, "timed out after 1s during the task") {
		t.Fatalf("timeout: %+v", slow)
	}
	for _, s := range res.Samples {
		if s.Worktree == "" {
			t.Fatalf("kept worktree not reported: %+v", s)
		}
		if _, err := os.Stat(filepath.Join(s.Worktree, "checked")); !os.IsNotExist(err) {
			t.Fatalf("the check ran after a failed turn: %v", err)
		}
	}
	if n := worktreeCount(t, repo); n != 3 || res.Worktrees == "" {
		t.Fatalf("%d worktrees, kept in %q", n, res.Worktrees)
	}
}

// Cancelling the run closes the running sessions and removes their
// worktrees; Run says it was interrupted.
func TestRunCancelled(t *testing.T) {
	repo := gitRepo(t)
	f, err := Parse([]byte(`{
		"name": "cancel", "tasks": ["touch started; sleep 30"], "check": "true", "samples": 3,
		"variants": [{"name": "a", "provider": "local"}, {"name": "b", "provider": "local"}]
	}`))
	if err != nil {
		t.Fatal(err)
	}
	o := localOptions(repo, t)
	o.Parallel = 2
	ctx, cancel := context.WithCancel(t.Context())
	started := make(chan struct{}, 8)
	o.Providers["local"] = &signalling{Provider: &local.Provider{}, started: started}
	go func() {
		<-started
		<-started
		cancel()
	}()
	res, err := Run(ctx, f, o)
	if err == nil || !errors.Is(err, context.Canceled) || res == nil {
		t.Fatalf("Run = %v, %v", res, err)
	}
	for _, s := range res.Samples {
		if !s.Interrupted {
			t.Fatalf("sample %+v", s)
		}
	}
	if len(res.Samples) > 2 || res.Variants[0].Samples+res.Variants[1].Samples != 0 {
		t.Fatalf("result: %+v", res)
	}
	if n := worktreeCount(t, repo); n != 1 {
		t.Fatalf("%d worktrees left", n)
	}
}

// signalling tells when a session started.
type signalling struct {
	*local.Provider
	started chan struct{}
}

func (s *signalling) Start(ctx context.Context, spec provider.Spec, h provider.Host) (provider.Session, error) {
	sess, err := s.Provider.Start(ctx, spec, h)
	s.started <- struct{}{}
	return sess, err
}

// failingProvider never starts.
type failingProvider struct{}

func (failingProvider) Name() string { return "claude" }
func (failingProvider) Start(context.Context, provider.Spec, provider.Host) (provider.Session, error) {
	return nil, errors.New("no credentials")
}

func TestRunSetupErrors(t *testing.T) {
	f, err := Parse([]byte(`{"name": "setup", "tasks": ["true"], "check": "true", "samples": 2,
		"variants": [{"name": "a", "provider": "local"}, {"name": "b", "provider": "claude", "skill": "greet"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	// Outside a repository.
	o := localOptions(t.TempDir(), t)
	o.Providers["claude"] = failingProvider{}
	o.Skills = func(string) (string, int, error) { return "{task}", 2, nil }
	if _, err := Run(t.Context(), f, o); err == nil || !strings.Contains(err.Error(), "fresh worktree of the git repository") {
		t.Fatalf("outside a repository: %v", err)
	}
	repo := gitRepo(t)
	o.Dir = repo
	o.Skills = nil
	if _, err := Run(t.Context(), f, o); err == nil || !strings.Contains(err.Error(), "skills are not available") {
		t.Fatalf("no skills: %v", err)
	}
	o.Skills = func(string) (string, int, error) { return "{task}", 2, nil }
	delete(o.Providers, "claude")
	if _, err := Run(t.Context(), f, o); err == nil || !strings.Contains(err.Error(), "no claude provider") {
		t.Fatalf("no provider: %v", err)
	}
	o.Providers["claude"] = failingProvider{}
	res, err := Run(t.Context(), f, o)
	if err != nil {
		t.Fatal(err)
	}
	if res.SetupErrors != 2 || res.Variants[1].Samples != 0 || res.Variants[1].SkillVersion != 2 || res.Variants[0].Passed != 2 {
		t.Fatalf("result: %+v", res)
	}
	if d := res.Decision; d.Winner != "" || d.PValue != nil || !strings.Contains(d.Reason, "fewer than two") {
		t.Fatalf("decision: %+v", d)
	}
	for _, s := range res.Samples {
		if s.Variant == "b" && (!s.SetupError || s.Error != "start claude: no credentials") {
			t.Fatalf("sample %+v", s)
		}
	}
	if n := worktreeCount(t, repo); n != 1 {
		t.Fatalf("%d worktrees left", n)
	}
}
