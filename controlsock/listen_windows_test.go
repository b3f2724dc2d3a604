//go:build windows

package controlsock

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/windows"

	"github.com/agents-fleet/fleet/internal/testdir"
	"github.com/agents-fleet/fleet/internal/testwait"
	"github.com/agents-fleet/fleet/internal/winsec"
	"github.com/agents-fleet/fleet/protocol"
)

// TestPipeSecurityDescriptor reads the pipe's security descriptor back
// through a client handle: the user is its owner and group and the one ACE
// of its protected DACL, and the pipe is served by this process.
func TestPipeSecurityDescriptor(t *testing.T) {
	h := newHarness(t, nil)
	user, err := winsec.UserSID()
	if err != nil {
		t.Fatal(err)
	}
	// Busy until Serve accepts.
	var ph windows.Handle
	testwait.For(t, testwait.Bound, "the pipe to take a client", func() bool {
		ph, err = winsec.OpenPipe(h.path)
		return !errors.Is(err, windows.ERROR_PIPE_BUSY)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer windows.CloseHandle(ph)
	var pid uint32
	if err := windows.GetNamedPipeServerProcessId(ph, &pid); err != nil || int(pid) != os.Getpid() {
		t.Errorf("server pid %d, %v; want %d", pid, err, os.Getpid())
	}
	sd, err := winsec.Read(ph)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %s", h.path, sd)
	if owner, _, err := sd.Owner(); err != nil || !owner.Equals(user) {
		t.Errorf("owner %v (%v), want %s", owner, err, user)
	}
	if group, _, err := sd.Group(); err != nil || !group.Equals(user) {
		t.Errorf("group %v (%v), want %s", group, err, user)
	}
	if control, _, err := sd.Control(); err != nil || control&windows.SE_DACL_PROTECTED == 0 {
		t.Errorf("control %#x (%v): the DACL is not protected from inheritance", control, err)
	}
	dacl, _, err := sd.DACL()
	if err != nil || dacl == nil {
		t.Fatalf("DACL %v, %v", dacl, err)
	}
	if dacl.AceCount != 1 {
		t.Fatalf("%d ACEs, want 1", dacl.AceCount)
	}
	var ace *windows.ACCESS_ALLOWED_ACE
	if err := windows.GetAce(dacl, 0, &ace); err != nil {
		t.Fatal(err)
	}
	if sid := (*windows.SID)(unsafe.Pointer(&ace.SidStart)); ace.Header.AceType != windows.ACCESS_ALLOWED_ACE_TYPE || !sid.Equals(user) {
		t.Errorf("ACE type %d for %s, want access allowed for %s", ace.Header.AceType, sid, user)
	}
	if err := winsec.CheckPrivate(sd); err != nil {
		t.Errorf("CheckPrivate: %v", err)
	}
}

// TestFirstClientAfterListen: the first client is served (under Wine it
// would land on go-winio's placeholder instance and hang, but for knock).
func TestFirstClientAfterListen(t *testing.T) {
	h := newHarness(t, nil)
	c := h.dial()
	c.sendRaw(`{"type":"hello","token":"` + testToken + `","clientKind":"other"}`)
	if m := c.next(); m.MessageType() != protocol.TypeWelcome {
		t.Fatalf("first frame %s", mustJSON(m))
	}
}

func TestListenPipe(t *testing.T) {
	path := testdir.SocketPath(t)
	ln, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	// A live pipe is never shared.
	if _, err := Listen(path); err == nil || !strings.Contains(err.Error(), "another fleet") {
		t.Fatalf("second Listen on a live pipe: %v", err)
	}
	ln.Close()
	// Its name is free again once it is closed: nothing is left behind.
	ln, err = Listen(path)
	if err != nil {
		t.Fatalf("Listen after Close: %v", err)
	}
	ln.Close()

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := Dial(ctx, path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Dial of a closed pipe = %v, want fs.ErrNotExist", err)
	}
	// Only local pipes: a host in the name would be reached over the network.
	for _, p := range []string{`\\host\pipe\agents-fleet-1-ab`, `C:\fleet\control\1-ab.sock`, `\\.\pipe\`} {
		if _, err := Listen(p); err == nil || !strings.Contains(err.Error(), "not the name of a local named pipe") {
			t.Errorf("Listen(%s) = %v", p, err)
		}
		if _, err := Dial(ctx, p); err == nil || !strings.Contains(err.Error(), "not the name of a local named pipe") {
			t.Errorf("Dial(%s) = %v", p, err)
		}
	}
}
