package hosts_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/agents-fleet/fleet/hosts"
	"github.com/agents-fleet/fleet/hosts/hoststest"
	"github.com/agents-fleet/fleet/internal/testwait"
)

const authViolation = "-ERR 'Authorization Violation'"

// TestHubRefusesUnknownCredentials: with no host enrolled, and with one,
// a leaf node with a credential the fleet did not mint is refused.
func TestHubRefusesUnknownCredentials(t *testing.T) {
	hub := hoststest.StartHub(t, hosts.DefaultLease)
	// A join file for a host nobody enrolled: the hub's address and CA,
	// a seed of its own.
	kp, _ := nkeys.CreateUser()
	seed, _ := kp.Seed()
	caPEM, err := hosts.EnsurePKI(hub.Dir)
	if err != nil {
		t.Fatal(err)
	}
	stranger := hosts.JoinFile{Name: "h9", Hub: hub.ListenAddr(), CA: string(caPEM), Seed: string(seed)}
	if _, got := hoststest.DialLeaf(t, stranger, string(seed), nil); got != authViolation {
		t.Fatalf("no host enrolled: %q, want %q", got, authViolation)
	}
	j := hub.Enrol(t, "h1")
	if _, got := hoststest.DialLeaf(t, j, string(seed), nil); got != authViolation {
		t.Fatalf("another host's name, a stranger's key: %q, want %q", got, authViolation)
	}
	if l, got := hoststest.DialLeaf(t, j, j.Seed, nil); got != "PONG" {
		t.Fatalf("h1's own credential: %q, want PONG", got)
	} else {
		l.Close()
	}
}

// TestHostSubjectPermissions: a host's credential allows its own subjects
// only. Subscribing to, or publishing on, another host's subject, a
// subject outside the hosts prefix, or the JetStream API that makes or
// deletes streams, is a permission violation: the hub says so and closes
// the connection.
func TestHostSubjectPermissions(t *testing.T) {
	hub := hoststest.StartHub(t, hosts.DefaultLease)
	j1 := hub.Enrol(t, "h1")
	hub.Enrol(t, "h2")

	l, got := hoststest.DialLeaf(t, j1, j1.Seed, nil)
	if got != "PONG" {
		t.Fatalf("connect: %q", got)
	}
	// Its own subjects, and inboxes, are allowed.
	l.Send("LS+ fleet.host.h1.work")
	l.Send("LS+ _INBOX.abc.*")
	l.Send("LMSG fleet.host.h1.hb 2")
	l.Send("{}")
	l.Send("PING")
	if got := l.Next(); got != "PONG" {
		t.Fatalf("own subjects: %q, want PONG", got)
	}
	l.Close()

	for _, c := range []struct{ send, want string }{
		{"LS+ fleet.host.h2.work", `-ERR 'Permissions Violation for Subscription to "fleet.host.h2.work"'`},
		{"LS+ fleet.control", `-ERR 'Permissions Violation for Subscription to "fleet.control"'`},
		{"LMSG fleet.host.h2.hb 2\r\n{}", `-ERR 'Permissions Violation for Publish to "fleet.host.h2.hb"'`},
		{"LMSG fleet.frames 2\r\n{}", `-ERR 'Permissions Violation for Publish to "fleet.frames"'`},
		{"LMSG $JS.API.STREAM.CREATE.mine _INBOX.x 2\r\n{}", `-ERR 'Permissions Violation for Publish to "$JS.API.STREAM.CREATE.mine"'`},
		{"LMSG $JS.API.STREAM.DELETE.OBJ_bundles _INBOX.x 2\r\n{}", `-ERR 'Permissions Violation for Publish to "$JS.API.STREAM.DELETE.OBJ_bundles"'`},
	} {
		l, got := hoststest.DialLeaf(t, j1, j1.Seed, nil)
		if got != "PONG" {
			t.Fatalf("connect: %q", got)
		}
		l.Send(c.send)
		l.Send("PING")
		if got := l.Next(); got != c.want {
			t.Errorf("%s: %q, want %q", c.send, got, c.want)
		}
		if got := l.Next(); got != "" {
			t.Errorf("%s: the connection stayed open (%q)", c.send, got)
		}
	}
}

// TestRemovedHostIsCutOffAndRefused: hosts.json changes while the hub
// runs; a removed host's connection is closed at once and its credential
// refused from then on.
func TestRemovedHostIsCutOffAndRefused(t *testing.T) {
	hub := hoststest.StartHub(t, hosts.DefaultLease)
	j := hub.Enrol(t, "h1")
	l, got := hoststest.DialLeaf(t, j, j.Seed, nil)
	if got != "PONG" {
		t.Fatalf("connect: %q", got)
	}
	gen, err := hosts.Remove(hub.Dir, "h1")
	if err != nil {
		t.Fatal(err)
	}
	hub.WaitApplied(t, gen)
	// Applied means cut off already: the connection is closed.
	if got := l.Next(); got != "" {
		t.Fatalf("after removal the connection gave %q, want it closed", got)
	}
	if _, got := hoststest.DialLeaf(t, j, j.Seed, nil); got != authViolation {
		t.Fatalf("removed host's credential: %q, want %q", got, authViolation)
	}
	if _, ok := hub.Host("h1"); ok {
		t.Fatal("the hub still serves h1")
	}
	if !hub.Log.Contains("host cut off") {
		t.Fatal("the cut was not logged")
	}
}

