//go:build !windows

package testdir

import (
	"os"
	"path/filepath"
	"testing"
)

func removeAll(dir string) error { return os.RemoveAll(dir) }

// SocketPath returns a path for a control socket (controlsock.Listen) in a
// fresh directory of t's.
func SocketPath(t testing.TB) string {
	t.Helper()
	return filepath.Join(New(t), "f.sock")
}
