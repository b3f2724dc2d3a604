//go:build unix

package registry

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

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
