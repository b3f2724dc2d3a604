//go:build unix

package lockfile

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockIfCurrent flocks f, which was opened from path, and reports whether
// path still names f's file once the lock is held. If it does not, the
// lock is worthless and is dropped.
func lockIfCurrent(f *os.File, path string) (bool, error) {
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return false, ErrBusy
		}
		return false, fmt.Errorf("lock %s: %w", path, err)
	}
	held, err := f.Stat()
	if err != nil {
		return false, fmt.Errorf("lock %s: %w", path, err)
	}
	now, err := os.Lstat(path)
	if err == nil && os.SameFile(held, now) {
		return true, nil
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return false, fmt.Errorf("lock %s: %w", path, err)
	}
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false, nil
}

// openLockFile opens path, creating it 0600 if missing; a symlink is
// refused.
func openLockFile(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
}
