package tui

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/agents-fleet/fleet/registry"
)

// How the console follows its fleet across restarts: the registry is
// watched (fsnotify, and a rescan as the fallback), every listing goes to
// app.listed, and when the wanted fleet has left the registry its successor
// is attached at once, whatever back-off the old one had reached.

const (
	// rescanEvery bounds how late a registry change is seen when fsnotify
	// misses it (or is unavailable).
	rescanEvery = time.Second
	// settle lets a burst of registry writes (temp file, rename) end before
	// the directory is listed.
	settle = 50 * time.Millisecond
)

// successor returns the live fleet that took over from lost, a fleet last
// seen live at lastSeen: a fleet in the same folder that has lost's name and
// started no earlier than lost did (a restart, with or without --resume),
// or one in the same folder that started after lastSeen under another name
// (a resumed session keeps its own name). A fleet that was already running
// beside lost under another name is not its successor. Same-name
// candidates win, then the newest.
func successor(lost registry.Descriptor, lastSeen time.Time, entries []registry.Entry) (registry.Entry, bool) {
	var best registry.Entry
	found, bestSame := false, false
	if lost.Cwd == "" {
		return best, false
	}
	for _, e := range entries {
		if e.ID == lost.ID || !sameDir(e.Cwd, lost.Cwd) {
			continue
		}
		same := e.Name == lost.Name
		later := !lastSeen.IsZero() && e.StartedAt >= lastSeen.UnixMilli()
		if !(same && e.StartedAt >= lost.StartedAt) && !later {
			continue
		}
		if !found || same && !bestSame || same == bestSame && e.StartedAt > best.StartedAt {
			best, found, bestSame = e, true, same
		}
	}
	return best, found
}

// sameDir says whether a and b name the same folder: the same path, or two
// paths to one directory (a fleet records its $PWD, which may go through a
// symlink).
func sameDir(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	if filepath.Clean(a) == filepath.Clean(b) {
		return true
	}
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	return err == nil && os.SameFile(fa, fb)
}

// watcher hands app.listed a fresh listing of the live fleets on every
// change of the registry directory and at least every rescanEvery, until
// ctx ends. fsnotify is the fast path; the rescan makes a missed event, a
// directory created later or a platform without inotify harmless.
func (a *app) watcher(ctx context.Context) {
	dir := a.cfg.RegistryDir
	var events <-chan fsnotify.Event
	var errs <-chan error
	w, err := fsnotify.NewWatcher()
	if err == nil {
		defer w.Close()
		events, errs = w.Events, w.Errors
	}
	watching := false
	list := func() {
		if w != nil && !watching {
			watching = w.Add(dir) == nil // the directory may not exist yet
		}
		if entries, err := registry.Live(dir); err == nil {
			a.listed(entries)
		}
	}
	list()
	tick := time.NewTicker(rescanEvery)
	defer tick.Stop()
	debounce := time.NewTimer(time.Hour)
	debounce.Stop()
	defer debounce.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			list()
		case <-debounce.C:
			list()
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			if ev.Has(fsnotify.Remove) && filepath.Clean(ev.Name) == filepath.Clean(dir) {
				watching = false
			}
			debounce.Reset(settle)
		case _, ok := <-errs:
			if !ok {
				errs = nil
			}
		}
	}
}
