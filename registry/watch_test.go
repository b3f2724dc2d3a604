package registry

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/internal/testdir"
)

// watchCalls runs Watch on dir in the background and counts its calls.
func watchCalls(t *testing.T, dir string, rescan time.Duration) (calls func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	n := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		Watch(ctx, dir, rescan, nil, func() bool { mu.Lock(); n++; mu.Unlock(); return true })
	}()
	t.Cleanup(func() { cancel(); <-done })
	return func() int { mu.Lock(); defer mu.Unlock(); return n }
}

func waitCalls(t *testing.T, calls func() int, want int, what string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); calls() < want; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d calls after a minute, want %d", what, calls(), want)
		}
	}
}

// A change is reported when fsnotify sees it, not at the next rescan.
func TestWatchReportsAChange(t *testing.T) {
	dir := testdir.New(t)
	calls := watchCalls(t, dir, time.Hour)
	waitCalls(t, calls, 1, "the first listing")
	os.WriteFile(filepath.Join(dir, "x.json"), []byte("{}"), 0o600)
	waitCalls(t, calls, 2, "a descriptor written")
}

// changed returning false ends the watch.
func TestWatchEndsWhenTold(t *testing.T) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		Watch(context.Background(), testdir.New(t), time.Hour, nil, func() bool { return false })
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("Watch went on after changed returned false")
	}
}
