package tui

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/controlsock"
	"github.com/agents-fleet/fleet/internal/testwait"
	"github.com/agents-fleet/fleet/protocol"
	"github.com/agents-fleet/fleet/registry"
)

// The app's connector against real fleets: control sockets served by
// controlsock in this process, announced by real descriptors in a registry
// directory, stopped the way fleet run stops (descriptor first, then the
// socket).

// followBound is the product's promise: a restarted fleet is attached
// within this long of its descriptor appearing.
const followBound = 5 * time.Second

type nopBackend struct{}

func (nopBackend) Prompt(*protocol.UserMessage)             {}
func (nopBackend) AnswerConfirm(string, bool, string) error { return nil }
func (nopBackend) AnswerAsk(string, string, string) error   { return nil }
func (nopBackend) Native(context.Context, *protocol.NativeRequest) protocol.NativeResult {
	return protocol.NativeResult{Kind: protocol.NativeKindError, Code: "test", Message: "no native root here"}
}

type testFleet struct {
	desc registry.Descriptor
	home string
	stop func() // unregisters, then shuts the socket down
}

// fleetHome is a short fleet home (socket paths must fit sun_path) with
// its registry directory.
func fleetHome(t *testing.T) (home, regDir string) {
	t.Helper()
	home, err := os.MkdirTemp("", "tui")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	return home, filepath.Join(home, "sockets")
}

