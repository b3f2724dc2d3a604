package registry

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// watchSettle is how long a change of the registry directory must be quiet
// before Watch reports it: a fleet writes its descriptor and token in a few
// steps.
const watchSettle = 50 * time.Millisecond

// Watch calls changed when the registry directory dir may have changed: at
// once, after each change fsnotify reports (debounced), and at least every
// rescan, until ctx ends or changed returns false. fsnotify is the fast
// path; the rescan makes a missed event, a directory created later or a
// platform without inotify harmless. log may be nil.
func Watch(ctx context.Context, dir string, rescan time.Duration, log *slog.Logger, changed func() bool) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var events <-chan fsnotify.Event
	var errs <-chan error
	w, err := fsnotify.NewWatcher()
	if err != nil {
		log.Warn("registry watch unavailable; rescanning periodically", "err", err)
		w = nil
	} else {
		defer w.Close()
		events, errs = w.Events, w.Errors
	}
	watching := false
	report := func() bool {
		if w != nil && !watching {
			// The directory may not exist yet: the rescan tries again.
			if err := w.Add(dir); err == nil {
				watching = true
			} else if !errors.Is(err, fs.ErrNotExist) {
				log.Debug("registry watch", "dir", dir, "err", err)
			}
		}
		return changed()
	}
	if !report() {
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
			if !report() {
				return
			}
		case <-debounce.C:
			if !report() {
				return
			}
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			if ev.Has(fsnotify.Remove) && filepath.Clean(ev.Name) == filepath.Clean(dir) {
				watching = false
			}
			debounce.Reset(watchSettle)
		case err, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			log.Debug("registry watch error", "err", err)
		}
	}
}
