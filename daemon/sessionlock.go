package daemon

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/agents-fleet/fleet/internal/lockfile"
	"github.com/agents-fleet/fleet/registry"
)

// lockSession holds <fleetHome>/state/sessions/<id>.lock for the life of
// the process, so that one session is served by one fleet process at a
// time. The kernel drops the lock when the process dies (kill -9
// included), so a lock that is free means nobody serves the session now;
// release deletes the file. errSessionBusy: another process holds it.
// Without flock (Windows) nothing stops two fleet processes from resuming
// one session at once.
func lockSession(home, id string) (release func(), err error) {
	dir := filepath.Join(home, "state", "sessions")
	if err := ensureState(home); err != nil {
		return nil, fmt.Errorf("session lock: %w", err)
	}
	if err := registry.EnsurePrivateDir(dir); err != nil {
		return nil, fmt.Errorf("session lock: %w", err)
	}
	l, err := lockfile.TryLock(filepath.Join(dir, id+".lock"))
	switch {
	case errors.Is(err, lockfile.ErrBusy):
		return nil, errSessionBusy
	case errors.Is(err, lockfile.ErrUnsupported):
		return func() {}, nil
	case err != nil:
		return nil, fmt.Errorf("session lock: %w", err)
	}
	return l.Release, nil
}
