//go:build unix

package store

import "golang.org/x/sys/unix"

// writable reports whether this process may write path (only used to word
// an error; SQLite makes the real decision).
func writable(path string) bool {
	return unix.Access(path, unix.W_OK) == nil
}
