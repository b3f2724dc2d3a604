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

// tamper is a change to a good fleet or its descriptor that Validate
// refuses, naming field and reason.
type tamper struct {
	name   string
	tamper func(t *testing.T, f *fleet)
	field  string
	reason string // substring
}

func TestValidateTampered(t *testing.T) {
	tests := append([]tamper{
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
		{"token missing", func(t *testing.T, f *fleet) { remove(t, f.d.TokenPath) }, "tokenPath", noSuchFile},
		{"socket missing", func(t *testing.T, f *fleet) { f.ln.Close() }, "socketPath", noSuchFile},
	}, platformTampers...)
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

func remove(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
}