// TestRemovedHostsDataGoes: a removed host's streams go with it; a host
// enrolled again under its name starts empty, with JetStream working.
func TestRemovedHostsDataGoes(t *testing.T) {
	hub := hoststest.StartHub(t, hosts.DefaultLease)
	hub.Enrol(t, "h1")
	ctx := t.Context()
	makeStream := func() jetstream.JetStream {
		t.Helper()
		js, err := jetstream.New(hub.Conn("h1"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "work", Subjects: []string{"fleet.host.h1.work"}, MaxBytes: 1 << 20}); err != nil {
			t.Fatal(err)
		}
		if _, err := js.Publish(ctx, "fleet.host.h1.work", []byte("task")); err != nil {
			t.Fatal(err)
		}
		return js
	}
	makeStream()
	// The store is in the hosts directory, a folder per host account.
	store := filepath.Join(hub.Dir, "jetstream", "host-h1", "streams", "work")
	if _, err := os.Stat(store); err != nil {
		t.Fatalf("h1's stream is not stored in %s: %v", store, err)
	}
	gen, _ := hosts.Remove(hub.Dir, "h1")
	hub.WaitApplied(t, gen)
	if hub.Conn("h1") != nil {
		t.Fatal("the hub kept a connection into the removed host's account")
	}
	if _, err := os.Stat(filepath.Dir(filepath.Dir(store))); !os.IsNotExist(err) {
		t.Fatalf("the removed host's store is still there: %v", err)
	}
	hub.Enrol(t, "h1")
	js, err := jetstream.New(hub.Conn("h1"))
	if err != nil {
		t.Fatal(err)
	}
	names := js.StreamNames(ctx)
	var left []string
	for n := range names.Name() {
		left = append(left, n)
	}
	if len(left) != 0 {
		t.Fatalf("streams of the removed host came back: %v", left)
	}
	makeStream()
}

// TestHubIsOnePerFleetHome: a second hub in the same fleet home is
// refused, naming the lock.
func TestHubIsOnePerFleetHome(t *testing.T) {
	hub := hoststest.StartHub(t, hosts.DefaultLease)
	_, err := hosts.StartHub(hosts.HubConfig{Dir: hub.Dir, Listen: "127.0.0.1:0"})
	if err == nil || !strings.Contains(err.Error(), "hub.lock") {
		t.Fatalf("second hub: %v", err)
	}
}

// TestHostClaimingToBeAHubGainsNothing: a leaf node may say it is the hub
// (the fleet then takes the spoke's part on that connection, and drops
// what is not allowed instead of closing it): what it sends outside its
// permissions still goes nowhere.
func TestHostClaimingToBeAHubGainsNothing(t *testing.T) {
	hub := hoststest.StartHub(t, hosts.DefaultLease)
	j := hub.Enrol(t, "h1")
	hub.Enrol(t, "h2")
	got := make(chan string, 16)
	sub, err := hub.Conn("h1").Subscribe("fleet.>", func(m *nats.Msg) { got <- m.Subject })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	hub.Conn("h1").Flush()
	l, first := hoststest.DialLeaf(t, j, j.Seed, map[string]any{"is_hub": true})
	if first != "PONG" {
		t.Fatalf("connect: %q", first)
	}
	// In order on one connection: what is refused comes before what is
	// allowed, so it would have arrived first.
	l.Send("LMSG fleet.host.h2.hb 2\r\n{}")
	l.Send("LMSG fleet.frames 2\r\n{}")
	l.Send("LMSG fleet.host.h1.work 2\r\n{}")
	l.Send("PING")
	select {
	case s := <-got:
		if s != "fleet.host.h1.work" {
			t.Fatalf("the fleet received %q from h1", s)
		}
	case <-time.After(testwait.Bound):
		t.Fatal("the allowed message did not arrive")
	}
}

// TestHostLeafConnectionsAreBounded: one credential holds at most a few
// leaf connections at once (room for stale ones a cut link leaves).
func TestHostLeafConnectionsAreBounded(t *testing.T) {
	hub := hoststest.StartHub(t, hosts.DefaultLease)
	j := hub.Enrol(t, "h1")
	for i := range 4 {
		if _, got := hoststest.DialLeaf(t, j, j.Seed, nil); got != "PONG" {
			t.Fatalf("connection %d: %q", i+1, got)
		}
	}
	if _, got := hoststest.DialLeaf(t, j, j.Seed, nil); got != "-ERR 'maximum account active connections exceeded'" {
		t.Fatalf("a fifth connection: %q", got)
	}
}

