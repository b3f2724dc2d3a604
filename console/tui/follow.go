package tui

import (
	"context"
	"time"

	"github.com/agents-fleet/fleet/registry"
)

// How the console follows its fleet across restarts: the registry is
// watched (fsnotify, and a rescan as the fallback), every listing goes to
// app.listed, and when the wanted fleet has left the registry its successor
// is attached at once, whatever back-off the old one had reached.

// rescanEvery bounds how late a registry change is seen when fsnotify
// misses it (or is unavailable).
const rescanEvery = time.Second

// watcher hands app.listed a fresh listing of the live fleets whenever
// the registry directory may have changed (registry.Watch), until ctx ends.
func (a *app) watcher(ctx context.Context) {
	registry.Watch(ctx, a.cfg.RegistryDir, rescanEvery, nil, func() bool {
		a.list()
		return true
	})
}
