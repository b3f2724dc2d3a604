//go:build unix

package agentcli

import (
	"strconv"
	"syscall"
	"testing"
	"time"
)

// A process outside the tree (no mark, a session of its own) that holds
// stderr does not hold Read up past DrainGrace. The script exits once the
// stray runs sleep, without the mark (the reaper's sweep would end it
// before). Unix-only: the stray is made with setsid(1) and killed with
// kill(2).
func TestConnStrayStderrHolder(t *testing.T) {
	c := startSh(t, `setsid env -i /bin/sleep 300 >/dev/null </dev/null &
p=$!
until [ "$(cat /proc/$p/comm)" = sleep ]; do sleep 0.01; done
echo $p; echo bye >&2`)
	start := time.Now()
	lines, err := read(t, c, 1000, bound)
	if err != nil || len(lines) != 1 {
		t.Fatalf("lines %q, err %v", lines, err)
	}
	if pid, err := strconv.Atoi(lines[0]); err == nil {
		defer syscall.Kill(pid, syscall.SIGKILL)
	}
	if d := time.Since(start); d < DrainGrace {
		t.Errorf("Read returned after %v: the stray holder was not waited for", d)
	}
	if c.Stderr() != "bye" {
		t.Errorf("Stderr = %q", c.Stderr())
	}
}
