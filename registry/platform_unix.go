//go:build unix

package registry

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"syscall"
)

// PidAlive reports whether a process with pid exists (kill(pid, 0): nil or EPERM ⇒ alive).
func PidAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	if err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	return !zombie(pid)
}

// zombie reports whether pid has exited and only waits to be reaped by its
// parent (Linux /proc; elsewhere it answers false). kill(pid, 0) succeeds
// for a zombie, but its fleet is gone.
func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses and may
	// itself contain ") ".
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] == 'Z'
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
