package hosts_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/agents-fleet/fleet/hosts"
)

// enrol enrols name in dir and writes its join file there (0600).
func enrol(dir, name string, slots int, labels ...string) (string, error) {
	path := filepath.Join(dir, name+".join")
	_, err := hosts.Enrol(dir, hosts.Enrolment{Name: name, Slots: slots, Labels: labels, Hub: "10.231.0.1:7422"},
		func(j hosts.JoinFile) error { return hosts.WriteJoinFile(path, j) })
	return path, err
}

// TestJoinFile: the join file is 0600 and holds the hub's address, the
// fleet's CA and the seed whose public key alone the registry keeps; it
// is never written over an existing file, and join refuses one others
// may read.
func TestJoinFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "hosts")
	path, err := enrol(dir, "h1", 3, "gpu", "big")
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("join file: %v %v, want 0600", fi.Mode(), err)
	}
	j, err := hosts.ReadJoinFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := os.ReadFile(filepath.Join(dir, "ca.pem"))
	if j.Name != "h1" || j.Hub != "10.231.0.1:7422" || j.CA != string(ca) || j.Slots != 3 || !slices.Equal(j.Labels, []string{"gpu", "big"}) {
		t.Fatalf("join file: %+v", j)
	}
	kp, err := nkeys.FromSeed([]byte(j.Seed))
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	reg, err := hosts.LoadRegistry(dir)
	if err != nil {
		t.Fatal(err)
	}
	h, ok := reg.Find("h1")
	if !ok || h.NKey != pub || h.Slots != 3 {
		t.Fatalf("registry %+v, want h1 with the seed's public key %s", reg, pub)
	}
	raw, _ := os.ReadFile(filepath.Join(dir, "hosts.json"))
	if strings.Contains(string(raw), j.Seed) || strings.Contains(string(raw), `"SU`) {
		t.Fatal("hosts.json holds a seed")
	}
	if fi, err := os.Stat(filepath.Join(dir, "hosts.json")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("hosts.json: %v %v, want 0600", fi.Mode(), err)
	}

	// Not over an existing file, and the host is not enrolled then.
	if err := os.WriteFile(filepath.Join(dir, "h2.join"), []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := enrol(dir, "h2", 1); err == nil {
		t.Fatal("enrolled over an existing file")
	}
	if reg, _ := hosts.LoadRegistry(dir); len(reg.Hosts) != 1 {
		t.Fatalf("a host whose join file could not be written was enrolled: %+v", reg.Hosts)
	}

	os.Chmod(path, 0o644)
	if _, err := hosts.ReadJoinFile(path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a join file others may read: %v", err)
	}
}

func TestEnrolRefuses(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "hosts")
	if _, err := enrol(dir, "h1", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := enrol(dir, "h1", 1); !errors.Is(err, hosts.ErrExists) {
		t.Fatalf("enrolling h1 twice: %v", err)
	}
	for _, c := range []struct {
		name, why string
		e         hosts.Enrolment
	}{
		{"bad name", "host name", hosts.Enrolment{Name: "H_1", Slots: 1, Hub: "a:1"}},
		{"slots", "slots", hosts.Enrolment{Name: "h2", Slots: 0, Hub: "a:1"}},
		{"label", "label", hosts.Enrolment{Name: "h2", Slots: 1, Labels: []string{"a b"}, Hub: "a:1"}},
		{"wildcard", "wildcard", hosts.Enrolment{Name: "h2", Slots: 1, Hub: "0.0.0.0:7422"}},
		{"no port", "host:port", hosts.Enrolment{Name: "h2", Slots: 1, Hub: "fleet.example"}},
	} {
		_, err := hosts.Enrol(dir, c.e, func(hosts.JoinFile) error { return nil })
		if err == nil || !strings.Contains(err.Error(), c.why) {
			t.Errorf("%s: %v, want an error about %q", c.name, err, c.why)
		}
	}
}

// TestRegistryUnderConcurrency: enrolments, drains and removals made at
// once (each its own lock holder, as separate commands are) lose nothing.
func TestRegistryUnderConcurrency(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "hosts")
	const n = 24
	for i := range n / 2 { // half exist already, to be drained or removed
		if _, err := enrol(dir, fmt.Sprintf("old%d", i), 1); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	gens := make(chan int64, 2*n)
	for i := range n {
		wg.Go(func() {
			g, err := hosts.Enrol(dir, hosts.Enrolment{Name: fmt.Sprintf("new%d", i), Slots: 1, Hub: "a:1"},
				func(hosts.JoinFile) error { return nil })
			errs <- err
			gens <- g
		})
	}
	for i := range n / 2 {
		wg.Go(func() {
			var g int64
			var err error
			if i%2 == 0 {
				g, err = hosts.Drain(dir, fmt.Sprintf("old%d", i))
			} else {
				g, err = hosts.Remove(dir, fmt.Sprintf("old%d", i))
			}
			errs <- err
			gens <- g
		})
	}
	wg.Wait()
	close(errs)
	close(gens)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	var seen []int64
	for g := range gens {
		seen = append(seen, g)
	}
	slices.Sort(seen)
	if len(slices.Compact(slices.Clone(seen))) != len(seen) {
		t.Fatalf("two changes got one generation: %v", seen)
	}
	reg, err := hosts.LoadRegistry(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, ok := reg.Find(fmt.Sprintf("new%d", i)); !ok {
			t.Errorf("new%d lost", i)
		}
	}
	for i := range n / 2 {
		h, ok := reg.Find(fmt.Sprintf("old%d", i))
		switch {
		case i%2 == 0 && (!ok || !h.Draining):
			t.Errorf("old%d: %+v %v, want draining", i, h, ok)
		case i%2 == 1 && ok:
			t.Errorf("old%d not removed", i)
		}
	}
	if want := n + n/2 + n/2; reg.Generation != int64(want) {
		t.Fatalf("generation %d, want %d", reg.Generation, want)
	}
	if _, err := hosts.Remove(dir, "nobody"); !errors.Is(err, hosts.ErrNoHost) {
		t.Fatalf("remove of an unknown host: %v", err)
	}
}

// TestListWithoutFleet: with no fleet running the hub, fleet hosts lists
// the enrolled hosts, never joined, with what they were enrolled with.
func TestListWithoutFleet(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "hosts")
	if _, err := enrol(dir, "b", 2, "gpu"); err != nil {
		t.Fatal(err)
	}
	if _, err := enrol(dir, "a", 1); err != nil {
		t.Fatal(err)
	}
	list, err := hosts.List(dir, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Name != "a" || list[1].Name != "b" {
		t.Fatalf("list %+v", list)
	}
	b := list[1]
	if b.State != hosts.StateNeverJoined || b.Slots != 2 || !slices.Equal(b.Labels, []string{"gpu"}) || b.LastSeenMs != 0 || b.Address != "" || b.Providers == nil {
		t.Fatalf("b: %+v", b)
	}
}
