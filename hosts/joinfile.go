package hosts

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"

	"github.com/nats-io/nkeys"

	"github.com/agents-fleet/fleet/config"
	"github.com/agents-fleet/fleet/hosts/naming"
)

// JoinFile is what `fleet hosts add` writes and `fleet join` reads: where
// the hub is, how to know it (the fleet's CA certificate, trusted alone),
// and the host's credential (an NKey seed, the only copy). It is a secret:
// written 0600, and refused by join when others may read it.
type JoinFile struct {
	Version int    `json:"version"`
	Name    string `json:"name"`
	Hub     string `json:"hub"`  // host:port the host dials
	CA      string `json:"ca"`   // PEM
	Seed    string `json:"seed"` // the host's NKey seed
	// Slots and Labels are what the host was enrolled with; `fleet join`
	// flags override them.
	Slots  int      `json:"slots"`
	Labels []string `json:"labels,omitempty"`
}

// joinVersion is the join file format this build writes and reads.
const joinVersion = 1

// maxJoinFile bounds a join file (a CA certificate and a few short fields).
const maxJoinFile = 64 << 10

// Encode is the join file's bytes.
func (j JoinFile) Encode() ([]byte, error) {
	b, err := json.MarshalIndent(j, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// WriteJoinFile writes j to path, a new file (never over an existing one)
// with mode 0600.
func WriteJoinFile(path string, j JoinFile) error {
	data, err := j.Encode()
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("join file: %w", err)
	}
	err = f.Chmod(0o600) // the umask can only narrow it; be exact all the same
	if err == nil {
		_, err = f.Write(data)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("join file %s: %w", path, err)
	}
	return nil
}

// ReadJoinFile reads and checks the join file at path. One that others
// than its owner may read is refused: it holds the host's credential.
func ReadJoinFile(path string) (JoinFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return JoinFile{}, fmt.Errorf("join file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return JoinFile{}, fmt.Errorf("join file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return JoinFile{}, fmt.Errorf("join file %s is not a regular file", path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return JoinFile{}, fmt.Errorf("join file %s has mode %04o; it holds this host's credential, so only you may read it: chmod 600 %s", path, perm, path)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxJoinFile+1))
	if err != nil {
		return JoinFile{}, fmt.Errorf("join file %s: %w", path, err)
	}
	if len(data) > maxJoinFile {
		return JoinFile{}, fmt.Errorf("join file %s is over %d bytes", path, maxJoinFile)
	}
	j, err := ParseJoinFile(data)
	if err != nil {
		return JoinFile{}, fmt.Errorf("join file %s: %w", path, err)
	}
	return j, nil
}

// ParseJoinFile decodes and checks a join file's bytes.
func ParseJoinFile(data []byte) (JoinFile, error) {
	var j JoinFile
	if err := json.Unmarshal(data, &j); err != nil {
		return JoinFile{}, err
	}
	if j.Version != joinVersion {
		return JoinFile{}, fmt.Errorf("format version %d; this fleet reads %d", j.Version, joinVersion)
	}
	if err := naming.CheckName(j.Name); err != nil {
		return JoinFile{}, err
	}
	if err := checkHubAddr(j.Hub); err != nil {
		return JoinFile{}, err
	}
	if _, err := CAPool([]byte(j.CA)); err != nil {
		return JoinFile{}, fmt.Errorf("ca: %w", err)
	}
	kp, err := nkeys.FromSeed([]byte(j.Seed))
	if err != nil {
		return JoinFile{}, fmt.Errorf("seed: %w", err)
	}
	pub, err := kp.PublicKey()
	kp.Wipe()
	if err != nil || !nkeys.IsValidPublicUserKey(pub) {
		return JoinFile{}, errors.New("seed: not a user NKey seed")
	}
	if err := naming.CheckSlots(j.Slots); err != nil {
		return JoinFile{}, err
	}
	if err := naming.CheckLabels(j.Labels); err != nil {
		return JoinFile{}, err
	}
	return j, nil
}

// checkHubAddr checks an address hosts dial: host:port with a host that
// is not a wildcard and a port from 1 to 65535.
func checkHubAddr(addr string) error {
	if err := config.CheckHostsAdvertise(addr); err != nil {
		return fmt.Errorf("hub address %w", err)
	}
	return nil
}

// isUnspecified reports whether host is a wildcard address (0.0.0.0, ::).
func isUnspecified(host string) bool {
	ip := net.ParseIP(host)
	return ip != nil && ip.IsUnspecified()
}
