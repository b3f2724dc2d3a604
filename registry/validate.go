package registry

import (
	"fmt"
	"path/filepath"
	"unicode/utf8"
)

// MaxNameLen is the longest fleet name Validate accepts, in bytes (config applies the same limit).
const MaxNameLen = 128

// ValidationError is the first problem Validate found in a descriptor.
type ValidationError struct {
	Field  string // JSON name of the offending field
	Reason string
}

func (e *ValidationError) Error() string {
	return fmt.Sprintf("invalid descriptor: %s: %s", e.Field, e.Reason)
}

func invalid(field, format string, args ...any) error {
	return &ValidationError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// Validate checks a descriptor the way a hub must before trusting it, and
// returns a *ValidationError for the first problem:
//
//   - schemaVersion is SchemaVersion, protocolVersion is ProtocolVersion;
//   - id is "<pid>-<suffix>" with the descriptor's pid, pid > 0;
//   - name is at most MaxNameLen bytes of UTF-8 without control characters;
//     cwd, when set, is absolute;
//   - fleetHome is absolute and clean; socketPath and tokenPath are exactly
//     the paths derived from it (SocketPath, TokenPath: on Windows the
//     socket is the pipe \\.\pipe\agents-fleet-<id>), and the socket path
//     fits the OS limit;
//   - the pid is alive;
//   - the control dir is a directory (not a symlink) and the token a regular
//     file (not a symlink), each owned by the user and private: no
//     group/other bits, on Windows an access list that lets no one else in;
//   - the socket exists, is a socket and is owned by the user; on Windows
//     the pipe is served by the descriptor's pid and is owned by the user,
//     and its access list lets no one else in.
//
// Validate does not look at HubAttach: whether to consider the fleet at all
// is the caller's decision.
func Validate(d Descriptor) error {
	if d.SchemaVersion != SchemaVersion {
		return invalid("schemaVersion", "unknown schema version %d (this build reads %d)", d.SchemaVersion, SchemaVersion)
	}
	if d.PID <= 0 {
		return invalid("pid", "must be a positive process id, got %d", d.PID)
	}
	pid, err := parseID(d.ID)
	if err != nil {
		return invalid("id", "%v", err)
	}
	if pid != d.PID {
		return invalid("id", "id %q names pid %d but the descriptor's pid is %d", d.ID, pid, d.PID)
	}
	if d.ProtocolVersion != ProtocolVersion {
		return invalid("protocolVersion", "unsupported protocol version %d (this build speaks %d)", d.ProtocolVersion, ProtocolVersion)
	}
	if err := checkName(d.Name); err != nil {
		return invalid("name", "%v", err)
	}
	if d.Cwd != "" && !filepath.IsAbs(d.Cwd) {
		return invalid("cwd", "must be an absolute path, got %q", d.Cwd)
	}
	if !filepath.IsAbs(d.FleetHome) {
		return invalid("fleetHome", "must be an absolute path, got %q", d.FleetHome)
	}
	if c := filepath.Clean(d.FleetHome); c != d.FleetHome {
		return invalid("fleetHome", "must be a clean path, got %q (clean: %q)", d.FleetHome, c)
	}
	if want := SocketPath(d.FleetHome, d.ID); d.SocketPath != want {
		return invalid("socketPath", "is %q, but fleetHome and id give %q", d.SocketPath, want)
	}
	if err := CheckSocketPath(d.SocketPath); err != nil {
		return invalid("socketPath", "%v", err)
	}
	if want := TokenPath(d.FleetHome, d.ID); d.TokenPath != want {
		return invalid("tokenPath", "is %q, but fleetHome and id give %q", d.TokenPath, want)
	}
	if !PidAlive(d.PID) {
		return invalid("pid", "process %d is not running (stale descriptor)", d.PID)
	}

	dir := ControlDir(d.FleetHome)
	fi, err := lstat(dir)
	if err != nil {
		return invalid("fleetHome", "control directory: %v", err)
	}
	if !fi.IsDir() {
		return invalid("fleetHome", "control directory %s is a %s, not a directory", dir, kind(fi.Mode()))
	}
	if err := checkPrivate(fi); err != nil {
		return invalid("fleetHome", "control directory %s %v", dir, err)
	}

	fi, err = lstat(d.TokenPath)
	if err != nil {
		return invalid("tokenPath", "%v", err)
	}
	if err := checkPrivateFile(fi); err != nil {
		return invalid("tokenPath", "%s %v", d.TokenPath, err)
	}
	return checkSocket(d)
}

// checkName rejects names that would garble a listing or an approval prompt.
func checkName(name string) error {
	if len(name) > MaxNameLen {
		return fmt.Errorf("must be at most %d bytes, got %d", MaxNameLen, len(name))
	}
	if !utf8.ValidString(name) {
		return fmt.Errorf("must be valid UTF-8")
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return fmt.Errorf("must not contain control characters, got %q", name)
		}
	}
	return nil
}
