package e2etest

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/client"
	"github.com/agents-fleet/fleet/internal/testwait"
	"github.com/agents-fleet/fleet/protocol"
	"github.com/agents-fleet/fleet/registry"
)

// startBound bounds the waits for a started fleet to register and for a
// console to be let in: a minute, for fleets that start agent CLIs on a
// loaded machine; a wait reaches it only when that never happens.
const startBound = time.Minute

// Daemon is a running `fleet run`, or another long-running fleet command
// (`fleet join`). A test that starts the process itself (on a pty, say)
// makes one with Stderr and Done set, and closes Done once Err is set.
type Daemon struct {
	T      testing.TB
	Cmd    *exec.Cmd
	Stderr *Buffer
	Desc   registry.Descriptor // set by WaitRegistered
	Done   chan struct{}       // closed when the process has exited
	Err    error               // its exit error, set before Done closes
}

// Buffer is a bytes.Buffer that a process writes while a test reads it.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *Buffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// Start runs `fleet run --headless args...` and waits for its descriptor.
func (e *Env) Start(args ...string) *Daemon {
	e.T.Helper()
	d := e.Spawn(append([]string{"run", "--headless"}, args...)...)
	e.WaitRegistered(d)
	return d
}

// Spawn starts the binary with args; it is killed, if still running, when
// the test ends.
func (e *Env) Spawn(args ...string) *Daemon {
	e.T.Helper()
	cmd := e.Command(context.Background(), args...)
	d := &Daemon{T: e.T, Cmd: cmd, Stderr: &Buffer{}, Done: make(chan struct{})}
	cmd.Stderr = d.Stderr
	if err := cmd.Start(); err != nil {
		e.T.Fatal(err)
	}
	go func() { d.Err = cmd.Wait(); close(d.Done) }()
	e.T.Cleanup(func() {
		select {
		case <-d.Done:
		default:
			cmd.Process.Kill()
			<-d.Done
		}
	})
	return d
}

// WaitRegistered waits for the descriptor of d's process (which the test
// started itself) to appear in e's registry, and records it in d.Desc.
func (e *Env) WaitRegistered(d *Daemon) {
	e.T.Helper()
	regDir := filepath.Join(e.Home, "sockets")
	if !testwait.Until(startBound, func() bool {
		entries, _ := registry.Live(regDir)
		for _, en := range entries {
			if en.PID == d.Cmd.Process.Pid {
				d.Desc = en.Descriptor
				return true
			}
		}
		select {
		case <-d.Done:
			e.T.Fatalf("fleet exited before registering: %v\n%s", d.Err, d.Stderr)
		default:
		}
		return false
	}) {
		e.T.Fatalf("no descriptor after %v\n%s", startBound, d.Stderr)
	}
}

// WaitAttached waits until the fleet logged that a client called name
// attached: what it broadcasts from then on reaches that client live.
func (d *Daemon) WaitAttached(name string) {
	d.T.Helper()
	if !testwait.Until(time.Minute, func() bool {
		for _, l := range strings.Split(d.Stderr.String(), "\n") {
			if strings.Contains(l, `msg="client attached"`) && strings.Contains(l, " name="+name+" ") {
				return true
			}
		}
		return false
	}) {
		d.T.Fatalf("no client %q attached within a minute:\n%s", name, d.Stderr)
	}
}

// Stop sends SIGTERM and waits for a clean exit.
func (d *Daemon) Stop() {
	d.T.Helper()
	d.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.Done:
		if d.Err != nil {
			d.T.Fatalf("fleet exited with %v\n%s", d.Err, d.Stderr)
		}
	case <-time.After(20 * time.Second):
		d.T.Fatalf("fleet did not stop\n%s", d.Stderr)
	}
}

// Dial attaches a console of kind called name; it is closed when the test
// ends.
func (d *Daemon) Dial(kind protocol.ClientKind, name string) *client.Conn {
	d.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startBound)
	defer cancel()
	c, err := client.Dial(ctx, d.Desc, client.Options{ClientKind: kind, ClientName: name})
	if err != nil {
		d.T.Fatal(err)
	}
	d.T.Cleanup(func() { c.Close() })
	return c
}
