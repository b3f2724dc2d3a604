package e2etest

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// Env is an isolated fleet home and a working folder, the fleet binary run
// in them.
type Env struct {
	T    testing.TB
	Home string // AGENTS_FLEET_HOME; short, so that socket paths fit sun_path
	Dir  string // the working folder: the user's repository or plain folder
	// Wrap, when set, runs the fleet binary (ip netns exec NS: in a
	// network namespace).
	Wrap []string
}

// NewEnv makes an Env whose folders go when the test ends.
func NewEnv(t testing.TB) *Env {
	t.Helper()
	// Short: the socket path must fit sun_path.
	home, err := os.MkdirTemp("", "fh")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	if Race {
		// Race-instrumented consoles, with other packages' race tests
		// running beside them, can go unscheduled for longer than the
		// default stall grace (200 ms), and the fleet then rightly treats
		// a healthy console as stalled. Tests that write their own
		// config.json replace this (Config and the crowd tests add it back).
		os.WriteFile(filepath.Join(home, "config.json"), []byte(`{"limits": {"stallGraceMs": 5000}}`), 0o600)
	}
	return &Env{T: t, Home: home, Dir: t.TempDir()}
}

// Environ is the fleet's environment: this process's without the fleet's
// own variables, and e's home.
func (e *Env) Environ() []string {
	var out []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "AGENTS_FLEET_") {
			continue
		}
		out = append(out, kv)
	}
	return append(out, "AGENTS_FLEET_HOME="+e.Home)
}

// Command is the fleet binary with args in e (run by e.Wrap when set).
func (e *Env) Command(ctx context.Context, args ...string) *exec.Cmd {
	argv := append(append(slices.Clone(e.Wrap), bin), args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = e.Dir
	cmd.Env = e.Environ()
	return cmd
}

// Fleet runs `fleet args...` to completion (30 s at most) with stdin and
// returns what it printed and its exit code.
func (e *Env) Fleet(stdin string, args ...string) (stdout, stderr string, code int) {
	e.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := e.Command(ctx, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var o, s bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &s
	err := cmd.Run()
	code = 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			e.T.Fatalf("fleet %v: %v", args, err)
		}
		code = ee.ExitCode()
	}
	return o.String(), s.String(), code
}

// Config writes config.json: limits, with a stall grace fit for a loaded
// machine unless limits set one, and the more top-level keys.
func (e *Env) Config(limits, more map[string]any) {
	e.T.Helper()
	lim := map[string]any{"stallGraceMs": 5000}
	for k, v := range limits {
		lim[k] = v
	}
	cfg := map[string]any{"limits": lim}
	for k, v := range more {
		cfg[k] = v
	}
	b, _ := json.Marshal(cfg)
	if err := os.WriteFile(filepath.Join(e.Home, "config.json"), b, 0o600); err != nil {
		e.T.Fatal(err)
	}
}

// GitRepo makes e.Dir a repository on branch main with two commits: an
// empty root and one adding README.
func (e *Env) GitRepo() {
	e.T.Helper()
	RequireTool(e.T, "git")
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q", "--allow-empty", "-m", "root"},
	} {
		if out, err := exec.Command("git", append([]string{"-C", e.Dir}, args...)...).CombinedOutput(); err != nil {
			e.T.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	os.WriteFile(filepath.Join(e.Dir, "README"), []byte("hello\n"), 0o644)
	for _, args := range [][]string{{"add", "README"}, {"-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q", "-m", "readme"}} {
		if out, err := exec.Command("git", append([]string{"-C", e.Dir}, args...)...).CombinedOutput(); err != nil {
			e.T.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
}
