package registry

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/controlsock"
	"github.com/agents-fleet/fleet/internal/testdir"
	"github.com/agents-fleet/fleet/internal/testwait"
)

// shortHome returns a fresh fleetHome short enough for socket paths under it.
func shortHome(t *testing.T) string {
	t.Helper()
	return testdir.New(t)
}

// deadPID returns the pid of a process that has exited and been reaped.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command(exitCommand[0], exitCommand[1:]...)
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	if PidAlive(pid) {
		t.Skipf("pid %d was reused already", pid)
	}
	return pid
}

// fleet is a live fleet as a hub would find it: control dir, token, a
// listening socket (controlsock.Listen: a named pipe on Windows) and the
// descriptor, all derived from home.
type fleet struct {
	home string
	d    Descriptor
	ln   net.Listener
}

// newFleet sets up a fleet for pid in home. The socket listens only when
// listen is set; it takes connections and closes them, as a probe needs.
func newFleet(t *testing.T, home string, pid int, listen bool) *fleet {
	t.Helper()
	id, err := NewID(pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := EnsurePrivateDir(ControlDir(home)); err != nil {
		t.Fatal(err)
	}
	f := &fleet{home: home, d: Descriptor{
		SchemaVersion:   SchemaVersion,
		ID:              id,
		PID:             pid,
		Name:            "fleet-" + id,
		Cwd:             home,
		SocketPath:      SocketPath(home, id),
		TokenPath:       TokenPath(home, id),
		FleetHome:       home,
		StartedAt:       time.Now().UnixMilli(),
		ProtocolVersion: ProtocolVersion,
	}}
	if _, err := WriteToken(f.d.TokenPath); err != nil {
		t.Fatal(err)
	}
	if listen {
		ln, err := controlsock.Listen(f.d.SocketPath)
		if err != nil {
			t.Fatal(err)
		}
		f.ln = ln
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
		t.Cleanup(func() {
			ln.Close()
			<-done
		})
	}
	return f
}

func TestNewID(t *testing.T) {
	re := regexp.MustCompile(`^4242-[0-9a-f]{8}$`)
	seen := map[string]bool{}
	for range 100 {
		id, err := NewID(4242)
		if err != nil {
			t.Fatal(err)
		}
		if !re.MatchString(id) {
			t.Fatalf("NewID = %q", id)
		}
		if seen[id] {
			t.Fatalf("NewID repeated %q", id)
		}
		seen[id] = true
	}
	if _, err := NewID(0); err == nil {
		t.Error("NewID(0) succeeded")
	}
}

func TestCheckSocketPath(t *testing.T) {
	ok := "/" + strings.Repeat("a", MaxSocketPath-1)
	if err := CheckSocketPath(ok); err != nil {
		t.Errorf("%d-byte path: %v", len(ok), err)
	}
	long := ok + "b"
	err := CheckSocketPath(long)
	if err == nil {
		t.Fatalf("%d-byte path accepted", len(long))
	}
	for _, want := range []string{long, fmt.Sprintf("is %d bytes", MaxSocketPath+1), fmt.Sprintf("limit of %d bytes", MaxSocketPath)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestWriteListRemove(t *testing.T) {
	dir := filepath.Join(testdir.New(t), "sockets") // Write creates it
	f := newFleet(t, shortHome(t), os.Getpid(), true)
	path, err := Write(dir, f.d)
	if err != nil {
		t.Fatal(err)
	}
	if path != filepath.Join(dir, f.d.ID+".json") {
		t.Errorf("Write path = %q", path)
	}
	assertPrivate(t, path)
	assertPrivate(t, dir)

	entries, err := List(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Fatalf("List = %+v", entries)
	}
	e := entries[0]
	if e.Err != nil || !e.Alive || e.Path != path || e.Descriptor != f.d {
		t.Errorf("List entry = %+v, want %+v", e, f.d)
	}

	if err := Remove(dir, f.d.ID); err != nil {
		t.Fatal(err)
	}
	if entries, err := List(dir); err != nil || len(entries) != 0 {
		t.Errorf("List after Remove = %+v, %v", entries, err)
	}
	if err := Remove(dir, f.d.ID); err != nil {
		t.Errorf("second Remove: %v", err)
	}
	for _, bad := range []string{"../1-ab", "1-ab/../../x", "", "x"} {
		if err := Remove(dir, bad); err == nil {
			t.Errorf("Remove(%q) accepted", bad)
		}
		if _, err := Write(dir, Descriptor{ID: bad}); err == nil {
			t.Errorf("Write(id %q) accepted", bad)
		}
	}
	if _, err := Write(dir, Descriptor{ID: "12-ab", PID: 13}); err == nil {
		t.Error("Write accepted an id that does not match the pid")
	}
}

func TestHubAttachJSON(t *testing.T) {
	dir := filepath.Join(testdir.New(t), "sockets")
	for i, hub := range []bool{false, true} {
		d := Descriptor{SchemaVersion: 1, ID: fmt.Sprintf("7-%d", i), PID: 7, HubAttach: hub}
		path, err := Write(dir, d)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		v, present := m["hubAttach"]
		if present != hub || (hub && v != true) {
			t.Errorf("hubAttach=%v: raw JSON %s", hub, raw)
		}
		for _, key := range []string{"schemaVersion", "id", "pid", "name", "cwd", "socketPath", "tokenPath", "fleetHome", "startedAt", "protocolVersion"} {
			if _, ok := m[key]; !ok {
				t.Errorf("raw JSON lacks %q: %s", key, raw)
			}
		}
	}
}

// TestWriteAtomic rewrites a descriptor while readers list it: every read
// sees a whole descriptor, and no temp file is left behind.
func TestWriteAtomic(t *testing.T) {
	dir := filepath.Join(testdir.New(t), "sockets")
	d := Descriptor{SchemaVersion: 1, ID: fmt.Sprintf("%d-0123abcd", os.Getpid()), PID: os.Getpid(), Name: strings.Repeat("n", 100)}
	if _, err := Write(dir, d); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				entries, err := List(dir)
				if err == nil && (len(entries) != 1 || entries[0].Err != nil) {
					err = fmt.Errorf("torn read: %+v", entries)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	for i := range 200 {
		d.StartedAt = int64(i)
		if _, err := Write(dir, d); err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	names, _ := os.ReadDir(dir)
	if len(names) != 1 {
		t.Errorf("files left in %s: %v", dir, names)
	}
}

func TestListMissingDir(t *testing.T) {
	entries, err := List(filepath.Join(testdir.New(t), "none"))
	if err != nil || len(entries) != 0 {
		t.Fatalf("List(missing) = %v, %v", entries, err)
	}
	if entries, err := Live(filepath.Join(testdir.New(t), "none")); err != nil || len(entries) != 0 {
		t.Fatalf("Live(missing) = %v, %v", entries, err)
	}
}

func TestListMalformed(t *testing.T) {
	dir := filepath.Join(testdir.New(t), "sockets")
	good := newFleet(t, shortHome(t), os.Getpid(), true).d
	if _, err := Write(dir, good); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"syntax.json":     `{"id": "1-a",`,
		"types.json":      `{"schemaVersion": 1, "id": "1-abc", "pid": "one"}`,
		"array.json":      `[1, 2]`,
		"huge.json":       `{"id":"1-huge","pid":1` + strings.Repeat(" ", MaxDescriptorSize) + `}`,
		"2-abc.json":      `{"id": "3-abc", "pid": 3}`,
		"4-abc.json":      `{"id": "4-abc", "pid": 5}`,
		"5-ABC.json":      `{"id": "5-ABC", "pid": 5}`,
		"ignored.txt":     `not a descriptor`,
		".hidden.json":    `{}`,
		"empty.json":      ``,
		"nullfields.json": `null`,
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "dir.json"), 0o700); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{ // file → substring of Err ("" = no error)
		good.ID + ".json": "",
		"syntax.json":     "invalid JSON on line 1",
		"types.json":      `field "pid" has the wrong type (string)`,
		"array.json":      "not a JSON object",
		"huge.json":       "over the limit of 65536 bytes",
		"2-abc.json":      `id "3-abc" does not match the file name`,
		"4-abc.json":      `id "4-abc" does not match pid 5`,
		"5-ABC.json":      "suffix may contain only lowercase letters and digits",
		"empty.json":      "unexpected end of JSON input",
		"nullfields.json": `id "" does not match the file name`,
		"dir.json":        "a directory, not a regular file",
	}
	if symlinks {
		if err := os.Symlink(filepath.Join(dir, good.ID+".json"), filepath.Join(dir, "link.json")); err != nil {
			t.Fatal(err)
		}
		want["link.json"] = "a symbolic link, not a regular file"
	}

	entries, err := List(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Entry{}
	for _, e := range entries {
		got[filepath.Base(e.Path)] = e
	}
	if len(got) != len(want) {
		t.Errorf("List returned %d entries, want %d: %v", len(got), len(want), got)
	}
	for name, sub := range want {
		e, ok := got[name]
		switch {
		case !ok:
			t.Errorf("%s not listed", name)
		case sub == "" && (e.Err != nil || !e.Alive):
			t.Errorf("%s: Err=%v Alive=%v", name, e.Err, e.Alive)
		case sub != "" && (e.Err == nil || !strings.Contains(e.Err.Error(), sub) || e.Alive):
			t.Errorf("%s: Err=%v Alive=%v, want error containing %q", name, e.Err, e.Alive, sub)
		}
	}

	live, err := Live(dir)
	if err != nil || len(live) != 1 || live[0].ID != good.ID {
		t.Errorf("Live = %+v, %v", live, err)
	}
}

func TestListSorted(t *testing.T) {
	dir := filepath.Join(testdir.New(t), "sockets")
	me := os.Getpid()
	for _, d := range []struct {
		suffix  string
		started int64
	}{{"c", 2}, {"b", 1}, {"a", 2}, {"d", 0}} {
		id := fmt.Sprintf("%d-%s", me, d.suffix)
		if _, err := Write(dir, Descriptor{ID: id, PID: me, StartedAt: d.started}); err != nil {
			t.Fatal(err)
		}
	}
	entries, err := List(dir)
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, e := range entries {
		order = append(order, e.ID[strings.IndexByte(e.ID, '-')+1:])
	}
	if got := strings.Join(order, ""); got != "dbac" {
		t.Errorf("order = %s, want dbac", got)
	}
}

// pruneWith writes the descriptors of fleets to dir beside a malformed one
// and checks that PruneStale removes those of stale and no other, and that
// a second PruneStale removes nothing. It returns the malformed file, which
// stays.
func pruneWith(t *testing.T, dir string, fleets []*fleet, stale ...*fleet) (malformed string) {
	t.Helper()
	for _, f := range fleets {
		if _, err := Write(dir, f.d); err != nil {
			t.Fatal(err)
		}
	}
	malformed = filepath.Join(dir, "broken.json")
	if err := os.WriteFile(malformed, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	removed, err := PruneStale(dir)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, f := range stale {
		want = append(want, f.d.ID)
	}
	slices.Sort(removed)
	if slices.Sort(want); !slices.Equal(removed, want) {
		t.Errorf("PruneStale removed %v, want %v", removed, want)
	}
	if removed, err := PruneStale(dir); err != nil || len(removed) != 0 {
		t.Errorf("second PruneStale = %v, %v", removed, err)
	}
	return malformed
}

func TestPidAlive(t *testing.T) {
	if !PidAlive(os.Getpid()) {
		t.Error("own pid not alive")
	}
	if PidAlive(deadPID(t)) {
		t.Error("reaped child alive")
	}
	for _, pid := range []int{0, -1} {
		if PidAlive(pid) {
			t.Errorf("PidAlive(%d) = true", pid)
		}
	}
}

func TestZombieIsNotAlive(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("zombie detection reads /proc")
	}
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	// Not reaped yet: a zombie once it has exited.
	if !testwait.Until(testwait.Bound, func() bool { return !PidAlive(cmd.Process.Pid) }) {
		t.Fatal("an exited, unreaped process still counts as alive")
	}
}
