package e2e

// The fleet's own terminal, driven through a real pseudo-terminal: `fleet
// run` with its stdin, stdout and stderr on a pty is an interactive console;
// with stdin elsewhere it is headless. The console on a pty is driven in
// pty_unix_test.go; this file holds what the other tests share.

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/protocol"
)

// ptyWait bounds every wait for terminal text or a process exit.
const ptyWait = 10 * time.Second

// ansiSeq matches the escape sequences a terminal interprets (CSI, OSC and
// two-byte escapes) so that matching sees only the visible text.
var ansiSeq = regexp.MustCompile(`\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]`)

func visibleText(raw []byte) string {
	s := ansiSeq.ReplaceAllString(string(raw), "")
	return strings.ReplaceAll(s, "\r", "") // the tty's ONLCR turns \n into \r\n
}

// ptyOutput collects what the fleet writes to its terminal and wakes
// waiters when more arrives.
type ptyOutput struct {
	mu      sync.Mutex
	raw     bytes.Buffer
	changed chan struct{} // closed and replaced on each write
}

func (o *ptyOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.raw.Write(p)
	close(o.changed)
	o.changed = make(chan struct{})
	return len(p), nil
}

// snapshot returns the visible text so far and a channel closed when more
// arrives.
func (o *ptyOutput) snapshot() (string, <-chan struct{}) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return visibleText(o.raw.Bytes()), o.changed
}

// track waits for a started daemon's process on its own goroutine and makes
// sure it is gone when the test ends.
func track(d *daemon) {
	go func() { d.err = d.cmd.Wait(); close(d.done) }()
	d.t.Cleanup(d.terminate)
}

// terminate stops the process if it still runs: SIGTERM (so that the
// fleet stops its tasks), SIGKILL if that does not do it in 5 s.
func (d *daemon) terminate() {
	select {
	case <-d.done:
		return
	default:
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(5 * time.Second):
		d.cmd.Process.Kill()
		<-d.done
	}
}

// files are the socket, token and descriptor a registered fleet owns.
func (d *daemon) files(e *env) []string {
	return []string{d.desc.SocketPath, d.desc.TokenPath, filepath.Join(e.home, "sockets", d.desc.ID+".json")}
}

func (d *daemon) requireFilesGone(e *env) {
	d.t.Helper()
	for _, f := range d.files(e) {
		if _, err := os.Stat(f); !errors.Is(err, os.ErrNotExist) {
			d.t.Errorf("%s left behind (%v)", f, err)
		}
	}
}

func transcriptIs(agent, text string) func(protocol.Message) bool {
	return func(m protocol.Message) bool {
		tr, ok := m.(*protocol.Transcript)
		return ok && tr.Agent == agent && tr.Text == text
	}
}

func hubIs(from, kind string) func(protocol.Message) bool {
	return func(m protocol.Message) bool {
		h, ok := m.(*protocol.HubEvent)
		return ok && h.From == from && h.Kind == kind
	}
}

func TestPtyHeadlessWhenStdinIsNotATerminal(t *testing.T) {
	e := newEnv(t)
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devNull.Close()
	cmd := exec.Command(fleetBin, "run", "--control-socket")
	cmd.Dir = e.cwd
	cmd.Env = e.environ()
	cmd.Stdin = devNull
	var stdout syncBuffer
	d := &daemon{t: t, cmd: cmd, stderr: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = &stdout, d.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	track(d)
	e.waitRegistered(d)

	// stdin is at EOF from the start: a console would have ended the fleet
	// by now. It still serves a whole task.
	c := d.dial(protocol.ClientREPL, "sock")
	s := watch(t, c)
	s.waitFor("replayEnd", isType(protocol.TypeReplayEnd))
	if _, err := c.Prompt("$ echo still-running"); err != nil {
		t.Fatal(err)
	}
	s.waitFor("transcript", transcriptIs("w1", "still-running"))
	s.waitFor("completed", hubIs("w1", "completed"))
	select {
	case <-d.done:
		t.Fatalf("fleet exited: %v\n%s", d.err, d.stderr)
	default:
	}
	if out := stdout.String(); out != "" {
		t.Errorf("headless fleet printed a console:\n%s", out)
	}
	if !strings.Contains(d.stderr.String(), "fleet listening") {
		t.Errorf("headless logs are not on stderr:\n%s", d.stderr)
	}
	d.stop()
	d.requireFilesGone(e)
}
