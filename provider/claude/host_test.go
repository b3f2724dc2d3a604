package claude

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agents-fleet/fleet/provider"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recHost is a Host that records every event and permission request.
// Permission answers with decide (allow once when nil).
type recHost struct {
	mu     sync.Mutex
	events []provider.Event
	perms  []provider.PermissionRequest
	decide func(ctx context.Context, r provider.PermissionRequest) (provider.Decision, error)
	answer func(ctx context.Context, q provider.Question) (string, error) // Ask; nil refuses
	asked  []provider.Question
	notify chan struct{} // a token after each event or request
}

func newHost() *recHost { return &recHost{notify: make(chan struct{}, 1)} }

func (h *recHost) poke() {
	select {
	case h.notify <- struct{}{}:
	default:
	}
}

func (h *recHost) Event(ev provider.Event) {
	h.mu.Lock()
	h.events = append(h.events, ev)
	h.mu.Unlock()
	h.poke()
}

func (h *recHost) Permission(ctx context.Context, r provider.PermissionRequest) (provider.Decision, error) {
	h.mu.Lock()
	h.perms = append(h.perms, r)
	decide := h.decide
	h.mu.Unlock()
	h.poke()
	if decide == nil {
		return provider.Decision{Allow: true, OptionID: optAllow}, nil
	}
	return decide(ctx, r)
}

func (h *recHost) Ask(ctx context.Context, q provider.Question) (string, error) {
	h.mu.Lock()
	h.asked = append(h.asked, q)
	answer := h.answer
	h.mu.Unlock()
	h.poke()
	if answer == nil {
		return "", errors.New("recHost: no questions")
	}
	return answer(ctx, q)
}

func (h *recHost) Confirm(ctx context.Context, summary string) (bool, error) {
	return false, errors.New("recHost: no confirmations")
}

func (h *recHost) snapshot() ([]provider.Event, []provider.PermissionRequest) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]provider.Event(nil), h.events...), append([]provider.PermissionRequest(nil), h.perms...)
}

// waitFor waits until cond holds over the events so far, or fails the test
// after bound.
func (h *recHost) waitFor(t testing.TB, bound time.Duration, what string, cond func(evs []provider.Event, perms []provider.PermissionRequest) bool) {
	t.Helper()
	deadline := time.NewTimer(bound)
	defer deadline.Stop()
	for {
		evs, perms := h.snapshot()
		if cond(evs, perms) {
			return
		}
		select {
		case <-h.notify:
		case <-deadline.C:
			t.Fatalf("timed out after %v waiting for %s; events:\n%s", bound, what, dump(evs))
		}
	}
}

// turnEnded waits for the n-th TurnEnded (1-based) and returns it.
func (h *recHost) turnEnded(t testing.TB, n int, bound time.Duration) provider.TurnEnded {
	t.Helper()
	var got provider.TurnEnded
	h.waitFor(t, bound, fmt.Sprintf("TurnEnded #%d", n), func(evs []provider.Event, _ []provider.PermissionRequest) bool {
		c := 0
		for _, ev := range evs {
			if te, ok := ev.(provider.TurnEnded); ok {
				c++
				if c == n {
					got = te
					return true
				}
			}
		}
		return false
	})
	return got
}

func dump(evs []provider.Event) string {
	var sb strings.Builder
	for i, ev := range evs {
		s := fmt.Sprintf("%T %+v", ev, ev)
		if len(s) > 300 {
			s = s[:300] + "…"
		}
		fmt.Fprintf(&sb, "  %2d %s\n", i, s)
	}
	return sb.String()
}

// ofType returns the events of type T.
func ofType[T provider.Event](evs []provider.Event) []T {
	var out []T
	for _, ev := range evs {
		if v, ok := ev.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

// turnUsage sums each turn's Usage events (the ones before each
// TurnEnded); the context fields are the turn's last ones.
func turnUsage(evs []provider.Event) []provider.Usage {
	var out []provider.Usage
	var u provider.Usage
	for _, ev := range evs {
		switch ev := ev.(type) {
		case provider.Usage:
			u.InputTokens += ev.InputTokens
			u.OutputTokens += ev.OutputTokens
			u.CacheReadTokens += ev.CacheReadTokens
			u.CacheWriteTokens += ev.CacheWriteTokens
			u.ContextTokens, u.ContextWindow = ev.ContextTokens, ev.ContextWindow
		case provider.TurnEnded:
			out = append(out, u)
			u = provider.Usage{}
		}
	}
	return out
}

// kinds is the event types in order, e.g. "ToolStarted", consecutive
// repeats kept.
func kinds(evs []provider.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = strings.TrimPrefix(fmt.Sprintf("%T", ev), "provider.")
	}
	return out
}

// inOrder reports whether want is a subsequence of got.
func inOrder(got, want []string) bool {
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	return i == len(want)
}

// waitGone waits until none of pids is alive, or fails.
func waitGone(t testing.TB, bound time.Duration, alive func() []int) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		left := alive()
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes still alive after %v: %v (%s)", bound, left, cmdlines(left))
		}
		time.Sleep(50 * time.Millisecond) // polling /proc: there is no signal for another process's exit
	}
}

func cmdlines(pids []int) string {
	var parts []string
	for _, pid := range pids {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		parts = append(parts, strings.ReplaceAll(strings.TrimRight(string(b), "\x00"), "\x00", " "))
	}
	return strings.Join(parts, "; ")
}
