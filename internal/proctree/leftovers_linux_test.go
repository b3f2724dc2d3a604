//go:build linux

package proctree

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/internal/testwait"
)

// sessionEnv and hostEnv are provider.SessionEnv and provider.HostEnv
// (proctree does not import provider).
const (
	sessionEnv = "AGENTS_FLEET_SESSION"
	hostEnv    = "AGENTS_FLEET_HOST"
)

// startMarked starts sh -c script in a process group of its own, with the
// session variable set to session, and reaps it in the background.
func startMarked(t *testing.T, session, script string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	cmd.Env = append(append(os.Environ(), sessionEnv+"="+session), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() })
	return cmd
}

// groupAlive reports whether any process of group pgid is alive (zombies
// excluded).
func groupAlive(pgid int) bool { return groupMembers(pgid) > 0 }

// groupMembers counts the live processes of group pgid (zombies excluded).
func groupMembers(pgid int) int {
	n := 0
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil {
			continue
		}
		if g, err := syscall.Getpgid(pid); err != nil || g != pgid {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err == nil && !strings.Contains(string(stat), ") Z ") {
			n++
		}
	}
	return n
}

// TestKillMarkedSession: what a killed fleet left running (the processes
// marked with its session, the shell and its background children alike) is
// killed by group; a process of another session and this test process are
// not.
func TestKillMarkedSession(t *testing.T) {
	session := fmt.Sprintf("test-%d-%d", os.Getpid(), time.Now().UnixNano())
	left := startMarked(t, session, "sleep 300 & sleep 300; wait")
	other := startMarked(t, session+"-other", "sleep 300")
	// sh starts its children; KillMarked below says what it found.
	testwait.Until(testwait.Bound, func() bool { return len(findMarked(sessionEnv, session, "")) >= 3 })
	// A child caught in the middle of its exec may not be read as marked
	// (its environment is briefly unreadable); the kill is by group, so
	// it goes with the shell all the same.
	pids := KillMarked(sessionEnv, session)
	if !slices.Contains(pids, left.Process.Pid) {
		t.Errorf("found %v, want the shell %d among them", pids, left.Process.Pid)
	}
	testwait.For(t, testwait.Bound, "the marked process group to die", func() bool { return !groupAlive(left.Process.Pid) })
	if !groupAlive(other.Process.Pid) {
		t.Error("the other session's process was killed")
	}
	if again := KillMarked(sessionEnv, session); len(again) != 0 {
		t.Errorf("second pass found %v", again)
	}
	if none := KillMarked(sessionEnv, ""); none != nil {
		t.Errorf("empty session matched %v", none)
	}
}

// TestKillMarkedExceptSparesHostRuns: a resumed fleet stops what its killed
// process left running, not the processes a worker host on the same
// machine runs for the same session (they carry the session's mark too,
// and the host's).
func TestKillMarkedExceptSparesHostRuns(t *testing.T) {
	session := fmt.Sprintf("test-%d-%d", os.Getpid(), time.Now().UnixNano())
	left := startMarked(t, session, "sleep 300")
	onHost := startMarked(t, session, "sleep 300", hostEnv+"=h1")
	testwait.Until(testwait.Bound, func() bool { return len(findMarked(sessionEnv, session, "")) >= 2 })
	pids := KillMarkedExcept(sessionEnv, session, hostEnv)
	if !slices.Contains(pids, left.Process.Pid) || slices.Contains(pids, onHost.Process.Pid) {
		t.Errorf("killed %v; want %d (the leftover) and not %d (the host's)", pids, left.Process.Pid, onHost.Process.Pid)
	}
	testwait.For(t, testwait.Bound, "the leftover to die", func() bool { return !groupAlive(left.Process.Pid) })
	if !groupAlive(onHost.Process.Pid) {
		t.Error("the host's process was killed")
	}
}
