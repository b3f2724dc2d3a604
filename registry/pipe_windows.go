//go:build windows

package registry

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/windows"

	"github.com/agents-fleet/fleet/internal/winsec"
)

// pipePrefix starts the name of every fleet's control pipe.
const pipePrefix = `\\.\pipe\agents-fleet-`

// SocketPath returns the name of the fleet's control pipe,
// \\.\pipe\agents-fleet-<id>: on Windows the control socket is a named
// pipe (controlsock.Listen), and pipes have a namespace of their own, not
// under fleetHome.
func SocketPath(fleetHome, id string) string { return pipePrefix + id }

// busyBound bounds how long a probe waits while every instance of a pipe
// is taken: the server makes the next one as it accepts.
const busyBound = 2 * time.Second

// errPipeBusy is probePipe's error for a pipe that stayed busy.
var errPipeBusy = errors.New("every instance of the pipe stayed busy")

// probePipe opens the local pipe name once and returns the pid of the
// process that serves it and the pipe's security descriptor. The server
// sees a client that goes away without a hello.
func probePipe(name string) (pid int, sd *windows.SECURITY_DESCRIPTOR, err error) {
	deadline := time.Now().Add(busyBound)
	h, err := winsec.OpenPipe(name)
	for errors.Is(err, windows.ERROR_PIPE_BUSY) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		h, err = winsec.OpenPipe(name)
	}
	if errors.Is(err, windows.ERROR_PIPE_BUSY) {
		return 0, nil, errPipeBusy
	}
	if err != nil {
		return 0, nil, err
	}
	defer windows.CloseHandle(h)
	var id uint32
	if err := windows.GetNamedPipeServerProcessId(h, &id); err != nil {
		return 0, nil, fmt.Errorf("the process serving the pipe: %w", err)
	}
	sd, err = winsec.Read(h)
	return int(id), sd, err
}

// alive reports whether d's fleet runs: its pid is alive and serves the
// pipe named for its id. Windows and Wine give a pid out again as soon as
// it is free, so the pid alone would keep a dead fleet's descriptor alive.
// A pipe whose instances all stay busy counts as served by the fleet: no
// one else makes a pipe of that name.
func alive(d Descriptor) bool {
	if !PidAlive(d.PID) {
		return false
	}
	pid, _, err := probePipe(SocketPath(d.FleetHome, d.ID))
	return errors.Is(err, errPipeBusy) || err == nil && pid == d.PID
}

// checkSocket returns a *ValidationError unless d's pipe (its name checked
// already) is served by d's pid, is owned by the user and lets no one else
// in.
func checkSocket(d Descriptor) error {
	pid, sd, err := probePipe(d.SocketPath)
	if err != nil {
		return invalid("socketPath", "%s: %v", d.SocketPath, err)
	}
	if pid != d.PID {
		return invalid("socketPath", "%s is served by process %d, not by the fleet's process %d (stale descriptor)", d.SocketPath, pid, d.PID)
	}
	if err := winsec.CheckPrivate(sd); err != nil {
		return invalid("socketPath", "%s %v", d.SocketPath, err)
	}
	return nil
}

// removeStaleSocket has nothing to do: a pipe goes away with the last
// handle to it, so a dead fleet leaves none.
func removeStaleSocket(string) {}
