package hostagent

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agents-fleet/fleet/hosts"
	"github.com/agents-fleet/fleet/hosts/hoststest"
	"github.com/agents-fleet/fleet/internal/testwait"
	"github.com/agents-fleet/fleet/provider"
	"github.com/agents-fleet/fleet/provider/claude"
	"github.com/agents-fleet/fleet/provider/codex"
	"github.com/agents-fleet/fleet/provider/copilot"
	"github.com/agents-fleet/fleet/provider/local"
)

// testLease is short, so that a host that stops is lost soon; the
// heartbeat comes every third of it.
const testLease = 1500 * time.Millisecond

// testProviders are the local shell and the agent CLIs this machine has
// (scripts/install-agent-clis.sh --env exports where they are).
func testProviders() map[string]provider.Provider {
	provs := map[string]provider.Provider{"local": &local.Provider{}}
	for name, build := range map[string]func(provider.Options) provider.Provider{
		"claude":  func(o provider.Options) provider.Provider { return claude.New(o) },
		"codex":   func(o provider.Options) provider.Provider { return codex.New(o) },
		"copilot": func(o provider.Options) provider.Provider { return copilot.New(o) },
	} {
		env := map[string]string{"claude": "FLEET_TEST_CLAUDE_PATH", "codex": "FLEET_TEST_CODEX_PATH", "copilot": "FLEET_TEST_COPILOT_PATH"}[name]
		if path := os.Getenv(env); path != "" {
			provs[name] = build(provider.Options{Path: path})
		}
	}
	return provs
}

