//go:build unix

package e2e

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/e2e/e2etest"
	"github.com/agents-fleet/fleet/internal/testwait"
)

// Ctrl-C while samples run: the sessions' processes end, the worktrees go,
// and the command says it was interrupted. Unix-only: the interrupt is a
// SIGINT, and kill(pid, 0) tells that the task processes are gone.
func TestExperimentInterrupted(t *testing.T) {
	e := e2etest.NewEnv(t)
	e.GitRepo()
	marks := t.TempDir()
	path := writeExperiment(e, `{
		"name": "Interrupted",
		"tasks": ["echo $$ > `+marks+`/$FLEET_EXPERIMENT_VARIANT; exec sleep 60"],
		"check": "true",
		"samples": 3,
		"variants": [{"name": "a", "provider": "local"}, {"name": "b", "provider": "local"}]
	}`)
	cmd := exec.Command(e2etest.Bin(), "experiment", "run", path, "--parallel", "2")
	cmd.Dir, cmd.Env = e.Dir, e.Environ()
	var stderr e2etest.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// Both running samples have started their task (the task says so).
	var pids []int
	if !testwait.Until(testwait.Bound, func() bool {
		pids = pids[:0]
		for _, arm := range []string{"a", "b"} {
			b, err := os.ReadFile(filepath.Join(marks, arm))
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && perr == nil {
				pids = append(pids, pid)
			}
		}
		return len(pids) == 2
	}) {
		cmd.Process.Kill()
		t.Fatalf("the samples did not start: %s", stderr.String())
	}
	cmd.Process.Signal(os.Interrupt)
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(stderr.String(), "experiment interrupted") {
			t.Fatalf("exit: %v\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("still running after the interrupt:\n%s", stderr.String())
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("task process %d is still there: %v", pid, err)
		}
	}
	noSampleLeftovers(e, stderr.String())
}
