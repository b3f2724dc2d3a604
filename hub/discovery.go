package hub

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/agents-fleet/fleet/registry"
)

// scan is one listing of the registry dir.
type scan struct {
	entries []registry.Entry
	err     error
}

// watchRegistry lists dir on every change fsnotify reports (debounced) and
// at least every rescan, and hands each listing to emit. fsnotify is the
// fast path; the rescan is what makes a missed event (or a dir created
// later, or a platform without inotify) harmless. It returns when ctx is
// done.
func watchRegistry(ctx context.Context, dir string, rescan time.Duration, log *slog.Logger, emit func(scan) bool) {
	var events <-chan fsnotify.Event
	var errs <-chan error
	var w *fsnotify.Watcher
	watching := false
	defer func() {
		if w != nil {
			w.Close()
		}
	}()
	if nw, err := fsnotify.NewWatcher(); err != nil {
		log.Warn("registry watch unavailable; rescanning periodically", "err", err)
	} else {
		w, events, errs = nw, nw.Events, nw.Errors
	}
	tryWatch := func() {
		if w == nil || watching {
			return
		}
		if err := w.Add(dir); err == nil {
			watching = true
		} else if !os.IsNotExist(err) {
			log.Debug("registry watch", "dir", dir, "err", err)
		}
	}
	list := func() bool {
		tryWatch()
		entries, err := registry.List(dir)
		return emit(scan{entries: entries, err: err})
	}
	if !list() {
		return
	}
	tick := time.NewTicker(rescan)
	defer tick.Stop()
	debounce := time.NewTimer(time.Hour)
	debounce.Stop()
	defer debounce.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if !list() {
				return
			}
		case <-debounce.C:
			if !list() {
				return
			}
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			if ev.Has(fsnotify.Remove) && ev.Name == dir {
				watching = false
			}
			debounce.Reset(50 * time.Millisecond)
		case err, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			log.Debug("registry watch error", "err", err)
		}
	}
}
