//go:build unix

package registry

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// PidAlive reports whether a process with pid exists (kill(pid, 0): nil or EPERM ⇒ alive).
func PidAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// checkOwner returns an error unless fi belongs to the current user.
func checkOwner(fi fs.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return errors.New("cannot determine the owner")
	}
	if uid := os.Getuid(); int(st.Uid) != uid {
		return fmt.Errorf("owned by uid %d, not by the current user (uid %d)", st.Uid, uid)
	}
	return nil
}

// openNoFollow opens name without following a symlink in its last element.
// O_NONBLOCK keeps a FIFO planted at name from blocking the open.
func openNoFollow(name string, flag int, perm fs.FileMode) (*os.File, error) {
	return os.OpenFile(name, flag|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, perm)
}

// openDir opens the directory dir for fstat and fchmod, refusing a symlink.
func openDir(dir string) (*os.File, error) {
	return openNoFollow(dir, os.O_RDONLY|syscall.O_DIRECTORY, 0)
}
