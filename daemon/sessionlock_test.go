//go:build unix

package daemon

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestSessionLock: a session's lock is held by one holder at a time, kept
// private (0600 in a 0700 directory), freed and deleted by release, and a
// symlink in its place is refused rather than followed.
func TestSessionLock(t *testing.T) {
	home := t.TempDir()
	release, err := lockSession(home, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lockSession(home, "s1"); !errors.Is(err, errSessionBusy) {
		t.Fatalf("second lock: %v, want errSessionBusy", err)
	}
	other, err := lockSession(home, "s2")
	if err != nil {
		t.Fatalf("another session: %v", err)
	}
	other()
	release()
	again, err := lockSession(home, "s1")
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	dir := filepath.Join(home, "state", "sessions")
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("lock directory %v %v", st.Mode(), err)
	}
	if st, err := os.Stat(filepath.Join(dir, "s1.lock")); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("lock file %v %v", st.Mode(), err)
	}
	again()
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("released locks left %v", left)
	}
	target := filepath.Join(home, "elsewhere")
	if err := os.Symlink(target, filepath.Join(dir, "s3.lock")); err != nil {
		t.Fatal(err)
	}
	if _, err := lockSession(home, "s3"); err == nil {
		t.Error("a symlinked lock file was followed")
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Error("the symlink's target was created")
	}
}
