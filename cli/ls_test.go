package cli

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/registry"
)

func TestLsNone(t *testing.T) {
	home := testHome(t)
	writeStale(t, home)
	out, _, err := runCmd(t, newLsCmd(), nil)
	if err != nil || out != "no fleets running\n" {
		t.Fatalf("ls = %q, %v", out, err)
	}
	out, _, err = runCmd(t, newLsCmd(), nil, "--json")
	if err != nil || out != "[]\n" {
		t.Fatalf("ls --json = %q, %v", out, err)
	}
}

func TestLs(t *testing.T) {
	home := testHome(t)
	a := startFleet(t, home, "alpha", "a1")
	b := startFleet(t, home, "", "b2")
	stale := writeStale(t, home)

	out, _, err := runCmd(t, newLsCmd(), nil)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("ls printed %d lines, want header + 2:\n%s", len(lines), out)
	}
	if got := strings.Fields(lines[0]); strings.Join(got, " ") != "ID NAME PID AGE CWD HUB" {
		t.Errorf("header = %q", lines[0])
	}
	if strings.Contains(out, stale) {
		t.Errorf("stale fleet listed:\n%s", out)
	}
	for _, tf := range []*testFleet{a, b} {
		var row string
		for _, l := range lines[1:] {
			if strings.HasPrefix(l, tf.desc.ID+" ") {
				row = l
			}
		}
		f := strings.Fields(row)
		if len(f) != 6 {
			t.Fatalf("row for %s = %q", tf.desc.ID, row)
		}
		name := tf.desc.Name
		if name == "" {
			name = "-"
		}
		userHome, _ := os.UserHomeDir()
		if f[1] != name || f[3] != "1h30m" || f[4] != shortenHome(home, userHome) || f[5] != "-" {
			t.Errorf("row for %s = %q", tf.desc.ID, row)
		}
	}

	out, _, err = runCmd(t, newLsCmd(), nil, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var ds []registry.Descriptor
	if err := json.Unmarshal([]byte(out), &ds); err != nil {
		t.Fatalf("ls --json is not a descriptor array: %v\n%s", err, out)
	}
	if len(ds) != 2 {
		t.Fatalf("ls --json listed %d fleets:\n%s", len(ds), out)
	}
	for _, d := range ds {
		if d.ID != a.desc.ID && d.ID != b.desc.ID || d.SocketPath == "" || d.ProtocolVersion != 1 {
			t.Errorf("descriptor %+v", d)
		}
	}
}

func TestFormatAge(t *testing.T) {
	for d, want := range map[time.Duration]string{
		-time.Second:                  "0s",
		42 * time.Second:              "42s",
		5*time.Minute + 9*time.Second: "5m",
		3 * time.Hour:                 "3h",
		3*time.Hour + 12*time.Minute:  "3h12m",
		50 * time.Hour:                "2d2h",
		48 * time.Hour:                "2d",
	} {
		if got := formatAge(d); got != want {
			t.Errorf("formatAge(%s) = %q, want %q", d, got, want)
		}
	}
}

func TestShortenHome(t *testing.T) {
	for _, tc := range []struct{ p, home, want string }{
		{"/home/u/src", "/home/u", "~/src"},
		{"/home/u", "/home/u", "~"},
		{"/home/user2/x", "/home/u", "/home/user2/x"},
		{"/srv", "", "/srv"},
	} {
		if got := shortenHome(tc.p, tc.home); got != tc.want {
			t.Errorf("shortenHome(%q, %q) = %q, want %q", tc.p, tc.home, got, tc.want)
		}
	}
}
