package registry

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agents-fleet/fleet/internal/lockfile"
)

// Fleets registering in one directory get distinct names: a live
// descriptor or a fleet still starting (holding its claim) keeps a name
// taken; a released claim or a dead fleet's descriptor does not.
func TestClaimName(t *testing.T) {
	home := shortHome(t)
	if l, err := lockfile.TryLock(filepath.Join(home, "probe.lock")); errors.Is(err, lockfile.ErrUnsupported) {
		t.Skip("claims need file locks, which internal/lockfile has on Unix only")
	} else if err == nil {
		l.Release()
	}
	dir := filepath.Join(home, "sockets")

	a, releaseA, err := ClaimName(dir, "repo")
	if err != nil || a != "repo" {
		t.Fatalf("first claim = %q, %v; want repo", a, err)
	}
	// Claimed by a fleet that has not registered yet.
	b, releaseB, err := ClaimName(dir, "repo")
	if err != nil || b != "repo-2" {
		t.Fatalf("second claim = %q, %v; want repo-2", b, err)
	}
	releaseA()
	// Registered and alive (this process): taken without a claim.
	live := newFleet(t, home, os.Getpid(), true)
	live.d.Name = "repo"
	if _, err := Write(dir, live.d); err != nil {
		t.Fatal(err)
	}
	c, releaseC, err := ClaimName(dir, "repo")
	if err != nil || c != "repo-3" {
		t.Fatalf("claim beside a live repo and a claimed repo-2 = %q, %v; want repo-3", c, err)
	}
	releaseB()
	releaseC()
	if d, release, err := ClaimName(dir, "repo"); err != nil || d != "repo-2" {
		t.Fatalf("after the claims were released = %q, %v; want repo-2", d, err)
	} else {
		release()
	}
	// A dead fleet's descriptor does not hold its name.
	Remove(dir, live.d.ID)
	dead := newFleet(t, home, deadPID(t), false)
	dead.d.Name = "repo"
	if _, err := Write(dir, dead.d); err != nil {
		t.Fatal(err)
	}
	if e, release, err := ClaimName(dir, "repo"); err != nil || e != "repo" {
		t.Fatalf("beside a dead repo = %q, %v; want repo", e, err)
	} else {
		release()
	}
	// Released claims leave nothing behind.
	if left, _ := os.ReadDir(filepath.Join(dir, ".names")); len(left) != 0 {
		t.Fatalf("claim files left: %v", left)
	}
	// The registry still lists only descriptors.
	entries, err := List(dir)
	if err != nil || len(entries) != 1 {
		t.Fatalf("List = %v, %v", entries, err)
	}
}

func TestNumberedNameFits(t *testing.T) {
	long := strings.Repeat("é", MaxNameLen/2) // MaxNameLen bytes
	got := numbered(long, 12)
	if len(got) > MaxNameLen || !utf8.ValidString(got) || !strings.HasSuffix(got, "é-12") {
		t.Fatalf("numbered = %q (%d bytes)", got, len(got))
	}
	if numbered("repo", 1) != "repo" || numbered("repo", 2) != "repo-2" {
		t.Fatal("numbered")
	}
}
