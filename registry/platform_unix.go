//go:build unix

package registry

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// SocketPath returns <fleetHome>/control/<id>.sock.
func SocketPath(fleetHome, id string) string { return filepath.Join(ControlDir(fleetHome), id+".sock") }

// alive reports whether d's fleet runs: its pid is alive. A pid reused
// after the fleet died passes; Validate's socket checks and the token are
// what a reader relies on.
func alive(d Descriptor) bool { return PidAlive(d.PID) }

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

// lstat is os.Lstat: a FileInfo carries what checkOwner and checkPrivate read.
func lstat(path string) (fs.FileInfo, error) { return os.Lstat(path) }

// fstat is f.Stat.
func fstat(f *os.File) (fs.FileInfo, error) { return f.Stat() }

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

// checkPrivate returns an error, phrased to follow "<what> <path> ", unless
// fi is owned by the user and has no group/other permission bits.
func checkPrivate(fi fs.FileInfo) error {
	if err := checkOwner(fi); err != nil {
		return fmt.Errorf("is %w", err)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("has mode %04o: group and others must have no access", perm)
	}
	return nil
}

// mkdirAllPrivate creates dir and its missing parents with mode 0700.
func mkdirAllPrivate(dir string) error { return os.MkdirAll(dir, 0o700) }

// restrictDir makes the directory dir, open as f with fi its FileInfo,
// private: it must be the user's, and a mode other than 0700 is set to
// 0700 through f (fchmod), so a directory swapped in after the check is
// never the one changed.
func restrictDir(dir string, f *os.File, fi fs.FileInfo) error {
	if err := checkOwner(fi); err != nil {
		return fmt.Errorf("private directory %s is %w", dir, err)
	}
	if fi.Mode().Perm() != 0o700 {
		if err := f.Chmod(0o700); err != nil {
			return fmt.Errorf("private directory %s: restrict mode %04o to 0700: %w", dir, fi.Mode().Perm(), err)
		}
	}
	return nil
}

// openShared is os.Open: on Unix an open file never stops a rename over it.
func openShared(name string) (*os.File, error) { return os.Open(name) }

// replaceFile is os.Rename.
func replaceFile(oldpath, newpath string) error { return os.Rename(oldpath, newpath) }

// createPrivateTemp creates a new file in dir whose name starts with
// prefix, mode 0600 (os.CreateTemp's).
func createPrivateTemp(dir, prefix string) (*os.File, error) {
	return os.CreateTemp(dir, prefix+"*")
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

// checkSocket returns a *ValidationError unless d's socket exists, is a
// socket and is owned by the user.
func checkSocket(d Descriptor) error {
	fi, err := os.Lstat(d.SocketPath)
	if err != nil {
		return invalid("socketPath", "%v", err)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return invalid("socketPath", "%s is a %s, not a socket", d.SocketPath, kind(fi.Mode()))
	}
	if err := checkOwner(fi); err != nil {
		return invalid("socketPath", "%s is %v", d.SocketPath, err)
	}
	return nil
}

// removeStaleSocket removes a dead fleet's socket file at path, best effort.
func removeStaleSocket(path string) {
	removeIf(path, func(m fs.FileMode) bool { return m.Type() == fs.ModeSocket })
}
