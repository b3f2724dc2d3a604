//go:build windows

package registry

import (
	"net"
	"path/filepath"
	"testing"

	"github.com/Microsoft/go-winio"

	"github.com/agents-fleet/fleet/internal/winsec"
)

// platformTampers are the Windows ways to spoil a fleet: access lists that
// let others in, and a pipe that is not the fleet's.
var platformTampers = []tamper{
	{"socketPath in the Unix form", func(t *testing.T, f *fleet) {
		f.d.SocketPath = filepath.Join(ControlDir(f.home), f.d.ID+".sock")
	}, "socketPath", "but fleetHome and id give"},
	{"control dir lets others in", func(t *testing.T, f *fleet) { grantEveryone(t, ControlDir(f.home)) }, "fleetHome", "lets S-1-1-0"},
	{"token lets others in", func(t *testing.T, f *fleet) { grantEveryone(t, f.d.TokenPath) }, "tokenPath", "lets S-1-1-0"},
	// The descriptor's pid runs, but the pipe of its name is served by
	// another process (this one).
	{"pipe of another process", func(t *testing.T, f *fleet) {
		*f = *newFleet(t, f.home, runningPID(t), true)
	}, "socketPath", "is served by process"},
	{"pipe lets others in", func(t *testing.T, f *fleet) {
		f.ln.Close()
		user, err := winsec.UserSID()
		if err != nil {
			t.Fatal(err)
		}
		u := user.String()
		ln, err := winio.ListenPipe(f.d.SocketPath, &winio.PipeConfig{SecurityDescriptor: "O:" + u + "G:" + u + "D:P(A;;GA;;;" + u + ")(A;;GR;;;WD)"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go serveNothing(ln)
	}, "socketPath", "lets S-1-1-0"},
}

// serveNothing accepts connections and closes them until ln is closed.
func serveNothing(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		c.Close()
	}
}
