package testwait

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestUntilSeesAConditionBecomeTrue(t *testing.T) {
	var set atomic.Bool
	go func() {
		time.Sleep(20 * time.Millisecond) // the other side, late on purpose
		set.Store(true)
	}()
	if !Until(Bound, set.Load) {
		t.Fatal("Until did not see the condition become true")
	}
}

func TestUntilGivesUpAtTheBound(t *testing.T) {
	start := time.Now()
	if Until(50*time.Millisecond, func() bool { return false }) {
		t.Fatal("Until reported a condition that never held")
	}
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Fatalf("gave up after %v, before the bound", d)
	}
}

// fatalRecorder is a testing.TB whose Fatalf records instead of stopping.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Helper() {}

func (f *fatalRecorder) Fatalf(format string, args ...any) { f.msg = fmt.Sprintf(format, args...) }

func TestForNamesWhatAndTheBound(t *testing.T) {
	f := &fatalRecorder{TB: t}
	For(f, 20*time.Millisecond, "the moon to rise", func() bool { return false })
	if !strings.Contains(f.msg, "the moon to rise") || !strings.Contains(f.msg, "20ms") {
		t.Fatalf("failure message %q", f.msg)
	}
	f.msg = ""
	For(f, 20*time.Millisecond, "something true", func() bool { return true })
	if f.msg != "" {
		t.Fatalf("failed on a condition that held: %q", f.msg)
	}
}

// TestUntilLeavesACostlyConditionHalfTheTime: a condition that takes 40 ms
// (a command run per poll) is polled at most once per 80 ms.
func TestUntilLeavesACostlyConditionHalfTheTime(t *testing.T) {
	calls := 0
	Until(400*time.Millisecond, func() bool {
		calls++
		time.Sleep(40 * time.Millisecond) // the condition's own cost
		return false
	})
	if calls > 6 {
		t.Fatalf("%d polls of a 40 ms condition in 400 ms, want at most 6", calls)
	}
}
