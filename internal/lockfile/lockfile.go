// Package lockfile holds a file as an exclusive, non-blocking lock that
// leaves nothing behind: the kernel drops the lock when its holder dies
// (kill -9 included), and Release deletes the file.
//
// Deleting a lock file is only safe if a taker checks, once it holds the
// lock, that the path still names the file it locked: a process that opened
// the file just before its holder deleted it would otherwise lock a file
// nobody else can find, while a third process creates and locks a new one.
// TryLock makes that check, and tries again when it fails.
package lockfile

import (
	"errors"
	"fmt"
	"os"
	"time"
)

// ErrBusy is returned by TryLock when another open file holds the lock.
var ErrBusy = errors.New("lock held by another process")

// ErrUnsupported is returned by TryLock where files cannot be locked
// (platforms with neither flock nor LockFileEx).
var ErrUnsupported = errors.New("file locks are not supported on this platform")

// Lock is a held lock; Release gives it up.
type Lock struct {
	path string
	f    *os.File
}

// Path is the lock file's path.
func (l *Lock) Path() string { return l.path }

// Release deletes the lock file and then drops the lock: deleting it while
// still held means no one can lock the old file and believe it current.
// Release is safe to call more than once.
func (l *Lock) Release() {
	if l == nil || l.f == nil {
		return
	}
	os.Remove(l.path)
	l.f.Close()
	l.f = nil
}

// tries bounds TryLock's retries when the file it locked was deleted or
// replaced meanwhile (each retry means a holder released it just then).
const tries = 8

// errNamePending is openLockFile's error for a lock file that a holder
// deleted and someone still has open, on a system that keeps the name
// until then: TryLock waits a little for it to go.
var errNamePending = errors.New("the lock file is deleted but still open")

// TryLock takes an exclusive lock on path (created private to the user if
// missing; a symbolic link is refused) without waiting. It returns ErrBusy
// when another open file holds it.
func TryLock(path string) (*Lock, error) {
	var pending error
	for range tries {
		f, err := openLockFile(path)
		if errors.Is(err, errNamePending) {
			pending = err
			time.Sleep(20 * time.Millisecond)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		current, err := lockIfCurrent(f, path)
		if err != nil {
			f.Close()
			return nil, err
		}
		if current {
			return &Lock{path: path, f: f}, nil
		}
		f.Close() // released and deleted (or replaced) under us: again
	}
	if pending != nil {
		return nil, fmt.Errorf("lock %s: %w", path, pending)
	}
	return nil, fmt.Errorf("lock %s: the file keeps being replaced", path)
}
