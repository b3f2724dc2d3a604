package registry

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestValidateGood(t *testing.T) {
	f := newFleet(t, shortHome(t), os.Getpid(), true)
	if err := Validate(f.d); err != nil {
		t.Fatalf("Validate(good) = %v", err)
	}
	f.d.HubAttach = true
	if err := Validate(f.d); err != nil {
		t.Fatalf("Validate(good, hubAttach) = %v", err)
	}
}

func TestValidateTampered(t *testing.T) {
	tests := []struct {
		name   string
		tamper func(t *testing.T, f *fleet)
		field  string
		reason string // substring
	}{
		{"unknown schemaVersion", func(t *testing.T, f *fleet) { f.d.SchemaVersion = 2 }, "schemaVersion", "unknown schema version 2"},
		{"missing schemaVersion", func(t *testing.T, f *fleet) { f.d.SchemaVersion = 0 }, "schemaVersion", "unknown schema version 0"},
		{"protocolVersion", func(t *testing.T, f *fleet) { f.d.ProtocolVersion = 2 }, "protocolVersion", "unsupported protocol version 2"},
		{"id/pid mismatch", func(t *testing.T, f *fleet) { f.d.PID = 1 }, "id", "but the descriptor's pid is 1"},
		{"id without pid", func(t *testing.T, f *fleet) { f.d.ID = "abc" }, "id", "not of the form <pid>-<suffix>"},
		{"id with path", func(t *testing.T, f *fleet) { f.d.ID = f.d.ID + "/../x" }, "id", "suffix may contain only"},
		{"zero pid", func(t *testing.T, f *fleet) { f.d.PID = 0 }, "pid", "must be a positive process id"},
		{"name with escape", func(t *testing.T, f *fleet) { f.d.Name = "ok\x1b[2Jspoof" }, "name", "control characters"},
		{"relative cwd", func(t *testing.T, f *fleet) { f.d.Cwd = "src" }, "cwd", "absolute"},
		{"relative fleetHome", func(t *testing.T, f *fleet) {
			f.d.FleetHome = "rel/home"
			f.d.SocketPath, f.d.TokenPath = SocketPath("rel/home", f.d.ID), TokenPath("rel/home", f.d.ID)
		}, "fleetHome", `must be an absolute path, got "rel/home"`},
		{"unclean fleetHome", func(t *testing.T, f *fleet) { f.d.FleetHome += "/../" + filepath.Base(f.home) }, "fleetHome", "must be a clean path"},
		{"other fleetHome in socketPath", func(t *testing.T, f *fleet) {
			f.d.SocketPath = SocketPath(shortHome(t), f.d.ID)
		}, "socketPath", "but fleetHome and id give"},
		{"other id in socketPath", func(t *testing.T, f *fleet) {
			f.d.SocketPath = SocketPath(f.home, f.d.ID+"0")
		}, "socketPath", "but fleetHome and id give"},
		{"other fleetHome in tokenPath", func(t *testing.T, f *fleet) {
			f.d.TokenPath = TokenPath(shortHome(t), f.d.ID)
		}, "tokenPath", "but fleetHome and id give"},
		{"dead pid", func(t *testing.T, f *fleet) {
			pid := deadPID(t)
			*f = *newFleet(t, f.home, pid, true)
		}, "pid", "is not running (stale descriptor)"},
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
		{"token missing", func(t *testing.T, f *fleet) { remove(t, f.d.TokenPath) }, "tokenPath", "no such file"},
		{"socket missing", func(t *testing.T, f *fleet) { f.ln.Close() }, "socketPath", "no such file"},
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
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFleet(t, shortHome(t), os.Getpid(), true)
			tt.tamper(t, f)
			err := Validate(f.d)
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Validate = %v, want *ValidationError", err)
			}
			if ve.Field != tt.field || !strings.Contains(ve.Reason, tt.reason) {
				t.Errorf("Validate = %q, want field %q and reason containing %q", err, tt.field, tt.reason)
			}
		})
	}
}

func chmod(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func remove(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
}
