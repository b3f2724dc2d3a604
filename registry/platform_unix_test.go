//go:build unix

package registry

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// exitCommand is a command that exits at once (deadPID).
var exitCommand = []string{"true"}

// symlinks says whether the tests can make symbolic links.
const symlinks = true

// assertPrivate checks that path is private: a directory 0700, a file 0600.
func assertPrivate(t *testing.T, path string) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	want := fs.FileMode(0o600)
	if fi.IsDir() {
		want = fs.ModeDir | 0o700
	}
	assertMode(t, path, want)
}

func TestMaxSocketPathMatchesSockaddr(t *testing.T) {
	if want := len(syscall.RawSockaddrUnix{}.Path) - 1; MaxSocketPath != want {
		t.Fatalf("MaxSocketPath = %d, sun_path allows %d", MaxSocketPath, want)
	}
}

// TestSocketAtLimit binds a socket whose path is exactly MaxSocketPath bytes.
func TestSocketAtLimit(t *testing.T) {
	base := shortHome(t)
	dir := filepath.Join(base, strings.Repeat("d", MaxSocketPath-len(base)-len("/s.sock")-1))
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "s.sock")
	if len(p) != MaxSocketPath {
		t.Fatalf("test path is %d bytes", len(p))
	}
	if err := CheckSocketPath(p); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", p)
	if err != nil {
		t.Fatalf("listen on a %d-byte path: %v", len(p), err)
	}
	ln.Close()
	if err := CheckSocketPath(p + "x"); err == nil {
		t.Fatalf("CheckSocketPath accepted %d bytes", len(p)+1)
	}
}

// TestForeignOwner needs root to hand files to another user.
func TestForeignOwner(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to chown")
	}
	const nobody = 65534
	chown := func(t *testing.T, p string) {
		t.Helper()
		if err := os.Lchown(p, nobody, nobody); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("EnsurePrivateDir", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "d")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		chown(t, dir)
		err := EnsurePrivateDir(dir)
		if err == nil || !strings.Contains(err.Error(), "owned by uid 65534") {
			t.Fatalf("EnsurePrivateDir = %v", err)
		}
	})
	t.Run("ReadToken", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "t")
		writeFile(t, p, "tok", 0o600)
		chown(t, p)
		if _, err := ReadToken(p); err == nil || !strings.Contains(err.Error(), "owned by uid 65534") {
			t.Fatalf("ReadToken = %v", err)
		}
	})
	for _, which := range []string{"control dir", "token", "socket"} {
		t.Run("Validate "+which, func(t *testing.T) {
			f := newFleet(t, shortHome(t), os.Getpid(), true)
			field := map[string]string{"control dir": "fleetHome", "token": "tokenPath", "socket": "socketPath"}[which]
			chown(t, map[string]string{"control dir": ControlDir(f.home), "token": f.d.TokenPath, "socket": f.d.SocketPath}[which])
			err := Validate(f.d)
			ve, ok := err.(*ValidationError)
			if !ok || ve.Field != field || !strings.Contains(ve.Reason, "owned by uid 65534") {
				t.Fatalf("Validate = %v", err)
			}
		})
	}
}

func TestPaths(t *testing.T) {
	if got := ControlDir("/h"); got != "/h/control" {
		t.Errorf("ControlDir = %q", got)
	}
	if got := SocketPath("/h", "1-ab"); got != "/h/control/1-ab.sock" {
		t.Errorf("SocketPath = %q", got)
	}
	if got := TokenPath("/h", "1-ab"); got != "/h/control/1-ab.token" {
		t.Errorf("TokenPath = %q", got)
	}
}

func TestPruneStale(t *testing.T) {
	dir := t.TempDir()
	home := shortHome(t)

	live := newFleet(t, home, os.Getpid(), true)
	dead := newFleet(t, home, deadPID(t), true)
	// A crashed fleet leaves its socket file behind.
	dead.ln.(*net.UnixListener).SetUnlinkOnClose(false)
	dead.ln.Close()

	// A dead descriptor pointing at paths not derived from its fleetHome:
	// the descriptor goes, the files it names stay.
	other := newFleet(t, shortHome(t), os.Getpid(), false)
	foreign := newFleet(t, home, dead.d.PID, false)
	foreign.d.ID = dead.d.ID[:strings.IndexByte(dead.d.ID, '-')] + "-ff"
	foreign.d.SocketPath = other.d.SocketPath
	foreign.d.TokenPath = other.d.TokenPath
	if err := os.WriteFile(other.d.SocketPath, nil, 0o600); err != nil {
		t.Fatal(err)
	}

	malformed := pruneWith(t, dir, []*fleet{live, dead, foreign}, dead, foreign)
	for _, p := range []string{dead.d.SocketPath, dead.d.TokenPath, filepath.Join(dir, dead.d.ID+".json"), filepath.Join(dir, foreign.d.ID+".json")} {
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s still there (%v)", p, err)
		}
	}
	for _, p := range []string{live.d.SocketPath, live.d.TokenPath, filepath.Join(dir, live.d.ID+".json"), malformed, other.d.SocketPath, other.d.TokenPath} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s removed: %v", p, err)
		}
	}
}

func TestInitAlive(t *testing.T) {
	if !PidAlive(1) {
		t.Error("pid 1 not alive")
	}
}

func assertMode(t *testing.T, path string, want fs.FileMode) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode() &^ (fs.ModeSetgid | fs.ModeSticky); got != want {
		t.Errorf("%s mode = %v, want %v", path, got, want)
	}
}
