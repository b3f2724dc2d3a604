//go:build unix

package lockfile

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

func TestOneHolderAndNothingLeft(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s1.lock")
	a, err := TryLock(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("lock file: %v, %v; want 0600", fi, err)
	}
	if _, err := TryLock(path); !errors.Is(err, ErrBusy) {
		t.Fatalf("second TryLock: %v, want ErrBusy", err)
	}
	a.Release()
	a.Release() // twice is harmless
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("after Release: %v, want the file gone", err)
	}
	b, err := TryLock(path)
	if err != nil {
		t.Fatalf("TryLock after Release: %v", err)
	}
	b.Release()
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
	stale, err := os.OpenFile(path, os.O_RDWR, 0)
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

// TestHolderKilled: kill -9 of the holder leaves the file but frees the
// lock; the next taker gets it.
func TestHolderKilled(t *testing.T) {
	if path := os.Getenv("LOCKFILE_HOLD"); path != "" {
		if _, err := TryLock(path); err != nil {
			os.Stdout.WriteString("error " + err.Error() + "\n")
			os.Exit(1)
		}
		os.Stdout.WriteString("held\n")
		select {}
	}
	path := filepath.Join(t.TempDir(), "s1.lock")
	cmd := exec.Command(os.Args[0], "-test.run=^TestHolderKilled$")
	cmd.Env = append(os.Environ(), "LOCKFILE_HOLD="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if line != "held\n" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("child said %q", line)
	}
	if _, err := TryLock(path); !errors.Is(err, ErrBusy) {
		t.Fatalf("TryLock while the child holds it: %v, want ErrBusy", err)
	}
	cmd.Process.Kill()
	cmd.Wait()
	l, err := TryLock(path)
	if err != nil {
		t.Fatalf("TryLock after the holder died: %v", err)
	}
	l.Release()
}
