//go:build unix

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agents-fleet/fleet/e2e/e2etest"
)

// Another unprivileged user can neither read the token nor connect.
// Unix-only: the other user is uid 65534, and the access is the files'
// permission bits.
func TestOtherUserLockedOut(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to run a command as another user")
	}
	e2etest.RequireTool(t, "socat")
	e := e2etest.NewEnv(t)
	d := e.Start("--control-socket")
	asNobody := func(name string, args ...string) (string, error) {
		cmd := exec.Command(name, args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		cmd.Stdin = strings.NewReader(`{"type":"ping"}` + "\n")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := asNobody("cat", d.Desc.TokenPath); err == nil {
		t.Fatalf("another user read the token: %s", out)
	}
	if out, err := asNobody("socat", "-t", "1", "-", "UNIX-CONNECT:"+d.Desc.SocketPath); err == nil || !strings.Contains(out, "ermission denied") {
		t.Fatalf("another user connected: %v %s", err, out)
	}
	for _, p := range []string{d.Desc.TokenPath, d.Desc.SocketPath, filepath.Dir(d.Desc.SocketPath)} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		want := os.FileMode(0o600)
		if fi.IsDir() {
			want = 0o700
		}
		if fi.Mode().Perm() != want {
			t.Fatalf("%s mode %v, want %v", p, fi.Mode().Perm(), want)
		}
	}
	d.Stop()
}
