package e2e

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agents-fleet/fleet/e2e/e2etest"
	"github.com/agents-fleet/fleet/intel"
)

// experimentJSON is what `fleet experiment run --json` prints, as far as
// these tests read it.
type experimentJSON struct {
	Experiment struct {
		ID       string   `json:"id"`
		Samples  int      `json:"samples"`
		Tasks    []string `json:"tasks"`
		Variants []struct {
			Name string `json:"name"`
		} `json:"variants"`
	} `json:"experiment"`
	Run struct {
		ID           string   `json:"id"`
		ExperimentID string   `json:"experimentId"`
		Winner       string   `json:"winner"`
		Test         string   `json:"test"`
		PValue       *float64 `json:"pValue"`
		Compared     []string `json:"compared"`
		SetupErrors  int      `json:"setupErrors"`
		Variants     []struct {
			Variant  string   `json:"variant"`
			Samples  int64    `json:"samples"`
			Passed   int64    `json:"passed"`
			PassRate float64  `json:"passRate"`
			Mean     float64  `json:"mean"`
			Lift     *float64 `json:"lift"`
		} `json:"variants"`
		Samples []struct {
			Worker  string `json:"worker"`
			Variant string `json:"variant"`
			Sample  int    `json:"sample"`
			Pass    bool   `json:"pass"`
			Error   string `json:"error"`
		} `json:"samples"`
	} `json:"run"`
	Saved bool `json:"saved"`
}

// writeFile writes an experiment file outside the repository (so the
// samples' worktrees, made from HEAD, are what the task finds).
func writeExperiment(e *e2etest.Env, body string) string {
	e.T.Helper()
	path := filepath.Join(e.T.TempDir(), "experiment.json")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		e.T.Fatal(err)
	}
	return path
}

// noSampleLeftovers fails unless the repository has only its own work tree
// and no fleet/exp-* branch, and the experiments' worktree roots are gone.
func noSampleLeftovers(e *e2etest.Env, stderr string) {
	e.T.Helper()
	if wl := gitIn(e.T, e.Dir, "worktree", "list"); strings.Count(wl, "\n") != 0 {
		e.T.Fatalf("worktrees left:\n%s\nthe run's stderr:\n%s", wl, stderr)
	}
	if b := gitIn(e.T, e.Dir, "branch", "--list", "fleet/*"); b != "" {
		e.T.Fatalf("branches left: %s", b)
	}
	if ents, _ := os.ReadDir(filepath.Join(e.Home, "worktrees")); len(ents) != 0 {
		e.T.Fatalf("worktree roots left: %v", ents)
	}
}

// checkEvenFails is a check that passes, except for the arms it names on
// their even samples.
func checkEvenFails(arms ...string) string {
	cond := make([]string, len(arms))
	for i, a := range arms {
		cond[i] = `[ \"$FLEET_EXPERIMENT_VARIANT\" = ` + a + ` ]`
	}
	return `grep -q hello greeting.txt && ! { { ` + strings.Join(cond, " || ") + `; } && [ $((FLEET_EXPERIMENT_SAMPLE % 2)) = 0 ]; }`
}

func near(got, want float64) bool { return math.Abs(got-want) <= 1e-4*math.Abs(want) }