// startAgent joins j's host to its hub; it stops when the test ends.
func startAgent(t *testing.T, j hosts.JoinFile, provs map[string]provider.Provider) (*Agent, *hoststest.Log) {
	t.Helper()
	log, logger := hoststest.NewLog(t, slog.LevelInfo)
	a, err := Start(t.Context(), Config{Join: j, WorkDir: filepath.Join(t.TempDir(), "work"), Providers: provs,
		Env: os.Environ(), Version: "test-build", Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	return a, log
}

// waitState waits until the hub sees host name in state want.
func waitState(t *testing.T, hub *hoststest.Hub, name string, want hosts.State, bound time.Duration) hosts.HostStatus {
	t.Helper()
	var got hosts.HostStatus
	testwait.For(t, bound, "host "+name+" "+string(want), func() bool {
		got, _ = hub.Host(name)
		return got.State == want
	})
	return got
}

// TestJoinedHostIsUpThenLost: a joined host is up, with the slots and
// labels of its join file, the address it joined from and the providers
// it has, with versions; status.json says so to `fleet hosts`. Stopped,
// it is lost once the lease has passed without a heartbeat.
func TestJoinedHostIsUpThenLost(t *testing.T) {
	hub := hoststest.StartHub(t, testLease)
	j := hub.Enrol(t, "h1", "gpu")
	provs := testProviders()
	a, _ := startAgent(t, j, provs)
	up := waitState(t, hub, "h1", hosts.StateUp, testwait.Bound)
	if up.Address != "127.0.0.1" || up.Slots != 2 || !slices.Equal(up.Labels, []string{"gpu"}) || up.LastSeenMs == 0 {
		t.Fatalf("h1 up: %+v", up)
	}
	if len(up.Providers) != len(provs) {
		t.Fatalf("providers %+v, want one for each of %d", up.Providers, len(provs))
	}
	for _, p := range up.Providers {
		if provs[p.Name] == nil || p.Version == "" {
			t.Fatalf("provider %+v", p)
		}
	}
	if i := slices.IndexFunc(up.Providers, func(p hosts.Provider) bool { return p.Name == "local" }); i < 0 || up.Providers[i].Version != "test-build" {
		t.Fatalf("local provider: %+v", up.Providers)
	}
	testwait.For(t, testwait.Bound, "the agent to see the fleet answer", func() bool { return a.Link() == LinkJoined })
	// status.json, as `fleet hosts` reads it.
	testwait.For(t, testwait.Bound, "status.json to show h1 up", func() bool {
		list, err := hosts.List(hub.Dir, time.Now())
		return err == nil && len(list) == 1 && list[0].State == hosts.StateUp && list[0].Address == "127.0.0.1" &&
			len(list[0].Providers) == len(provs)
	})

	a.Close()
	stopped := time.Now()
	lost := waitState(t, hub, "h1", hosts.StateLost, testLease+testwait.Bound)
	if since := time.Since(stopped); since < testLease-2*testLease/3 {
		t.Fatalf("lost %v after the last heartbeat could have been sent; the lease is %v", since, testLease)
	}
	if lost.LastSeenMs == 0 || lost.Address != "127.0.0.1" {
		t.Fatalf("lost host: %+v", lost)
	}
	testwait.For(t, testwait.Bound, "status.json to show h1 lost", func() bool {
		list, err := hosts.List(hub.Dir, time.Now())
		return err == nil && len(list) == 1 && list[0].State == hosts.StateLost
	})
}

// TestRemovedHostIsCutOff: removing a joined host cuts its link, and the
// agent, trying again, is refused and says so.
func TestRemovedHostIsCutOff(t *testing.T) {
	hub := hoststest.StartHub(t, testLease)
	j := hub.Enrol(t, "h1")
	a, log := startAgent(t, j, map[string]provider.Provider{"local": &local.Provider{}})
	waitState(t, hub, "h1", hosts.StateUp, testwait.Bound)
	gen, err := hosts.Remove(hub.Dir, "h1")
	if err != nil {
		t.Fatal(err)
	}
	hub.WaitApplied(t, gen)
	testwait.For(t, testwait.Bound, "the agent to be refused", func() bool { return a.Link() == LinkRefused })
	if !log.Contains("the fleet refused this host's credential") {
		t.Fatal("the refusal was not logged")
	}
	if _, ok := hub.Host("h1"); ok {
		t.Fatal("the hub still serves h1")
	}
}

// TestDrainedHostIsTold: a drained host shows as draining and is told.
func TestDrainedHostIsTold(t *testing.T) {
	hub := hoststest.StartHub(t, testLease)
	j := hub.Enrol(t, "h1")
	_, log := startAgent(t, j, map[string]provider.Provider{"local": &local.Provider{}})
	waitState(t, hub, "h1", hosts.StateUp, testwait.Bound)
	if _, err := hosts.Drain(hub.Dir, "h1"); err != nil {
		t.Fatal(err)
	}
	waitState(t, hub, "h1", hosts.StateDraining, testwait.Bound)
	testwait.For(t, testwait.Bound, "the agent to be told", func() bool { return log.Contains("the fleet drains this host") })
}

// TestHostsAreWalledOff: a host's subscription to another host's subject
// is never forwarded to the hub (its leaf node knows its permissions) and
// could not match anyway: the other host's traffic is in the other
// host's account.
func TestHostsAreWalledOff(t *testing.T) {
	hub := hoststest.StartHub(t, testLease)
	a1, _ := startAgent(t, hub.Enrol(t, "h1"), map[string]provider.Provider{"local": &local.Provider{}})
	a2, _ := startAgent(t, hub.Enrol(t, "h2"), map[string]provider.Provider{"local": &local.Provider{}})
	waitState(t, hub, "h1", hosts.StateUp, testwait.Bound)
	waitState(t, hub, "h2", hosts.StateUp, testwait.Bound)

	var mu sync.Mutex
	got := map[string][]string{}
	record := func(who string) nats.MsgHandler {
		return func(m *nats.Msg) { mu.Lock(); got[who] = append(got[who], m.Subject+" "+string(m.Data)); mu.Unlock() }
	}
	for _, s := range []struct {
		a    *Agent
		who  string
		subj string
	}{{a1, "h1", "fleet.host.h2.work"}, {a1, "h1", "fleet.host.h1.work"}, {a1, "h1", "fleet.host.>"}, {a2, "h2", "fleet.host.h2.work"}} {
		if _, err := s.a.nc.Subscribe(s.subj, record(s.who)); err != nil {
			t.Fatal(err)
		}
		s.a.nc.Flush()
	}
	// The hub's interest in h1's own subject is there once h1's leaf node
	// has forwarded it; then, in h1's account, h2's subject is published
	// first on the same connection, so it would arrive first.
	fleet1, fleet2 := hub.Conn("h1"), hub.Conn("h2")
	testwait.For(t, testwait.Bound, "h1 to receive on its own subject", func() bool {
		fleet1.Publish("fleet.host.h2.work", []byte("not for h1"))
		fleet2.Publish("fleet.host.h2.work", []byte("h2's work"))
		fleet1.Publish("fleet.host.h1.work", []byte("h1's work"))
		fleet1.Flush()
		fleet2.Flush()
		mu.Lock()
		defer mu.Unlock()
		return len(got["h1"]) > 0 && len(got["h2"]) > 0
	})
	mu.Lock()
	defer mu.Unlock()
	for _, m := range got["h1"] {
		if m != "fleet.host.h1.work h1's work" {
			t.Fatalf("h1 received %q", m)
		}
	}
	for _, m := range got["h2"] {
		if m != "fleet.host.h2.work h2's work" {
			t.Fatalf("h2 received %q", m)
		}
	}
}

// TestAnotherFleetsCAIsRefused: a join file whose CA is not the hub's
// never connects: the host trusts nothing else.
func TestAnotherFleetsCAIsRefused(t *testing.T) {
	hub := hoststest.StartHub(t, testLease)
	j := hub.Enrol(t, "h1")
	other, err := hosts.EnsurePKI(filepath.Join(t.TempDir(), "other"), "127.0.0.1:7422")
	if err != nil {
		t.Fatal(err)
	}
	j.CA = string(other)
	a, log := startAgent(t, j, map[string]provider.Provider{"local": &local.Provider{}})
	testwait.For(t, testwait.Bound, "the TLS failure to be logged", func() bool {
		return log.Contains("certificate signed by unknown authority")
	})
	if a.Link() != LinkDown {
		t.Fatalf("link %v, want down", a.Link())
	}
	if h, _ := hub.Host("h1"); h.State != hosts.StateNeverJoined {
		t.Fatalf("h1: %+v", h)
	}
}

func TestIdleTrimReleasesOncePerQuietSpellAndThenEvery(t *testing.T) {
	n := 0
	tr := idleTrim{release: func() { n++ }}
	t0 := time.Unix(1000, 0)
	tr.look(false, t0)
	if n != 0 {
		t.Fatalf("a busy host released memory")
	}
	tr.look(true, t0.Add(time.Second))
	tr.look(true, t0.Add(2*time.Second))
	if n != 1 {
		t.Fatalf("the first looks of a quiet spell released %d times, want 1", n)
	}
	tr.look(true, t0.Add(time.Second+trimEvery))
	if n != 2 {
		t.Fatalf("after trimEvery of quiet: %d releases, want 2", n)
	}
	tr.look(false, t0.Add(time.Second+trimEvery+time.Second))
	tr.look(true, t0.Add(time.Second+trimEvery+2*time.Second))
	if n != 3 {
		t.Fatalf("a new quiet spell after work: %d releases, want 3", n)
	}
}
