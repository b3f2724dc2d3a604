// Package registry owns discovery descriptors: the <id>.json files through
// which a fleet with its control socket enabled announces itself to consoles
// and to the Telegram hub (control-socket-protocol.md, "Discovery descriptor";
// DESIGN.md §3).
//
// Layout, all derived from fleetHome so that a reader can check them:
//
//	<registryDir>/<id>.json          descriptor, 0600 (dir 0700)
//	<fleetHome>/control/<id>.sock    control socket
//	<fleetHome>/control/<id>.token   token, 0600, 64 hex chars (dir 0700)
//
// On Windows the control socket is the named pipe \\.\pipe\agents-fleet-<id>,
// and "0600" and "0700" are a security descriptor that lets the user
// alone in (platform_windows.go).
//
// Liveness is kill(pid, 0). A pid can be reused after the fleet died, so a
// stale descriptor can look alive until the new process exits; Validate's
// socket checks and the token handshake are what a reader must rely on. On
// Windows, which reuses pids at once, a fleet is alive only while its pipe
// is served by its pid.
package registry

import (
	"bytes"
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
)

// SchemaVersion is the descriptor schema this package writes and accepts.
const SchemaVersion = 1

// ProtocolVersion is the control-socket wire version a descriptor must announce.
const ProtocolVersion = 1

// MaxDescriptorSize is the largest descriptor file List reads.
const MaxDescriptorSize = 64 << 10

// Descriptor is the content of <registryDir>/<id>.json.
type Descriptor struct {
	SchemaVersion   int    `json:"schemaVersion"`
	ID              string `json:"id"` // "<pid>-<suffix>", suffix 8 lowercase hex chars from crypto/rand
	PID             int    `json:"pid"`
	Name            string `json:"name"`
	Cwd             string `json:"cwd"`
	SocketPath      string `json:"socketPath"`
	TokenPath       string `json:"tokenPath"`
	FleetHome       string `json:"fleetHome"`
	StartedAt       int64  `json:"startedAt"` // epoch ms
	ProtocolVersion int    `json:"protocolVersion"`
	HubAttach       bool   `json:"hubAttach,omitempty"` // present only when opted in
}

// NewID returns a fresh descriptor id for pid: "<pid>-<8 lowercase hex>".
func NewID(pid int) (string, error) {
	if pid <= 0 {
		return "", fmt.Errorf("new descriptor id: invalid pid %d", pid)
	}
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("new descriptor id: %w", err)
	}
	return strconv.Itoa(pid) + "-" + hex.EncodeToString(b[:]), nil
}

// parseID splits id into its pid and suffix. The suffix must be 1–64
// lowercase letters or digits: it becomes part of file names, so nothing
// that could traverse or hide a path gets through.
func parseID(id string) (pid int, err error) {
	p, suffix, ok := strings.Cut(id, "-")
	if !ok {
		return 0, fmt.Errorf("id %q is not of the form <pid>-<suffix>", id)
	}
	pid, err = strconv.Atoi(p)
	if err != nil || pid <= 0 || p != strconv.Itoa(pid) {
		return 0, fmt.Errorf("id %q does not start with a pid", id)
	}
	if len(suffix) == 0 || len(suffix) > 64 {
		return 0, fmt.Errorf("id %q: suffix must be 1 to 64 characters", id)
	}
	for _, c := range []byte(suffix) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'z') {
			return 0, fmt.Errorf("id %q: suffix may contain only lowercase letters and digits", id)
		}
	}
	return pid, nil
}

// ControlDir returns <fleetHome>/control, the private directory of sockets and tokens.
func ControlDir(fleetHome string) string { return filepath.Join(fleetHome, "control") }

// TokenPath returns <fleetHome>/control/<id>.token.
func TokenPath(fleetHome, id string) string {
	return filepath.Join(ControlDir(fleetHome), id+".token")
}

// CheckSocketPath returns a clear error naming the path, its length and the
// limit when p is too long to bind as a Unix socket on this OS.
func CheckSocketPath(p string) error {
	if len(p) > MaxSocketPath {
		return fmt.Errorf("control socket path %s is %d bytes, over the %s limit of %d bytes for Unix sockets; set AGENTS_FLEET_HOME to a shorter directory",
			p, len(p), runtime.GOOS, MaxSocketPath)
	}
	return nil
}

// descriptorPath returns <dir>/<id>.json after checking that id is safe as a file name.
func descriptorPath(dir, id string) (string, error) {
	if _, err := parseID(id); err != nil {
		return "", err
	}
	return filepath.Join(dir, id+".json"), nil
}

// Write writes <dir>/<id>.json atomically (temp file 0600 in dir + rename),
// creating dir with EnsurePrivateDir. Readers see the old file or the new
// one, never a partial one.
func Write(dir string, d Descriptor) (path string, err error) {
	path, err = descriptorPath(dir, d.ID)
	if err != nil {
		return "", fmt.Errorf("write descriptor: %w", err)
	}
	if pid, _ := parseID(d.ID); pid != d.PID {
		return "", fmt.Errorf("write descriptor: id %q does not match pid %d", d.ID, d.PID)
	}
	data, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return "", fmt.Errorf("write descriptor: %w", err)
	}
	data = append(data, '\n')
	if err := EnsurePrivateDir(dir); err != nil {
		return "", fmt.Errorf("write descriptor: %w", err)
	}
	// The temp name does not end in .json, so List never sees it.
	tmp, err := createPrivateTemp(dir, "."+d.ID+".json.tmp")
	if err != nil {
		return "", fmt.Errorf("write descriptor: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(data); err != nil {
		return "", fmt.Errorf("write descriptor: %w", err)
	}
	if err = tmp.Sync(); err != nil {
		return "", fmt.Errorf("write descriptor: %w", err)
	}
	if err = tmp.Close(); err != nil {
		return "", fmt.Errorf("write descriptor: %w", err)
	}
	if err = replaceFile(tmp.Name(), path); err != nil {
		return "", fmt.Errorf("write descriptor: %w", err)
	}
	return path, nil
}

