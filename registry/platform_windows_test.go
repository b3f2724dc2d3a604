//go:build windows

package registry

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/sys/windows"

	"github.com/agents-fleet/fleet/internal/winsec"
)

// noSuchFile is how the OS says a file is missing (Wine words it its own
// way).
var noSuchFile = windows.ERROR_FILE_NOT_FOUND.Error()

// exitCommand is a command that exits at once (deadPID).
var exitCommand = []string{"cmd", "/c", "exit"}

// symlinks says whether the tests can make symbolic links: not under Wine
// 8, whose CreateSymbolicLink reports success and makes nothing, nor on
// Windows without the privilege for it.
const symlinks = false

// assertPrivate checks that path is private: its security descriptor,
// read back, names the user as owner and lets no one else in.
func assertPrivate(t *testing.T, path string) {
	t.Helper()
	p, err := windows.UTF16PtrFromString(path)
	if err != nil {
		t.Fatal(err)
	}
	h, err := windows.CreateFile(p, windows.READ_CONTROL, windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE,
		nil, windows.OPEN_EXISTING, windows.FILE_FLAG_BACKUP_SEMANTICS|windows.FILE_FLAG_OPEN_REPARSE_POINT, 0)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer windows.CloseHandle(h)
	sd, err := winsec.Read(h)
	if err != nil {
		t.Fatal(err)
	}
	if err := winsec.CheckPrivate(sd); err != nil {
		t.Errorf("%s %v (%s)", path, err, sd)
	}
}

// grantEveryone lets Everyone read path, as a user could with Explorer.
func grantEveryone(t *testing.T, path string) {
	t.Helper()
	user, err := winsec.UserSID()
	if err != nil {
		t.Fatal(err)
	}
	sd, err := windows.SecurityDescriptorFromString("D:(A;;GA;;;" + user.String() + ")(A;;GR;;;WD)")
	if err != nil {
		t.Fatal(err)
	}
	dacl, _, err := sd.DACL()
	if err != nil {
		t.Fatal(err)
	}
	if err := windows.SetNamedSecurityInfo(path, windows.SE_FILE_OBJECT, windows.DACL_SECURITY_INFORMATION, nil, nil, dacl, nil); err != nil {
		t.Fatal(err)
	}
}

// runningPID starts a process that waits until t ends, and returns its pid.
func runningPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("cmd", "/c", "set /p x=")
	if _, err := cmd.StdinPipe(); err != nil { // held open: set /p waits
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd.Process.Pid
}

func TestPaths(t *testing.T) {
	if got := ControlDir(`C:\h`); got != `C:\h\control` {
		t.Errorf("ControlDir = %q", got)
	}
	if got := SocketPath(`C:\h`, "1-ab"); got != `\\.\pipe\agents-fleet-1-ab` {
		t.Errorf("SocketPath = %q", got)
	}
	if got := TokenPath(`C:\h`, "1-ab"); got != `C:\h\control\1-ab.token` {
		t.Errorf("TokenPath = %q", got)
	}
}

// TestPruneStale: a fleet is stale unless its pid serves the pipe named
// for it. Windows and Wine reuse pids at once, so a descriptor whose pid
// runs is pruned too when that process serves no such pipe.
func TestPruneStale(t *testing.T) {
	dir := filepath.Join(shortHome(t), "sockets")
	home := shortHome(t)

	live := newFleet(t, home, os.Getpid(), true)
	dead := newFleet(t, home, deadPID(t), false)
	// This process runs, but no pipe of the descriptor's name is served:
	// what a pid taken by another program looks like.
	reused := newFleet(t, home, os.Getpid(), false)
	// The pipe is served, by this process, not by the descriptor's.
	child := runningPID(t)
	impostor := newFleet(t, home, child, true)
	malformed := pruneWith(t, dir, []*fleet{live, dead, reused, impostor}, dead, reused, impostor)
	for _, f := range []*fleet{dead, reused, impostor} {
		for _, p := range []string{f.d.TokenPath, filepath.Join(dir, f.d.ID+".json")} {
			if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%s still there (%v)", p, err)
			}
		}
	}
	for _, p := range []string{live.d.TokenPath, filepath.Join(dir, live.d.ID+".json"), malformed} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s removed: %v", p, err)
		}
	}
}
