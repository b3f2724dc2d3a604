package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agents-fleet/fleet/intel"
)

// experimentEnv is a fleet home and a git repository with one commit, the
// current directory for the test.
func experimentEnv(t *testing.T) (home, repo string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	home, repo = t.TempDir(), t.TempDir()
	t.Setenv("AGENTS_FLEET_HOME", home)
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q", "--allow-empty", "-m", "root"},
	} {
		if out, err := exec.Command("git", append([]string{"-C", repo}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	t.Chdir(repo)
	return home, repo
}

func fleetCmd(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var o, e bytes.Buffer
	code = Execute(t.Context(), args, strings.NewReader(""), &o, &e)
	return o.String(), e.String(), code
}

func writeExperiment(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "exp.json")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

const twoArms = `{"name": "Two arms", "tasks": ["echo hi > out.txt"], "check": "grep -q hi out.txt", "samples": 2,
	"variants": [{"name": "a", "provider": "local"}, {"name": "b", "provider": "local", "prompt": "{task}; rm out.txt"}]}`

func TestExperimentRunUsageErrors(t *testing.T) {
	experimentEnv(t)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"experiment", "run"}, 2, "want one argument"},
		{[]string{"experiment", "run", writeExperiment(t, `{"name": "x", "samples": 0}`)}, 2, "tasks: required"},
		{[]string{"experiment", "run", writeExperiment(t, `{"name": "x", "tasks": ["true"], "check": "true", "samples": 0, "variants": []}`)}, 2, "samples: 0: want 1..200"},
		{[]string{"experiment", "run", writeExperiment(t, twoArms), "--parallel", "0"}, 2, "--parallel 0"},
		{[]string{"experiment", "run", writeExperiment(t, twoArms), "--bogus"}, 2, "unknown flag"},
		{[]string{"experiment", "run", filepath.Join(t.TempDir(), "missing.json")}, 1, "no such file"},
		{[]string{"experiment", "run", t.TempDir()}, 1, "not a regular file"},
	} {
		_, stderr, code := fleetCmd(t, c.args...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("fleet %v: exit %d, stderr %q; want exit %d and %q", c.args, code, stderr, c.code, c.want)
		}
	}
}

func TestExperimentRunOutsideARepository(t *testing.T) {
	experimentEnv(t)
	path := writeExperiment(t, twoArms)
	t.Chdir(t.TempDir())
	_, stderr, code := fleetCmd(t, "experiment", "run", path)
	if code != 1 || !strings.Contains(stderr, "fresh worktree of the git repository") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
}

// The whole command in process: the JSON has the file with its defaults
// and the run, and the run is in the intel store.
func TestExperimentRunJSONAndSaved(t *testing.T) {
	home, _ := experimentEnv(t)
	stdout, stderr, code := fleetCmd(t, "experiment", "run", writeExperiment(t, twoArms), "--json", "--parallel", "2")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var out struct {
		Experiment struct {
			ID          string
			Permissions string
			TimeoutMs   int64
			Variants    []struct{ Name, Prompt string }
		}
		Run struct {
			ID       string
			Winner   string
			PValue   *float64
			Compared []string
			Variants []struct {
				Variant         string
				Samples, Passed int64
				PassRate        float64
				Lift            *float64
			}
			Samples []struct {
				Worker string
				Pass   bool
			}
		}
		Saved bool
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	x, r := out.Experiment, out.Run
	if x.ID != "two-arms" || x.Permissions != "deny" || x.TimeoutMs != 600000 || x.Variants[0].Prompt != "{task}" {
		t.Fatalf("experiment: %+v", x)
	}
	if len(r.Variants) != 2 || r.Variants[0].Passed != 2 || r.Variants[1].Passed != 0 || r.Variants[1].Lift == nil || *r.Variants[1].Lift != -1 ||
		r.Winner != "" || r.PValue == nil || *r.PValue < 0.3 || len(r.Samples) != 4 || !out.Saved {
		t.Fatalf("run: %+v (saved %v)", r, out.Saved)
	}
	if !strings.Contains(stderr, "s4 b task 1 sample 2: fail") {
		t.Fatalf("progress: %s", stderr)
	}
	st, err := intel.Open(intel.DefaultPath(home))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	runs, err := st.ExperimentRuns(t.Context(), "two-arms")
	if err != nil || len(runs) != 1 || runs[0].ID != r.ID || len(runs[0].Variants) != 2 || runs[0].Variants[0].Passed != 2 || runs[0].Test != "Fisher exact, two-sided, alpha 0.05" {
		t.Fatalf("saved: %+v, %v", runs, err)
	}
}

// An unavailable intel store costs the record, not the report.
func TestExperimentRunWithoutIntel(t *testing.T) {
	home, _ := experimentEnv(t)
	db := intel.DefaultPath(home)
	os.MkdirAll(filepath.Dir(db), 0o700)
	os.WriteFile(db, []byte("not a database, not empty either"), 0o600)
	stdout, stderr, code := fleetCmd(t, "experiment", "run", writeExperiment(t, twoArms))
	if code != 0 || !strings.Contains(stderr, "the run is not saved") || !strings.Contains(stdout, "No winner: the data cannot tell (p = ") {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
}