// TestHostRemovedWhileNoFleetRuns: a host removed while no fleet runs the
// hub is refused, and its data deleted, when the next one starts; what
// the last hub heard of the others carries over (seen before: lost, not
// never joined).
func TestHostRemovedWhileNoFleetRuns(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "hosts")
	first, err := hosts.StartHub(hosts.HubConfig{Dir: dir, Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	hub := &hoststest.Hub{Hub: first, Dir: dir}
	j := hub.Enrol(t, "h1")
	j2 := hub.Enrol(t, "h2")
	js, err := jetstream.New(hub.Conn("h1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "work", Subjects: []string{"fleet.host.h1.work"}, MaxBytes: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	// h2 heartbeats once, by hand, so the hub has seen it.
	if _, err := hub.Conn("h2").Request("fleet.host.h2.hb", []byte(`{"slots":1,"labels":[],"providers":[]}`), testwait.Bound); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, testwait.Bound, "h2 up", func() bool { h, _ := hub.Host("h2"); return h.State == hosts.StateUp })
	first.Close()
	if list, _ := hosts.List(dir, time.Now()); len(list) != 2 || list[1].State != hosts.StateLost {
		t.Fatalf("with no fleet: %+v", list)
	}
	if _, err := hosts.Remove(dir, "h1"); err != nil {
		t.Fatal(err)
	}

	next := hoststest.StartHubIn(t, dir, hosts.DefaultLease)
	if _, err := os.Stat(filepath.Join(dir, "jetstream", "host-h1")); !os.IsNotExist(err) {
		t.Fatalf("the removed host's store is still there: %v", err)
	}
	j.Hub, j2.Hub = next.ListenAddr(), next.ListenAddr() // a new port
	if _, got := hoststest.DialLeaf(t, j, j.Seed, nil); got != authViolation {
		t.Fatalf("removed h1: %q", got)
	}
	if h, _ := next.Host("h2"); h.State != hosts.StateLost || h.LastSeenMs == 0 {
		t.Fatalf("h2 after a restart: %+v", h)
	}
	if l, got := hoststest.DialLeaf(t, j2, j2.Seed, nil); got != "PONG" {
		t.Fatalf("h2: %q", got)
	} else {
		l.Close()
	}
}

// TestReEnrolledHostIsANewHost: a host removed and enrolled again before
// the hub applied either change (one change of hosts.json) is cut off,
// its old credential refused and its data gone; the new one joins.
func TestReEnrolledHostIsANewHost(t *testing.T) {
	hub := hoststest.StartHub(t, hosts.DefaultLease)
	old := hub.Enrol(t, "h1")
	js, err := jetstream.New(hub.Conn("h1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "work", Subjects: []string{"fleet.host.h1.work"}, MaxBytes: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	l, got := hoststest.DialLeaf(t, old, old.Seed, nil)
	if got != "PONG" {
		t.Fatalf("connect: %q", got)
	}
	// Enrol h1 anew in a registry of its own, and put its entry in the
	// hub's hosts.json in one write.
	other := filepath.Join(t.TempDir(), "hosts")
	var fresh hosts.JoinFile
	if _, err := hosts.Enrol(other, hosts.Enrolment{Name: "h1", Slots: 1, Hub: hub.ListenAddr()}, func(j hosts.JoinFile) error { fresh = j; return nil }); err != nil {
		t.Fatal(err)
	}
	newReg, _ := hosts.LoadRegistry(other)
	reg, _ := hosts.LoadRegistry(hub.Dir)
	reg.Hosts = newReg.Hosts
	reg.Generation++
	data, _ := json.Marshal(reg)
	tmp := filepath.Join(hub.Dir, ".hosts.json.test")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(hub.Dir, "hosts.json")); err != nil {
		t.Fatal(err)
	}
	hub.WaitApplied(t, reg.Generation)
	if got := l.Next(); got != "" {
		t.Fatalf("the old credential's connection gave %q, want it closed", got)
	}
	if _, got := hoststest.DialLeaf(t, old, old.Seed, nil); got != authViolation {
		t.Fatalf("the old credential: %q", got)
	}
	fresh.CA = old.CA // the hub's CA, not the other directory's
	if l, got := hoststest.DialLeaf(t, fresh, fresh.Seed, nil); got != "PONG" {
		t.Fatalf("the new credential: %q", got)
	} else {
		l.Close()
	}
	js, err = jetstream.New(hub.Conn("h1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Stream(t.Context(), "work"); err == nil {
		t.Fatal("the old h1's stream is still there")
	}
	if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "work", Subjects: []string{"fleet.host.h1.work"}, MaxBytes: 1 << 20}); err != nil {
		t.Fatalf("JetStream for the new h1: %v", err)
	}
}
