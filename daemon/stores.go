package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agents-fleet/fleet/intel"
	"github.com/agents-fleet/fleet/native"
	"github.com/agents-fleet/fleet/registry"
	"github.com/agents-fleet/fleet/store"
)

// A fleet home's stores: the fleet and every command that reads them open
// them here, and nowhere else.
//
//	<home>/state/fleet.db          sessions, tasks, the journal (package store)
//	<home>/state/native.db         native roots (package native)
//	<home>/intel/fleet-intel.db    intelligence, shared by every session (package intel)

// ErrNoStore: the fleet home has no such store yet. Commands that only
// read branch on it rather than make an empty store.
var ErrNoStore = errors.New("it is made when a fleet first runs")

func storePath(home string) string { return filepath.Join(home, "state", "fleet.db") }

// ensureState makes <home>/state, where the stores and session locks
// live, private to the user.
func ensureState(home string) error { return ensureFolder(filepath.Join(home, "state")) }

// ensureFolder makes a folder of the fleet home private to the user (on
// Windows from its creation: a folder made by a store's own MkdirAll would
// take whatever its parent passes on).
func ensureFolder(dir string) error {
	if err := registry.EnsurePrivateDir(dir); err != nil {
		return fmt.Errorf("fleet home folder: %w", err)
	}
	return nil
}

// OpenStore opens the session store, creating it when absent.
func OpenStore(home string) (*store.Store, error) {
	if err := ensureState(home); err != nil {
		return nil, err
	}
	return store.Open(storePath(home))
}

// OpenExistingStore opens the session store a fleet made; ErrNoStore when
// none has yet.
func OpenExistingStore(home string) (*store.Store, error) {
	if err := existing("session store", storePath(home)); err != nil {
		return nil, err
	}
	return OpenStore(home)
}

// OpenIntel opens the intelligence store, creating it when absent.
func OpenIntel(home string) (*intel.Store, error) {
	if err := ensureFolder(filepath.Dir(intel.DefaultPath(home))); err != nil {
		return nil, err
	}
	return intel.Open(intel.DefaultPath(home))
}

// OpenExistingIntel opens the intelligence store a fleet made; ErrNoStore
// when none has yet.
func OpenExistingIntel(home string) (*intel.Store, error) {
	if err := existing("intel store", intel.DefaultPath(home)); err != nil {
		return nil, err
	}
	return OpenIntel(home)
}

// openNativeStore opens the native roots' store, creating it when absent.
func openNativeStore(home string) (*native.Store, error) {
	if err := ensureState(home); err != nil {
		return nil, err
	}
	return native.Open(filepath.Join(home, "state", "native.db"))
}

// existing is ErrNoStore, saying which store, when path does not exist.
func existing(what, path string) error {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("no %s yet at %s: %w", what, path, ErrNoStore)
	}
	return nil
}
