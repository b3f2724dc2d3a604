package hosts

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/agents-fleet/fleet/internal/lockfile"
	"github.com/agents-fleet/fleet/registry"
)

// The files of <fleetHome>/hosts (a 0700 directory; every file 0600).
const (
	registryFile = "hosts.json"  // the enrolled hosts (Registry)
	statusFile   = "status.json" // what the running hub saw (Status)
	lockName     = "hosts.lock"  // held while hosts.json or the PKI changes
	hubLockName  = "hub.lock"    // held by the one fleet that runs the hub
	caCertFile   = "ca.pem"
	caKeyFile    = "ca-key.pem"
	certFile     = "server.pem"
	keyFile      = "server-key.pem"
	// jetstreamDir is where the hub's JetStream keeps its store: the
	// server makes it under its StoreDir, which is the hosts directory.
	jetstreamDir = "jetstream"
)

// Dir is the hosts directory of a fleet home.
func Dir(home string) string { return filepath.Join(home, "hosts") }

// ensureDir makes dir private (0700, the user's, not a symlink).
func ensureDir(dir string) error { return registry.EnsurePrivateDir(dir) }

// lockWait bounds how long a command waits for another one that changes
// the hosts directory (each holds the lock for milliseconds).
const lockWait = 10 * time.Second

// lockDir takes the hosts directory's lock, waiting up to lockWait for
// another holder, so that concurrent `fleet hosts add` lose no entry and
// the PKI is made once.
func lockDir(dir string) (*lockfile.Lock, error) {
	if err := ensureDir(dir); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, lockName)
	deadline := time.Now().Add(lockWait)
	pause := time.Millisecond
	for {
		l, err := lockfile.TryLock(path)
		switch {
		case err == nil:
			return l, nil
		case errors.Is(err, lockfile.ErrUnsupported):
			return nil, fmt.Errorf("hosts need file locks, which this platform lacks: %w", err)
		case !errors.Is(err, lockfile.ErrBusy):
			return nil, err
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s is held by another fleet command for over %v", path, lockWait)
		}
		time.Sleep(pause)
		pause = min(2*pause, 50*time.Millisecond)
	}
}

// writeFileAtomic replaces path with data (mode 0600): written to a
// temporary file beside it, synced, then renamed over it, so a reader sees
// the old file or the new one, never half of one.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*") // 0600
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// maxFileSize bounds the files of the hosts directory that are read whole.
const maxFileSize = 4 << 20

// readFile reads a file of the hosts directory, refusing one over
// maxFileSize.
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	if fi.Size() > maxFileSize {
		return nil, fmt.Errorf("%s is %d bytes; the limit is %d", path, fi.Size(), maxFileSize)
	}
	buf := make([]byte, fi.Size())
	if _, err := io.ReadFull(f, buf); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return buf, nil
}
