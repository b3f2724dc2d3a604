// Package hoststest starts what tests of hosts need: a hub on loopback in
// a temporary fleet home, enrolled hosts with their join files, a log the
// test can read, and a raw leaf-node connection that speaks the protocol
// itself (to see what the hub enforces, not what a well-behaved leaf node
// refrains from).
package hoststest

import (
	"bytes"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/hosts"
	"github.com/agents-fleet/fleet/internal/testwait"
)

// Log is a logger whose output a test can read; it is printed when the
// test fails.
type Log struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// NewLog returns a Log at level, printed into t's output if t fails.
func NewLog(t testing.TB, level slog.Level) (*Log, *slog.Logger) {
	l := &Log{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("log:\n%s", l.String())
		}
	})
	return l, slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: level}))
}

func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *Log) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// Contains reports whether the log has s.
func (l *Log) Contains(s string) bool { return strings.Contains(l.String(), s) }

// Hub is a running hub in a temporary fleet home.
type Hub struct {
	*hosts.Hub
	Dir string // the hosts directory
	Log *Log
}

// StartHub starts a hub on 127.0.0.1 with lease; it is closed when the
// test ends.
func StartHub(t testing.TB, lease time.Duration) *Hub {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "hosts")
	return StartHubIn(t, dir, lease)
}

// StartHubIn is StartHub in the hosts directory dir.
func StartHubIn(t testing.TB, dir string, lease time.Duration) *Hub {
	t.Helper()
	log, logger := NewLog(t, slog.LevelInfo)
	h, err := hosts.StartHub(hosts.HubConfig{Dir: dir, Listen: "127.0.0.1:0", Lease: lease, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return &Hub{Hub: h, Dir: dir, Log: log}
}

// Enrol enrols host name with the hub, waits until the hub serves it,
// and returns its join file.
func (h *Hub) Enrol(t testing.TB, name string, labels ...string) hosts.JoinFile {
	t.Helper()
	var jf hosts.JoinFile
	gen, err := hosts.Enrol(h.Dir, hosts.Enrolment{Name: name, Slots: 2, Labels: labels, Hub: h.ListenAddr()},
		func(j hosts.JoinFile) error { jf = j; return nil })
	if err != nil {
		t.Fatal(err)
	}
	h.WaitApplied(t, gen)
	return jf
}

// WaitApplied waits until the hub runs with registry generation gen.
func (h *Hub) WaitApplied(t testing.TB, gen int64) {
	t.Helper()
	if running, applied := hosts.WaitApplied(h.Dir, gen, testwait.Bound); !running || !applied {
		t.Fatalf("the hub has not applied generation %d (running %v)", gen, running)
	}
}

// Host is the hub's view of host name (false when it serves none).
func (h *Hub) Host(name string) (hosts.HostStatus, bool) {
	for _, s := range h.Hosts() {
		if s.Name == name {
			return s, true
		}
	}
	return hosts.HostStatus{}, false
}
