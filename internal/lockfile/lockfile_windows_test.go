package lockfile

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/windows"

	"github.com/agents-fleet/fleet/internal/testdir"
	"github.com/agents-fleet/fleet/internal/winsec"
)

// checkPrivate fails t unless the lock file at path is the user's alone.
func checkPrivate(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sd, err := winsec.Read(windows.Handle(f.Fd()))
	if err == nil {
		err = winsec.CheckPrivate(sd)
	}
	if err != nil {
		t.Fatalf("lock file %s: %v", path, err)
	}
}

// TestStaleOpenOneHolder: a taker that opened the file just before its
// holder released (deleted) it. Windows file systems with POSIX deletes
// remove the name at once, and that taker's lock must not count; others
// (and Wine) keep the deleted file under its name while a handle is open,
// and it may count, since everyone who opens the name gets that file until
// it is released. Either way there is one holder at a time, and the lock
// can be taken once it is released.
func TestStaleOpenOneHolder(t *testing.T) {
	path := filepath.Join(testdir.New(t), "s1.lock")
	a, err := TryLock(path)
	if err != nil {
		t.Fatal(err)
	}
	stale, err := openLockFile(path)
	if err != nil {
		t.Fatal(err)
	}
	a.Release()
	held, err := lockIfCurrent(stale, path)
	if err != nil {
		t.Fatal(err)
	}
	if held {
		if l, err := TryLock(path); err == nil {
			l.Release()
			t.Fatal("two holders: TryLock took the lock a stale taker holds")
		}
		(&Lock{path: path, f: stale}).Release()
	} else {
		stale.Close()
	}
	c, err := TryLock(path)
	if err != nil {
		t.Fatalf("TryLock once the stale taker let go (it held: %v): %v", held, err)
	}
	defer c.Release()
	if _, err := TryLock(path); !errors.Is(err, ErrBusy) {
		t.Fatalf("TryLock while the new file is held: %v, want ErrBusy", err)
	}
}
