package hosts

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/e2e/e2etest"
	"github.com/agents-fleet/fleet/internal/testwait"
)

// netns is a network namespace the test made; it goes (with the veth end
// in it) when the test ends.
type netns string

// requireRoot skips a test that needs root, or fails it under CI (which
// runs as root to make network namespaces).
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("this test makes network namespaces and needs root; .ci/run runs as root")
		}
		t.Skip("needs root (network namespaces)")
	}
	e2etest.RequireTool(t, "ip")
}

// ipCmd runs ip with args and fails the test if it fails.
func ipCmd(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// nsNames are the names twoNamespaces gives, for tag, to namespaces a and
// b and to the veth ends in them (va in a, vb in b). They carry the test
// process's pid, so that runs side by side do not meet, and the tag, so
// that the tests of one run do not (a tag of at most 6 characters keeps a
// veth name within IFNAMSIZ).
func nsNames(tag string) (a, b netns, va, vb string) {
	id := os.Getpid() % 100000
	return netns(fmt.Sprintf("fleet%d%s-a", id, tag)), netns(fmt.Sprintf("fleet%d%s-b", id, tag)),
		fmt.Sprintf("fl%d%sa", id, tag), fmt.Sprintf("fl%d%sb", id, tag)
}

// twoNamespaces makes namespaces a and b (named by nsNames(tag)) joined by
// a veth pair, a at addrA and b at addrB (CIDR), loopback up in each. They
// are deleted by name when the test ends.
func twoNamespaces(t *testing.T, tag, addrA, addrB string) (netns, netns) {
	t.Helper()
	a, b, va, vb := nsNames(tag)
	for _, ns := range []netns{a, b} {
		exec.Command("ip", "netns", "del", string(ns)).Run() // left by a killed run
		ipCmd(t, "netns", "add", string(ns))
		t.Cleanup(func() { exec.Command("ip", "netns", "del", string(ns)).Run() })
	}
	ipCmd(t, "link", "add", va, "type", "veth", "peer", "name", vb)
	ipCmd(t, "link", "set", va, "netns", string(a))
	ipCmd(t, "link", "set", vb, "netns", string(b))
	for _, side := range []struct {
		ns        netns
		dev, cidr string
	}{{a, va, addrA}, {b, vb, addrB}} {
		ipCmd(t, "-n", string(side.ns), "addr", "add", side.cidr, "dev", side.dev)
		ipCmd(t, "-n", string(side.ns), "link", "set", side.dev, "up")
		ipCmd(t, "-n", string(side.ns), "link", "set", "lo", "up")
	}
	return a, b
}

// in runs e's fleet commands in namespace ns.
func in(e *e2etest.Env, ns netns) *e2etest.Env {
	e.Wrap = []string{"ip", "netns", "exec", string(ns)}
	return e
}

// hostJSON is one host of `fleet hosts --json`.
type hostJSON struct {
	Name       string   `json:"name"`
	State      string   `json:"state"`
	Slots      int      `json:"slots"`
	Labels     []string `json:"labels"`
	Running    int      `json:"running"`
	LastSeenMs int64    `json:"lastSeenMs"`
	Address    string   `json:"address"`
	Providers  []struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	} `json:"providers"`
}

func listHosts(e *e2etest.Env) []hostJSON {
	e.T.Helper()
	out, stderr, code := e.Fleet("", "hosts", "--json")
	if code != 0 {
		e.T.Fatalf("fleet hosts --json: exit %d\n%s", code, stderr)
	}
	var list []hostJSON
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		e.T.Fatalf("fleet hosts --json: %v\n%s", err, out)
	}
	return list
}

