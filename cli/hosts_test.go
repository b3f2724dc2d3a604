package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agents-fleet/fleet/hosts"
	"github.com/agents-fleet/fleet/hosts/naming"
)

// TestHostsCommands: enrol, list, drain and remove with no fleet running,
// then remove with one that listens for hosts.
func TestHostsCommands(t *testing.T) {
	home := testHome(t)
	out, _, err := runCmd(t, newHostsCmd(), nil)
	if err != nil || out != "no hosts enrolled (fleet hosts add NAME)\n" {
		t.Fatalf("hosts = %q, %v", out, err)
	}
	if out, _, err = runCmd(t, newHostsCmd(), nil, "--json"); err != nil || out != "[]\n" {
		t.Fatalf("hosts --json = %q, %v", out, err)
	}
	_, _, err = runCmd(t, newHostsCmd(), nil, "add", "h1")
	wantExit(t, err, exitUsage, "needs the address hosts dial: give --advertise HOST:PORT")
	_, _, err = runCmd(t, newHostsCmd(), nil, "add", "h1", "--advertise", "0.0.0.0:7422")
	wantExit(t, err, exitUsage, "not a wildcard")
	_, _, err = runCmd(t, newHostsCmd(), nil, "add", "H1", "--advertise", "10.0.0.1:7422")
	wantExit(t, err, exitUsage, "host name")

	path := filepath.Join(t.TempDir(), "h1.join")
	_, stderr, err := runCmd(t, newHostsCmd(), nil, "add", "h1", "--advertise", "10.0.0.1:7422", "--slots", "3", "--labels", "gpu,big", "--out", path)
	if err != nil || !strings.Contains(stderr, "enrolled h1: 3 slots, labels gpu,big, dialling 10.0.0.1:7422") || !strings.Contains(stderr, "join file: "+path) {
		t.Fatalf("add h1: %v\n%s", err, stderr)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("join file %v %v", fi, err)
	}
	// To stdout, for a pipe.
	out, _, err = runCmd(t, newHostsCmd(), nil, "add", "h2", "--advertise", "10.0.0.1:7422", "--out", "-")
	if err != nil {
		t.Fatal(err)
	}
	if j, err := hosts.ParseJoinFile([]byte(out)); err != nil || j.Name != "h2" || j.Slots != naming.DefaultSlots {
		t.Fatalf("join file on stdout: %+v %v\n%s", j, err, out)
	}

	out, _, err = runCmd(t, newHostsCmd(), nil, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var list []map[string]any
	if err := json.Unmarshal([]byte(out), &list); err != nil || len(list) != 2 {
		t.Fatalf("hosts --json: %v\n%s", err, out)
	}
	for _, k := range []string{"name", "state", "slots", "labels", "running", "lastSeenMs", "address", "providers"} {
		if _, ok := list[0][k]; !ok {
			t.Errorf("hosts --json has no %q: %v", k, list[0])
		}
	}
	if list[0]["name"] != "h1" || list[0]["state"] != "never-joined" || list[0]["slots"] != 3.0 {
		t.Fatalf("h1: %v", list[0])
	}
	out, _, _ = runCmd(t, newHostsCmd(), nil)
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 3 || !strings.HasPrefix(lines[1], "h1  ") ||
		strings.Join(strings.Fields(lines[1]), " ") != "h1 never-joined 3 0 gpu,big - - -" {
		t.Fatalf("hosts:\n%s", out)
	}

	if out, _, err = runCmd(t, newHostsCmd(), nil, "drain", "h1"); err != nil || out != "h1 draining: it takes no new workers\n" {
		t.Fatalf("drain: %q %v", out, err)
	}
	if out, _, err = runCmd(t, newHostsCmd(), nil, "remove", "h2"); err != nil || out != "h2 removed; its credential is refused from the next fleet run on\n" {
		t.Fatalf("remove with no fleet: %q %v", out, err)
	}
	_, _, err = runCmd(t, newHostsCmd(), nil, "remove", "h2")
	wantExit(t, err, 1, "no such host")

	// A fleet listening for hosts takes the change in before remove returns.
	hub, err := hosts.StartHub(hosts.HubConfig{Dir: hosts.Dir(home), Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hub.Close)
	if out, _, err = runCmd(t, newHostsCmd(), nil, "remove", "h1"); err != nil || out != "h1 removed; the running fleet has cut it off\n" {
		t.Fatalf("remove with a fleet: %q %v", out, err)
	}
}

func TestJoinRefusesBadInput(t *testing.T) {
	testHome(t)
	dir := filepath.Join(t.TempDir(), "hosts")
	path := filepath.Join(t.TempDir(), "h1.join")
	if _, err := hosts.Enrol(dir, hosts.Enrolment{Name: "h1", Slots: 1, Hub: "10.0.0.1:7422"},
		func(j hosts.JoinFile) error { return hosts.WriteJoinFile(path, j) }); err != nil {
		t.Fatal(err)
	}
	_, _, err := runCmd(t, newJoinCmd(), nil, path, "--slots", "0")
	wantExit(t, err, exitUsage, "--slots")
	_, _, err = runCmd(t, newJoinCmd(), nil, path, "--labels", "a b")
	wantExit(t, err, exitUsage, "--labels")
	os.Chmod(path, 0o640)
	_, _, err = runCmd(t, newJoinCmd(), nil, path)
	wantExit(t, err, 1, "chmod 600")
}

func TestShortVersion(t *testing.T) {
	for in, want := range map[string]string{"2.1.197 (Claude Code)": "2.1.197", "codex-cli 0.171.0": "0.171.0", "1.0.102": "1.0.102", "dev": "dev", "": ""} {
		if got := shortVersion(in); got != want {
			t.Errorf("shortVersion(%q) = %q, want %q", in, got, want)
		}
	}
}
