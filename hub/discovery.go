package hub

import (
	"context"
	"log/slog"
	"time"

	"github.com/agents-fleet/fleet/registry"
)

// scan is one listing of the registry dir.
type scan struct {
	entries []registry.Entry
	err     error
}

// watchRegistry lists dir whenever it may have changed (registry.Watch)
// and hands each listing to emit, until ctx is done or emit returns false.
func watchRegistry(ctx context.Context, dir string, rescan time.Duration, log *slog.Logger, emit func(scan) bool) {
	registry.Watch(ctx, dir, rescan, log, func() bool {
		entries, err := registry.List(dir)
		return emit(scan{entries: entries, err: err})
	})
}
