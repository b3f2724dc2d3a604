//go:build unix

package worktree

import (
	"errors"
	"syscall"
)

// processAlive reports whether a process with pid exists (EPERM: it does,
// owned by someone else).
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
