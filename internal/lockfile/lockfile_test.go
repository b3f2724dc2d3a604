package lockfile

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/internal/testdir"
)

func TestOneHolderAndNothingLeft(t *testing.T) {
	path := filepath.Join(testdir.New(t), "s1.lock")
	a, err := TryLock(path)
	if err != nil {
		t.Fatal(err)
	}
	checkPrivate(t, path)
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

// TestHolderKilled: kill -9 of the holder leaves the file but frees the
// lock; the next taker gets it.
func TestHolderKilled(t *testing.T) {
	if path := os.Getenv("LOCKFILE_HOLD"); path != "" {
		if _, err := TryLock(path); err != nil {
			os.Stdout.WriteString("error " + err.Error() + "\n")
			os.Exit(1)
		}
		os.Stdout.WriteString("held\n")
		// Hold it until killed. (Not select{}: with nothing else to run,
		// the runtime would end the process as deadlocked, and the lock
		// with it, as it did under Wine.)
		time.Sleep(time.Hour)
	}
	path := filepath.Join(testdir.New(t), "s1.lock")
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