// TestHostsJoinAcrossNamespaces: a fleet listens for hosts in one network
// namespace; a host enrolled with `fleet hosts add` joins from another,
// over the veth pair, and `fleet hosts --json` shows it up, with the
// address it joined from and the providers it has. Removed, it is cut off
// and its credential refused.
func TestHostsJoinAcrossNamespaces(t *testing.T) {
	requireRoot(t)
	nsA, nsB := twoNamespaces(t, "", "10.231.0.1/30", "10.231.0.2/30")
	const hub = "10.231.0.1:7422"

	fleet := in(e2etest.NewEnv(t), nsA)
	d := fleet.Start("--control-socket", "--hosts-listen", hub)
	joinFile := filepath.Join(t.TempDir(), "h1.join")
	if _, stderr, code := fleet.Fleet("", "hosts", "add", "h1", "--slots", "3", "--labels", "gpu", "--out", joinFile); code != 0 ||
		!strings.Contains(stderr, "h1 can join the running fleet now") {
		t.Fatalf("fleet hosts add: exit %d\n%s", code, stderr)
	}

	// The host has a fleet home of its own: its config names the agent
	// CLIs this machine has.
	host := in(e2etest.NewEnv(t), nsB)
	want := []string{"local"}
	provs := map[string]map[string]string{}
	for name, v := range map[string]string{"claude": "FLEET_TEST_CLAUDE_PATH", "codex": "FLEET_TEST_CODEX_PATH", "copilot": "FLEET_TEST_COPILOT_PATH"} {
		if path := os.Getenv(v); path != "" {
			provs[name] = map[string]string{"path": path}
			want = append(want, name)
		}
	}
	slices.Sort(want)
	cfg, _ := json.Marshal(map[string]any{"providers": provs})
	if err := os.WriteFile(filepath.Join(host.Home, "config.json"), cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	join := host.Spawn("join", joinFile, "--work-dir", filepath.Join(t.TempDir(), "work"))

	var h1 hostJSON
	if !testwait.Until(time.Minute, func() bool {
		list := listHosts(fleet)
		if len(list) != 1 {
			return false
		}
		h1 = list[0]
		return h1.State == "up" && len(h1.Providers) == len(want)
	}) {
		t.Fatalf("h1 not up with %v within a minute: %+v\nfleet:\n%s\njoin:\n%s", want, h1, d.Stderr, join.Stderr)
	}
	var got []string
	for _, p := range h1.Providers {
		if p.Version == "" {
			t.Errorf("provider %s without a version", p.Name)
		}
		got = append(got, p.Name)
	}
	if h1.Name != "h1" || h1.Address != "10.231.0.2" || h1.Slots != 3 || !slices.Equal(h1.Labels, []string{"gpu"}) ||
		h1.LastSeenMs == 0 || !slices.Equal(got, want) {
		t.Fatalf("h1: %+v, want up from 10.231.0.2 with 3 slots, label gpu and providers %v", h1, want)
	}

	t.Logf("h1: %+v", h1)
	out, stderr, code := fleet.Fleet("", "hosts", "remove", "h1")
	if code != 0 || out != "h1 removed; the running fleet has cut it off\n" {
		t.Fatalf("fleet hosts remove: exit %d %q\n%s", code, out, stderr)
	}
	testwait.For(t, time.Minute, "the host to be refused", func() bool {
		return strings.Contains(join.Stderr.String(), "the fleet refused this host's credential")
	})
	if list := listHosts(fleet); len(list) != 0 {
		t.Fatalf("after remove: %+v", list)
	}
	if !strings.Contains(d.Stderr.String(), `msg="host cut off" component=hosts host=h1 address=10.231.0.2`) {
		t.Fatalf("the fleet did not log the cut:\n%s", d.Stderr)
	}

	// Both stop cleanly on SIGTERM.
	join.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-join.Done:
		if join.Err != nil || !strings.Contains(join.Stderr.String(), "fleet join: h1 stopped") {
			t.Fatalf("fleet join exited with %v\n%s", join.Err, join.Stderr)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("fleet join did not stop\n%s", join.Stderr)
	}
	d.Stop()
}
