//go:build !windows

package controlsock

import (
	"context"
	"fmt"
	"net"
	"os"
	"time"
)

// Listen listens on the Unix socket at path and makes it 0600. The parent
// directory must already exist with mode 0700 (registry.EnsurePrivateDir):
// the directory, not the chmod after bind, is what keeps other users out, so
// the window between bind and chmod does not matter.
//
// A socket file left behind by a dead process is removed first. If a server
// still answers on path, Listen refuses instead of stealing it. The
// probe-then-remove has a race (two fleets starting on the same path at the
// same instant); paths carry the pid, so that needs a pid collision.
func Listen(path string) (net.Listener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("listen %s: a file that is not a socket is in the way", path)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		c, err := Dial(ctx, path)
		cancel()
		if err == nil {
			c.Close()
			return nil, fmt.Errorf("listen %s: another fleet is listening there", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("listen %s: remove stale socket: %w", path, err)
		}
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	// The socket file is removed by Close of the listener (Go unlinks it).
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("chmod %s: %w", path, err)
	}
	return ln, nil
}

// Dial connects to the control socket that Listen made at path: here a Unix
// socket. ctx bounds the connect only.
func Dial(ctx context.Context, path string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "unix", path)
}
