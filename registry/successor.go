package registry

import (
	"os"
	"path/filepath"
	"time"
)

// Successor returns the live fleet that took over from lost, a fleet last
// seen live at lastSeen: a fleet in the same folder that has lost's name and
// started no earlier than lost did (a restart, with or without --resume),
// or one in the same folder that started after lastSeen under another name
// (a resumed session keeps its own name). A fleet that was already running
// beside lost under another name is not its successor. Same-name
// candidates win, then the newest.
func Successor(lost Descriptor, lastSeen time.Time, entries []Entry) (Entry, bool) {
	var best Entry
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
