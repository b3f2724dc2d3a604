//go:build windows

package controlsock

import (
	"errors"
	"net"
)

// Listen is not implemented on Windows yet: the named-pipe transport
// (\\.\pipe\agents-fleet-<id>) needs a pipe listener with a per-user DACL.
func Listen(path string) (net.Listener, error) {
	return nil, errors.New("control socket: named pipes are not supported on windows yet")
}
