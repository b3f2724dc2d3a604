//go:build unix

package store

import (
	"errors"
	"os"
	"syscall"
)

// lockFile opens path (0600) and takes an exclusive flock on it without
// waiting; ok is false when another open file holds it. The kernel drops the
// lock when the process dies.
func lockFile(path string) (f *os.File, ok bool, err error) {
	f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, false, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, err
	}
	return f, true, nil
}

// spaceHint describes a write that failed for want of space; "" otherwise.
func spaceHint(err error) string {
	switch {
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return "the disk is full"
	case errors.Is(err, syscall.EFBIG):
		return "the file size limit was reached (or the disk is full)"
	}
	return ""
}
