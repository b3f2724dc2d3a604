//go:build linux

package proctree

import (
	"os"
	"os/exec"
	"testing"
	"time"
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
	deadline := time.Now().Add(30 * time.Second)
	for len(tr.Alive()) < 4 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := len(tr.Alive()); n < 4 {
		t.Fatalf("want the shell and 3 sleeps marked, found %d", n)
	}
	tr.Kill(cmd)
	_ = cmd.Wait()
	deadline = time.Now().Add(30 * time.Second)
	for len(tr.Alive()) > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if left := tr.Alive(); len(left) > 0 {
		t.Fatalf("processes left after Kill: %v", left)
	}
}

func TestMarksAreUnique(t *testing.T) {
	a, b := New(), New()
	if a.Mark() == b.Mark() {
		t.Fatal("two trees share a mark")
	}
}
