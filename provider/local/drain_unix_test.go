//go:build unix

package local

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/internal/testwait"
	"github.com/agents-fleet/fleet/provider"
)

// heldHost holds its first Output until the command has ended and the
// drain grace has passed several times over, as the engine does while a
// console catches up on a flood.
type heldHost struct {
	fakeHost
	ended string // a file the command creates as it ends
	once  sync.Once
	t     *testing.T
}

func (h *heldHost) Event(ev provider.Event) {
	if _, ok := ev.(provider.Output); ok {
		h.once.Do(func() {
			if !testwait.Until(time.Minute, func() bool { _, err := os.Stat(h.ended); return err == nil }) {
				h.t.Error("the command did not end in a minute")
			}
			// At least this long: a loaded machine only makes it longer.
			time.Sleep(5 * drainGrace)
		})
	}
	h.fakeHost.Event(ev)
}

// The lines a command printed last, still in the pipe when it ended, are
// read however long the engine held the reader back: the grace after the
// end counts waiting for output, not handing it on. They were lost when a
// flood met a slow console (the reader was cut off two seconds after the
// command ended).
func TestLastLinesSurviveAHeldBackReader(t *testing.T) {
	defer setDrain(t, 100*time.Millisecond, drainCap)()
	ended := filepath.Join(t.TempDir(), "ended")
	h := &heldHost{ended: ended, t: t}
	// 5,000 lines (24 KB) fit in the pipe: the command ends at once.
	res := runIn(t, context.Background(), &Provider{}, "seq 1 5000; touch "+ended, &h.fakeHost, h)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if len(h.lines) != 5000 || h.lines[4999] != "stdout:5000" {
		t.Fatalf("%d lines, the last %q", len(h.lines), h.lines[len(h.lines)-1])
	}
	if len(h.notes) != 0 {
		t.Fatalf("notes: %q", h.notes)
	}
}

// A child that left the command's process group and keeps the output pipe
// open, silent or printing without end, does not hold the turn open.
func TestEscapedChildDoesNotHoldTheTurn(t *testing.T) {
	requireSetsid(t)
	defer setDrain(t, 200*time.Millisecond, 256<<10)()
	for name, child := range map[string]string{"silent": "sleep 60", "printing": "yes"} {
		t.Run(name, func(t *testing.T) {
			pidFile := filepath.Join(t.TempDir(), "pid")
			h := &fakeHost{}
			res := runCmd(t, fmt.Sprintf("echo before; setsid sh -c 'echo $$ > %s; exec %s' & while [ ! -s %s ]; do :; done", pidFile, child, pidFile), h)
			if pid, err := os.ReadFile(pidFile); err == nil {
				if n, err := strconv.Atoi(strings.TrimSpace(string(pid))); err == nil {
					syscall.Kill(n, syscall.SIGKILL)
				}
			}
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			if len(h.lines) == 0 || h.lines[0] != "stdout:before" {
				t.Fatalf("lines: %q", h.lines[:min(3, len(h.lines))])
			}
			if len(h.notes) != 1 || !strings.Contains(h.notes[0], "stopped reading") {
				t.Fatalf("notes: %q", h.notes)
			}
			// yes prints 2 bytes a line: what was read after the end is
			// bounded by drainCap plus what the pipe held before.
			if len(h.lines) > int(drainCap+2<<20)/2 {
				t.Fatalf("%d lines read from a child that escaped", len(h.lines))
			}
		})
	}
}

// setDrain sets the drain bounds for a test and returns what restores them.
func setDrain(t *testing.T, grace time.Duration, limit int64) func() {
	g, c := drainGrace, drainCap
	drainGrace, drainCap = grace, limit
	return func() { drainGrace, drainCap = g, c }
}

func requireSetsid(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("setsid is not installed")
	}
}