// Control always passes, flaky fails exactly its even samples: 10/10
// against 5/10 is Fisher p = 0.0325 < 0.05, so control wins. Every sample
// ran in its own worktree, all gone afterwards, and the run is in the
// intel store; running it again adds a second run.
func TestExperimentClearWinner(t *testing.T) {
	e := e2etest.NewEnv(t)
	e.GitRepo()
	path := writeExperiment(e, `{
		"id": "flaky-check",
		"name": "Flaky check",
		"hypothesis": "control passes more often",
		"tasks": ["test ! -e greeting.txt && printf 'hello\\n' > greeting.txt"],
		"check": "`+checkEvenFails("flaky")+`",
		"samples": 10,
		"variants": [{"name": "control", "provider": "local"}, {"name": "flaky", "provider": "local"}]
	}`)
	stdout, stderr, code := e.Fleet("", "experiment", "run", path, "--json", "--parallel", "3")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	var out experimentJSON
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	r := out.Run
	if len(r.Variants) != 2 || len(r.Samples) != 20 || r.SetupErrors != 0 || !out.Saved || r.ExperimentID != "flaky-check" {
		t.Fatalf("run: %+v", r)
	}
	c, f := r.Variants[0], r.Variants[1]
	if c.Variant != "control" || c.Samples != 10 || c.Passed != 10 || c.PassRate != 1 || c.Mean != 1 || c.Lift != nil {
		t.Fatalf("control: %+v", c)
	}
	if f.Variant != "flaky" || f.Samples != 10 || f.Passed != 5 || f.PassRate != 0.5 || f.Lift == nil || *f.Lift != -0.5 {
		t.Fatalf("flaky: %+v", f)
	}
	for _, s := range r.Samples {
		if want := s.Variant == "control" || s.Sample%2 == 1; s.Pass != want {
			t.Fatalf("sample %+v: pass %v, want %v", s, s.Pass, want)
		}
	}
	if r.Test != "Fisher exact, two-sided, alpha 0.05" || r.PValue == nil || !near(*r.PValue, 0.0325077) || r.Winner != "control" ||
		strings.Join(r.Compared, ",") != "control,flaky" {
		t.Fatalf("decision: winner %q, p %v, compared %v, test %q", r.Winner, r.PValue, r.Compared, r.Test)
	}
	noSampleLeftovers(e, stderr)

	// A second run, in text this time.
	stdout, stderr, code = e.Fleet("", "experiment", "run", path)
	if code != 0 || !strings.Contains(stdout, "Winner: control (p = 0.03251)") || !strings.Contains(stdout, "flaky    local     10       5       50.0%") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	noSampleLeftovers(e, stderr)

	st, err := intel.Open(intel.DefaultPath(e.Home))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	runs, err := st.ExperimentRuns(t.Context(), "flaky-check")
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 || runs[1].ID != r.ID || runs[0].ID == r.ID {
		t.Fatalf("saved runs: %+v", runs)
	}
	for _, run := range runs {
		if run.Winner != "control" || run.PValue == nil || !near(*run.PValue, 0.0325077) || len(run.Variants) != 2 ||
			run.Variants[1].Passed != 5 || run.Variants[1].Samples != 10 || run.Variants[1].Lift == nil || *run.Variants[1].Lift != -0.5 {
			t.Fatalf("saved run: %+v", run)
		}
	}
}

// Both arms pass exactly half the time: a tie for the highest rate, no
// winner, p = 1.
func TestExperimentNoWinner(t *testing.T) {
	e := e2etest.NewEnv(t)
	e.GitRepo()
	path := writeExperiment(e, `{
		"name": "Coin",
		"tasks": ["printf 'hello\\n' > greeting.txt"],
		"check": "`+checkEvenFails("a", "b")+`",
		"samples": 10,
		"variants": [{"name": "a", "provider": "local"}, {"name": "b", "provider": "local", "prompt": "{task} && true"}]
	}`)
	stdout, stderr, code := e.Fleet("", "experiment", "run", path, "--json")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	var out experimentJSON
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	r := out.Run
	if out.Experiment.ID != "coin" || len(r.Variants) != 2 || r.Variants[0].Passed != 5 || r.Variants[1].Passed != 5 ||
		r.Variants[1].Lift == nil || *r.Variants[1].Lift != 0 || r.Winner != "" || r.PValue == nil || *r.PValue != 1 {
		t.Fatalf("run: %+v", r)
	}
	noSampleLeftovers(e, stderr)
	stdout, _, code = e.Fleet("", "experiment", "run", path)
	if code != 0 || !strings.Contains(stdout, "No winner: the data cannot tell (p = 1): a and b tie for the highest pass rate (50.0%)") {
		t.Fatalf("exit %d\n%s", code, stdout)
	}
	noSampleLeftovers(e, stderr)
}
