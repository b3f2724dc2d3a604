//go:build windows

package controlsock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/Microsoft/go-winio"
	"golang.org/x/sys/windows"

	"github.com/agents-fleet/fleet/internal/winsec"
)

// pipePrefix starts the name of every local named pipe. A name with a host
// (\\host\pipe\...) would reach over the network, and hand the host this
// user's credentials on the way: Listen and Dial take local names only.
const pipePrefix = `\\.\pipe\`

// pipeBufferSize is the in and out buffer quota of each pipe instance, as
// a Unix socket's buffers: the server's outbound queue does the rest.
const pipeBufferSize = 256 << 10

// dialBound bounds how long Dial waits while every instance of a pipe is
// taken (the server makes the next one as it accepts), when ctx does not
// bound it sooner.
const dialBound = 10 * time.Second

func checkPipeName(path string) error {
	if len(path) <= len(pipePrefix) || !strings.EqualFold(path[:len(pipePrefix)], pipePrefix) {
		return fmt.Errorf("%s is not the name of a local named pipe (%s<name>)", path, pipePrefix)
	}
	return nil
}

// Listen listens on the named pipe path (\\.\pipe\agents-fleet-<id>, from
// registry.SocketPath) with go-winio. The pipe's security descriptor names
// the current user's SID as owner and as the only one let in
// (winsec.SDDL); go-winio makes every instance with
// PIPE_REJECT_REMOTE_CLIENTS (it always does, as of v0.6.4; there is no
// option for it), so other machines are refused even with the user's
// credentials.
//
// A pipe exists only while a handle to it is open, so a dead fleet leaves
// nothing to remove. If a server answers on path, Listen refuses instead of
// sharing it: Windows would refuse ListenPipe on its own (the first
// instance is made with FILE_CREATE), Wine would not. The probe-then-listen
// has the race the Unix socket's has; names carry the pid and random bits.
func Listen(path string) (net.Listener, error) {
	if err := checkPipeName(path); err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	switch h, err := winsec.OpenPipe(path); {
	case err == nil:
		windows.CloseHandle(h)
		return nil, fmt.Errorf("listen %s: another fleet is listening there", path)
	case errors.Is(err, windows.ERROR_PIPE_BUSY):
		return nil, fmt.Errorf("listen %s: another fleet is listening there (every instance is busy)", path)
	case !errors.Is(err, windows.ERROR_FILE_NOT_FOUND):
		return nil, fmt.Errorf("listen %s: a pipe of that name is in the way: %w", path, err)
	}
	sddl, err := winsec.SDDL(false)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	ln, err := winio.ListenPipe(path, &winio.PipeConfig{
		SecurityDescriptor: sddl,
		InputBufferSize:    pipeBufferSize,
		OutputBufferSize:   pipeBufferSize,
	})
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	if err := knock(path); err != nil {
		ln.Close()
		return nil, fmt.Errorf("listen %s: %w", path, err)
	}
	return pipeListener{ln}, nil
}

// knock opens the new pipe once and closes it. ListenPipe's first instance
// only holds the name: no one ever accepts on it. Windows keeps clients off
// it (go-winio makes it without read or write access, which leaves it
// disconnected: a client gets ERROR_PIPE_BUSY until an Accept makes the
// next instance, as go-winio's TestDialListenerTimesOut shows); Wine
// connects the first client to it, and that client would wait for ever.
// Landing on it here first uses it up under Wine and costs nothing on
// Windows.
func knock(path string) error {
	h, err := winsec.OpenPipe(path)
	switch {
	case err == nil:
		return windows.CloseHandle(h)
	case errors.Is(err, windows.ERROR_PIPE_BUSY):
		return nil
	}
	return fmt.Errorf("open the new pipe: %w", err)
}

// Dial connects to the control socket that Listen made at path: here a
// local named pipe, opened with go-winio (anonymous impersonation: the
// server cannot act as the client). While every instance is taken it
// retries until ctx ends, and at most dialBound. ctx bounds the connect
// only.
func Dial(ctx context.Context, path string) (net.Conn, error) {
	if err := checkPipeName(path); err != nil {
		return nil, fmt.Errorf("dial: %w", err)
	}
	bounded, cancel := context.WithTimeout(ctx, dialBound)
	defer cancel()
	c, err := winio.DialPipeContext(bounded, path)
	if err != nil {
		if ctx.Err() == nil && bounded.Err() != nil {
			return nil, fmt.Errorf("dial %s: every instance of the pipe stayed busy for %s: %w", path, dialBound, err)
		}
		return nil, err
	}
	return pipeConn{c}, nil
}

// pipeListener hands out its connections as pipeConns.
type pipeListener struct{ net.Listener }

func (l pipeListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return pipeConn{c}, nil
}

// pipeConn is a go-winio pipe that says a connection is closed the way
// net's connections do, with net.ErrClosed (go-winio says os.ErrClosed):
// the server and the consoles know a closed connection by it.
type pipeConn struct{ net.Conn }

func (c pipeConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	return n, netClosed(err)
}

func (c pipeConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	return n, netClosed(err)
}

func netClosed(err error) error {
	if errors.Is(err, os.ErrClosed) {
		return net.ErrClosed
	}
	return err
}
