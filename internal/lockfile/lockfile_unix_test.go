//go:build unix

package lockfile

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// checkPrivate fails t unless the lock file at path is 0600.
func checkPrivate(t *testing.T, path string) {
	t.Helper()
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("lock file: %v, %v; want 0600", fi, err)
	}
}

func TestSymlinkRefused(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "elsewhere")
	os.WriteFile(target, nil, 0o600)
	path := filepath.Join(dir, "s1.lock")
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	if l, err := TryLock(path); err == nil {
		l.Release()
		t.Fatal("locked through a symlink")
	}
}

// TestStaleOpenIsNotALock: a taker that opened the file just before its
// holder released (deleted) it must not count the lock it then gets, nor
// when a third taker has created and locked a new file meanwhile.
func TestStaleOpenIsNotALock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s1.lock")
	a, err := TryLock(path)
	if err != nil {
		t.Fatal(err)
	}
	stale, err := openLockFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer stale.Close()
	a.Release()
	if ok, err := lockIfCurrent(stale, path); ok || err != nil {
		t.Fatalf("lock of a deleted file: %v, %v; want not current", ok, err)
	}
	c, err := TryLock(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	if ok, err := lockIfCurrent(stale, path); ok || err != nil {
		t.Fatalf("lock of a replaced file: %v, %v; want not current", ok, err)
	}
	if _, err := TryLock(path); !errors.Is(err, ErrBusy) {
		t.Fatalf("TryLock while the new file is held: %v, want ErrBusy", err)
	}
}
