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

	"github.com/agents-fleet/fleet/e2e/e2etest"
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
func track(d *e2etest.Daemon) {
	go func() { d.Err = d.Cmd.Wait(); close(d.Done) }()
	d.T.Cleanup(func() { terminate(d) })
}

// terminate stops the process if it still runs: SIGTERM (so that the
// fleet stops its tasks), SIGKILL if that does not do it in 5 s.
func terminate(d *e2etest.Daemon) {
	select {
	case <-d.Done:
		return
	default:
	}
	d.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.Done:
	case <-time.After(5 * time.Second):
		d.Cmd.Process.Kill()
		<-d.Done
	}
}

// files are the socket, token and descriptor a registered fleet owns.
func files(d *e2etest.Daemon, e *e2etest.Env) []string {
	return []string{d.Desc.SocketPath, d.Desc.TokenPath, filepath.Join(e.Home, "sockets", d.Desc.ID+".json")}
}

func requireFilesGone(d *e2etest.Daemon, e *e2etest.Env) {
	d.T.Helper()
	for _, f := range files(d, e) {
		if _, err := os.Stat(f); !errors.Is(err, os.ErrNotExist) {
			d.T.Errorf("%s left behind (%v)", f, err)
		}
	}
}

func TestPtyHeadlessWhenStdinIsNotATerminal(t *testing.T) {
	e := e2etest.NewEnv(t)
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devNull.Close()
	cmd := exec.Command(e2etest.Bin(), "run", "--control-socket")
	cmd.Dir = e.Dir
	cmd.Env = e.Environ()
	cmd.Stdin = devNull
	var stdout e2etest.Buffer
	d := &e2etest.Daemon{T: t, Cmd: cmd, Stderr: &e2etest.Buffer{}, Done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = &stdout, d.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	track(d)
	e.WaitRegistered(d)

	// stdin is at EOF from the start: a console would have ended the fleet
	// by now. It still serves a whole task.
	c := d.Dial(protocol.ClientREPL, "sock")
	s := e2etest.Watch(t, c)
	s.WaitFor("replayEnd", e2etest.IsType(protocol.TypeReplayEnd))
	if _, err := c.Prompt("$ echo still-running"); err != nil {
		t.Fatal(err)
	}
	s.WaitFor("transcript", e2etest.TranscriptIs("w1", "still-running"))
	s.WaitFor("completed", e2etest.HubIs("w1", "completed"))
	select {
	case <-d.Done:
		t.Fatalf("fleet exited: %v\n%s", d.Err, d.Stderr)
	default:
	}
	if out := stdout.String(); out != "" {
		t.Errorf("headless fleet printed a console:\n%s", out)
	}
	if !strings.Contains(d.Stderr.String(), "fleet listening") {
		t.Errorf("headless logs are not on stderr:\n%s", d.Stderr)
	}
	d.Stop()
	requireFilesGone(d, e)
}
