// Package testwait is how tests wait for something another goroutine or
// process makes true: they poll a condition up to a bound instead of
// sleeping and hoping it happened. The bound is reached only when the
// condition never holds, so it is generous: tests run under the race
// detector beside other work on a loaded 2-core machine.
package testwait

import (
	"testing"
	"time"
)

// Bound is the bound for a wait that has no reason to pick its own.
const Bound = 30 * time.Second

// maxPause is the longest pause between two polls: how late a wait can
// see a condition that held for a while.
const maxPause = 50 * time.Millisecond

// For waits until cond holds, and fails t (Fatalf, so only from the test's
// goroutine) with what and bound if it does not hold within bound.
func For(t testing.TB, bound time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Until(bound, cond) {
		t.Fatalf("timed out after %v waiting for %s", bound, what)
	}
}

// Until waits until cond holds and reports whether it did within bound.
// It is for the callers that fail with state of their own (what they saw)
// or wait off the test's goroutine.
//
// It polls often at first, when most conditions come true, then every
// maxPause; and it pauses at least as long as cond took, so that a costly
// condition (one that runs a command) takes at most half the time from
// the code it waits for.
func Until(bound time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(bound)
	pause := time.Millisecond
	for {
		start := time.Now()
		if cond() {
			return true
		}
		now := time.Now()
		if now.After(deadline) {
			return false
		}
		time.Sleep(max(pause, now.Sub(start)))
		pause = min(2*pause, maxPause)
	}
}
