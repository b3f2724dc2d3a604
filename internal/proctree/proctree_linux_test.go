//go:build linux

package proctree

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/agents-fleet/fleet/internal/testwait"
)

// A command that detaches a grandchild into a session of its own (as
// Claude Code's Bash tool does) leaves nothing behind after Kill.
func TestKillEndsDetachedDescendants(t *testing.T) {
	tr := New()
	cmd := exec.Command("sh", "-c", "setsid sleep 300 & (sleep 300 &) ; echo started; sleep 300")
	cmd.Env = tr.Env(os.Environ())
	tr.Prepare(cmd)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 8)
	if _, err := out.Read(buf); err != nil { // "started": the children were forked
		t.Fatal(err)
	}
	// Wait for what the script leaves running: the shell and its three
	// sleeps. A count of marked processes is not enough: the subshell
	// that detaches the second sleep is marked too while it lives, so four
	// can be the shell, the subshell and two sleeps, before the last sleep
	// starts and after which the subshell exits.
	var pids []int
	var sleeps int
	var shell bool
	if !testwait.Until(testwait.Bound, func() bool {
		pids, sleeps, shell = tr.Alive(), 0, false
		for _, pid := range pids {
			comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
			sleeps += btoi(strings.TrimSpace(string(comm)) == "sleep")
			shell = shell || pid == cmd.Process.Pid
		}
		return shell && sleeps == 3
	}) {
		t.Fatalf("want the shell and 3 sleeps marked, found %d (pids %v, shell %v, sleeps %d)", len(pids), pids, shell, sleeps)
	}
	tr.Kill(cmd)
	_ = cmd.Wait()
	if !testwait.Until(testwait.Bound, func() bool { return len(tr.Alive()) == 0 }) {
		t.Fatalf("processes left after Kill: %v", tr.Alive())
	}
}

func TestMarksAreUnique(t *testing.T) {
	a, b := New(), New()
	if a.Mark() == b.Mark() {
		t.Fatal("two trees share a mark")
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// A Group's Kill ends what its first process started in the group, while
// that process runs and after it exited.
func TestGroupKill(t *testing.T) {
	for name, script := range map[string]string{"running": "sleep 300 & sleep 300", "exited": "sleep 300 & exit 0"} {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command("sh", "-c", script)
			g, err := StartGroup(cmd)
			if err != nil {
				t.Fatal(err)
			}
			pgid := cmd.Process.Pid
			t.Cleanup(func() { syscall.Kill(-pgid, syscall.SIGKILL) })
			if name == "exited" {
				if err := cmd.Wait(); err != nil {
					t.Fatal(err)
				}
			}
			// The background sleep, beside the shell while it runs.
			want := map[string]int{"running": 2, "exited": 1}[name]
			testwait.For(t, testwait.Bound, "the background sleep in the group", func() bool { return groupMembers(pgid) >= want })
			g.Kill()
			g.Kill() // harmless
			if name == "running" {
				if err := cmd.Wait(); err == nil {
					t.Fatal("the shell exited 0 after Kill")
				}
			}
			testwait.For(t, testwait.Bound, "the group to die", func() bool { return !groupAlive(pgid) })
		})
	}
}

// TestStartGroupScoresTheChildForOOMFirst: a started group's first process
// has a higher oom_score_adj than this process, so the kernel picks it, not
// the fleet, when memory runs out; what it starts inherits that.
func TestStartGroupScoresTheChildForOOMFirst(t *testing.T) {
	// The shell starts its child once told to (after StartGroup returned).
	cmd := exec.Command("sh", "-c", "read go; sleep 60 & cat /proc/$$/oom_score_adj /proc/$!/oom_score_adj; kill $!")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	g, err := StartGroup(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Kill()
	io.WriteString(in, "go\n")
	data, _ := io.ReadAll(out)
	cmd.Wait()
	own, _ := os.ReadFile("/proc/self/oom_score_adj")
	ownV, _ := strconv.Atoi(strings.TrimSpace(string(own)))
	f := strings.Fields(string(data))
	if len(f) != 2 {
		t.Fatalf("the child printed %q", data)
	}
	want := strconv.Itoa(min(ownV+OOMScoreBoost, 1000))
	if f[0] != want || f[1] != want {
		t.Fatalf("oom_score_adj: this process %d, the child %s, its child %s; want %s for what the child starts", ownV, f[0], f[1], want)
	}
}