// startFleet serves a control socket for a fleet named name in folder cwd,
// whose session is sid, and registers it.
func startFleet(t *testing.T, home, name, cwd, sid string) *testFleet {
	t.Helper()
	id, err := registry.NewID(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if err := registry.EnsurePrivateDir(registry.ControlDir(home)); err != nil {
		t.Fatal(err)
	}
	token, err := registry.WriteToken(registry.TokenPath(home, id))
	if err != nil {
		t.Fatal(err)
	}
	srv := controlsock.New(controlsock.Config{Token: token, Backend: nopBackend{},
		Welcome: protocol.Welcome{SessionID: sid, SessionName: name, Cwd: cwd}})
	ln, err := controlsock.Listen(registry.SocketPath(home, id))
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { srv.Serve(ln); close(served) }()
	f := &testFleet{home: home, desc: registry.Descriptor{
		SchemaVersion: registry.SchemaVersion, ID: id, PID: os.Getpid(), Name: name, Cwd: cwd,
		SocketPath: registry.SocketPath(home, id), TokenPath: registry.TokenPath(home, id),
		FleetHome: home, StartedAt: time.Now().UnixMilli(), ProtocolVersion: registry.ProtocolVersion,
	}}
	regDir := filepath.Join(home, "sockets")
	var once sync.Once
	f.stop = func() {
		once.Do(func() {
			if err := registry.Remove(regDir, id); err != nil {
				t.Error(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			srv.Shutdown(ctx)
			<-served
			os.Remove(f.desc.TokenPath)
		})
	}
	t.Cleanup(f.stop)
	if _, err := registry.Write(regDir, f.desc); err != nil {
		t.Fatal(err)
	}
	return f
}

// runApp runs the connector and the watcher of a console that wants fleet
// want, as Run does without the terminal; the test goroutine owns the
// model (through drain).
func runApp(t *testing.T, regDir, want string) *app {
	t.Helper()
	a := newApp(Config{RegistryDir: regDir, NoColor: true})
	a.want = want
	a.list()
	a.model.Select(want)
	ctx, cancel := context.WithCancel(context.Background())
	wait := a.start(ctx)
	t.Cleanup(func() { cancel(); wait() })
	return a
}

// waitModel folds what the app buffered until cond holds (it may fail the
// test at once) and returns when it did.
func waitModel(t *testing.T, a *app, what string, cond func(m *Model) bool) time.Time {
	t.Helper()
	if !testwait.Until(60*time.Second, func() bool { a.drain(); return cond(a.model) }) {
		a.model.Resize(100, 12)
		t.Fatalf("timed out waiting for %s; the console shows:\n%s", what, a.model.View())
	}
	return time.Now()
}

// attachedTo says whether the console shows fleet f attached, in session sid.
func attachedTo(f *testFleet, sid string) func(m *Model) bool {
	return func(m *Model) bool {
		c := m.cur()
		return m.Selected() == f.desc.ID && c != nil && c.conn == connUp && c.fold.Welcome != nil && c.fold.Welcome.SessionID == sid
	}
}

// TestConsoleFollowsRestartedFleet: a fleet stopped and started again in
// its folder, six times over, with an unrelated fleet listed first. While
// it is down the console shows it stopped (never the unrelated fleet), and
// each new fleet is attached within followBound of its descriptor
// appearing, however many reconnects came before.
func TestConsoleFollowsRestartedFleet(t *testing.T) {
	home, regDir := fleetHome(t)
	repo, elsewhere := t.TempDir(), t.TempDir()
	other := startFleet(t, home, "other", elsewhere, "s-other")
	cur := startFleet(t, home, "repo3", repo, "s-0")
	a := runApp(t, regDir, cur.desc.ID)
	waitModel(t, a, "the first fleet attached", attachedTo(cur, "s-0"))

	notOther := func(m *Model) {
		if m.Selected() == other.desc.ID {
			t.Fatalf("the console switched to the unrelated fleet %s", other.desc.ID)
		}
	}
	var worst time.Duration
	for round := 1; round <= 6; round++ {
		cur.stop()
		old := cur.desc.ID
		waitModel(t, a, "the stopped fleet shown as down", func(m *Model) bool {
			notOther(m)
			c := m.cur()
			return m.Selected() == old && c != nil && c.conn == connDown
		})
		sid := "s-" + string(rune('0'+round))
		cur = startFleet(t, home, "repo3", repo, sid) // without --resume: a new session
		registered := time.Now()
		at := waitModel(t, a, "the restarted fleet attached", func(m *Model) bool {
			notOther(m)
			return attachedTo(cur, sid)(m)
		})
		took := at.Sub(registered)
		worst = max(worst, took)
		if took > followBound {
			t.Errorf("round %d: attached %v after the descriptor appeared, want under %v", round, took, followBound)
		}
	}
	t.Logf("slowest re-attach after the descriptor appeared: %v", worst)
	a.model.Resize(100, 12)
	mustContain(t, a.model.View(), "fleet repo3", "session s-6")
	mustNotContain(t, a.model.View(), "RECONNECTING", "CONNECTING")
}

// TestConsoleFollowsByFolder: the successor is found by folder. A fleet
// already running beside the stopped one under another name is not it; a
// fleet started afterwards in the same folder is, even under another name
// (a resumed session keeps its own) and even when its folder is reached
// through a symlink.
func TestConsoleFollowsByFolder(t *testing.T) {
	home, regDir := fleetHome(t)
	repo := t.TempDir()
	link := filepath.Join(t.TempDir(), "via-link")
	if err := os.Symlink(repo, link); err != nil {
		t.Fatal(err)
	}
	cur := startFleet(t, home, "repo3", repo, "s-a")
	sibling := startFleet(t, home, "repo3-2", repo, "s-sibling")
	a := runApp(t, regDir, cur.desc.ID)
	waitModel(t, a, "the first fleet attached", attachedTo(cur, "s-a"))

	cur.stop()
	old := cur.desc.ID
	waitModel(t, a, "the stopped fleet shown as stopped", func(m *Model) bool {
		if m.Selected() == sibling.desc.ID {
			t.Fatalf("the console followed a fleet that ran beside the stopped one")
		}
		c := m.cur()
		return m.Selected() == old && c != nil && c.conn == connDown && strings.Contains(c.connErr, "stopped")
	})
	next := startFleet(t, home, "older-session", link, "s-resumed")
	waitModel(t, a, "the fleet started in the folder attached", attachedTo(next, "s-resumed"))
}

// TestStaleListingIsDropped: the watcher and the connector list the
// registry concurrently, so a listing read before the fleet stopped can
// arrive after one read since. It must neither bring the stopped fleet
// back nor hide the fleet started in its folder afterwards (under another
// name, so only its start time makes it the successor).
func TestStaleListingIsDropped(t *testing.T) {
	dir := t.TempDir()
	entry := func(id, name string, started time.Time) registry.Entry {
		return registry.Entry{Alive: true, Descriptor: registry.Descriptor{ID: id, Name: name, Cwd: dir, StartedAt: started.UnixMilli()}}
	}
	t0 := time.Now()
	old := entry("old", "repo3", t0)
	a := newApp(Config{NoColor: true})
	a.want = old.ID
	a.listed([]registry.Entry{old}, t0)
	a.listed(nil, t0.Add(2*time.Second)) // the fleet stopped
	next := entry("next", "other-name", t0.Add(3*time.Second))

	a.listed([]registry.Entry{old}, t0.Add(time.Second)) // read before it stopped, handed over late
	a.mu.Lock()
	stale := slices.ContainsFunc(a.live, func(e registry.Entry) bool { return e.ID == old.ID })
	a.mu.Unlock()
	if stale {
		t.Fatal("a listing read before the fleet stopped brought it back")
	}
	a.listed([]registry.Entry{next}, t0.Add(4*time.Second))
	a.mu.Lock()
	want := a.want
	a.mu.Unlock()
	if want != next.ID {
		t.Fatalf("the console wants %q after the fleet restarted in its folder, want %q", want, next.ID)
	}
}
