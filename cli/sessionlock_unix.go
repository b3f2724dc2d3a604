//go:build unix

package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockSession holds <fleetHome>/state/sessions/<id>.lock with an exclusive
// flock for the life of the process, so that one session is served by one
// fleet process at a time. The kernel drops the lock when the process dies
// (kill -9 included), so a lock that is free means nobody serves the
// session now. errSessionBusy: another process holds it.
func lockSession(home, id string) (release func(), err error) {
	dir := filepath.Join(home, "state", "sessions")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("session lock: %w", err)
	}
	path := filepath.Join(dir, id+".lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("session lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errSessionBusy
		}
		return nil, fmt.Errorf("session lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}