// Remove removes <dir>/<id>.json (missing is fine).
func Remove(dir, id string) error {
	path, err := descriptorPath(dir, id)
	if err != nil {
		return fmt.Errorf("remove descriptor: %w", err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove descriptor: %w", err)
	}
	return nil
}

// Entry is a descriptor as listed, with the file it came from and whether its process is alive.
type Entry struct {
	Descriptor
	Path  string
	Alive bool  // the fleet runs (alive: its pid, and on Windows its pipe's server); false when Err is set
	Err   error // unreadable or malformed; Descriptor is then partial or zero
}

// List reads every *.json in dir except hidden ones (missing dir → empty list, no error).
// Unreadable or malformed files — including files over MaxDescriptorSize,
// non-regular files, and a descriptor whose id is malformed, disagrees with
// its pid or with the file name — are returned with Err set. Entries are
// sorted by StartedAt, then ID, then Path.
func List(dir string) ([]Entry, error) {
	des, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list descriptors: %w", err)
	}
	var entries []Entry
	for _, de := range des {
		name := de.Name()
		if !strings.HasSuffix(name, ".json") || strings.HasPrefix(name, ".") {
			continue
		}
		e := Entry{Path: filepath.Join(dir, name)}
		e.Descriptor, e.Err = readDescriptor(e.Path, strings.TrimSuffix(name, ".json"))
		if e.Err == nil {
			e.Alive = alive(e.Descriptor)
		}
		entries = append(entries, e)
	}
	slices.SortFunc(entries, func(a, b Entry) int {
		return cmp.Or(cmp.Compare(a.StartedAt, b.StartedAt), strings.Compare(a.ID, b.ID), strings.Compare(a.Path, b.Path))
	})
	return entries, nil
}

// readDescriptor reads and checks the descriptor file at path, whose file name without .json is base.
func readDescriptor(path, base string) (Descriptor, error) {
	var d Descriptor
	fi, err := os.Lstat(path)
	if err != nil {
		return d, err
	}
	if !fi.Mode().IsRegular() {
		return d, fmt.Errorf("%s: a %s, not a regular file", path, kind(fi.Mode()))
	}
	f, err := openShared(path)
	if err != nil {
		return d, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxDescriptorSize+1))
	if err != nil {
		return d, fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > MaxDescriptorSize {
		return d, fmt.Errorf("%s: descriptor is over the limit of %d bytes", path, MaxDescriptorSize)
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return d, fmt.Errorf("%s: malformed descriptor: %s", path, describeJSONError(data, err))
	}
	if d.ID != base {
		return d, fmt.Errorf("%s: malformed descriptor: id %q does not match the file name", path, d.ID)
	}
	pid, err := parseID(d.ID)
	if err != nil {
		return d, fmt.Errorf("%s: malformed descriptor: %w", path, err)
	}
	if pid != d.PID {
		return d, fmt.Errorf("%s: malformed descriptor: id %q does not match pid %d", path, d.ID, d.PID)
	}
	return d, nil
}

// describeJSONError names the field and the kinds for a type error, the byte
// offset for a syntax error.
func describeJSONError(data []byte, err error) string {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te) && te.Field != "":
		return fmt.Sprintf("field %q has the wrong type (%s)", te.Field, te.Value)
	case errors.As(err, &te):
		return fmt.Sprintf("not a JSON object (%s)", te.Value)
	case errors.As(err, &se):
		line := 1 + bytes.Count(data[:min(int(se.Offset), len(data))], []byte{'\n'})
		return fmt.Sprintf("invalid JSON on line %d: %s", line, se)
	}
	return err.Error()
}

// Live returns only the entries that parse and whose pid is alive.
func Live(dir string) ([]Entry, error) {
	entries, err := List(dir)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(entries, func(e Entry) bool { return e.Err != nil || !e.Alive }), nil
}

// PruneStale removes descriptors of fleets that do not run (Entry.Alive)
// and, best effort, their socket and token when those are the paths derived
// from the descriptor's fleetHome (a descriptor pointing elsewhere gets
// nothing but itself removed). Malformed files are left alone. It returns
// the ids removed; the error joins every failure, and pruning continues past
// them.
func PruneStale(dir string) ([]string, error) {
	entries, err := List(dir)
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, e := range entries {
		if e.Err != nil || e.Alive {
			continue
		}
		if err := os.Remove(e.Path); err != nil {
			if !errors.Is(err, fs.ErrNotExist) { // another fleet pruned it first
				errs = append(errs, fmt.Errorf("prune %s: %w", e.ID, err))
			}
			continue
		}
		removed = append(removed, e.ID)
		if !filepath.IsAbs(e.FleetHome) || filepath.Clean(e.FleetHome) != e.FleetHome {
			continue
		}
		if e.SocketPath == SocketPath(e.FleetHome, e.ID) {
			removeStaleSocket(e.SocketPath)
		}
		if e.TokenPath == TokenPath(e.FleetHome, e.ID) {
			removeIf(e.TokenPath, fs.FileMode.IsRegular)
		}
	}
	return removed, errors.Join(errs...)
}

// removeIf removes path when it is not a symlink, is owned by the current
// user, and its mode passes ok. Errors are ignored: this is best-effort cleanup.
func removeIf(path string, ok func(fs.FileMode) bool) {
	fi, err := lstat(path)
	if err != nil || !ok(fi.Mode()) || checkOwner(fi) != nil {
		return
	}
	os.Remove(path)
}
