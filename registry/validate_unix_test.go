//go:build unix

package registry

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// platformTampers are the Unix ways to spoil a fleet: mode bits, symbolic
// links, a socket that is not one, or too long.
var platformTampers = []tamper{
	{"other fleetHome in socketPath", func(t *testing.T, f *fleet) {
		f.d.SocketPath = SocketPath(shortHome(t), f.d.ID)
	}, "socketPath", "but fleetHome and id give"},
	{"control dir 0755", func(t *testing.T, f *fleet) { chmod(t, ControlDir(f.home), 0o755) }, "fleetHome", "has mode 0755"},
	{"control dir is a symlink", func(t *testing.T, f *fleet) {
		real := ControlDir(f.home) + ".real"
		if err := os.Rename(ControlDir(f.home), real); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(real, ControlDir(f.home)); err != nil {
			t.Fatal(err)
		}
	}, "fleetHome", "is a symbolic link, not a directory"},
	{"token world-readable", func(t *testing.T, f *fleet) { chmod(t, f.d.TokenPath, 0o644) }, "tokenPath", "has mode 0644"},
	{"token group-readable", func(t *testing.T, f *fleet) { chmod(t, f.d.TokenPath, 0o640) }, "tokenPath", "has mode 0640"},
	{"token is a symlink", func(t *testing.T, f *fleet) {
		target := filepath.Join(f.home, "elsewhere")
		if err := os.Rename(f.d.TokenPath, target); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, f.d.TokenPath); err != nil {
			t.Fatal(err)
		}
	}, "tokenPath", "is a symbolic link, not a regular file"},
	{"socket is a regular file", func(t *testing.T, f *fleet) {
		f.ln.Close()
		if err := os.WriteFile(f.d.SocketPath, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}, "socketPath", "is a regular file, not a socket"},
	{"socket path too long", func(t *testing.T, f *fleet) {
		long := filepath.Join(f.home, strings.Repeat("h", MaxSocketPath))
		f.d.FleetHome, f.d.SocketPath, f.d.TokenPath = long, SocketPath(long, f.d.ID), TokenPath(long, f.d.ID)
	}, "socketPath", "over the"},
}
