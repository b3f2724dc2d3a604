// Package agentclitest is what the agent adapters' tests share: a Host
// that records a session's events and prompts and answers them as told,
// waits on what it recorded, fake CLIs, and helpers over event lists.
package agentclitest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/provider"
)

// Wait bounds a condition a test waits for when it has no bound of its
// own: generous, as the CLIs run on a loaded machine (and under -race in
// CI).
const Wait = 120 * time.Second

// Host is a provider.Host that records every event, permission request
// and question, and answers them with Decide and Answer.
type Host struct {
	// Decide answers Permission; nil leaves each prompt unanswered until
	// its ctx ends (provider.ErrNoAnswer), as the engine does for a prompt
	// nobody answers. Set it and Answer before the session starts.
	Decide func(ctx context.Context, r provider.PermissionRequest) (provider.Decision, error)
	// Answer answers Ask; nil answers provider.ErrNoAnswer.
	Answer func(ctx context.Context, q provider.Question) (string, error)

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every change
	events  []provider.Event
	perms   []provider.PermissionRequest
	asked   []provider.Question
}

var _ provider.Host = (*Host)(nil)

// NewHost returns a Host that answers permission prompts with decide.
func NewHost(decide func(context.Context, provider.PermissionRequest) (provider.Decision, error)) *Host {
	return &Host{Decide: decide, changed: make(chan struct{})}
}

// Block never answers: it waits for ctx's end.
func Block(ctx context.Context, _ provider.PermissionRequest) (provider.Decision, error) {
	<-ctx.Done()
	return provider.Decision{}, provider.ErrNoAnswer
}

// record runs add, which appends to what was recorded, under mu, and
// wakes the waiters.
func (h *Host) record(add func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	add()
	close(h.changed)
	h.changed = make(chan struct{})
}

func (h *Host) Event(ev provider.Event) { h.record(func() { h.events = append(h.events, ev) }) }

// Permission records r and answers with Decide, which is set before the
// session starts and not changed after.
func (h *Host) Permission(ctx context.Context, r provider.PermissionRequest) (provider.Decision, error) {
	h.record(func() { h.perms = append(h.perms, r) })
	if h.Decide == nil {
		return Block(ctx, r)
	}
	return h.Decide(ctx, r)
}

func (h *Host) Ask(ctx context.Context, q provider.Question) (string, error) {
	h.record(func() { h.asked = append(h.asked, q) })
	if h.Answer == nil {
		return "", provider.ErrNoAnswer
	}
	return h.Answer(ctx, q)
}

func (h *Host) Confirm(context.Context, string) (bool, error) { return false, provider.ErrNoAnswer }

// Snapshot is what was recorded so far.
func (h *Host) Snapshot() ([]provider.Event, []provider.PermissionRequest) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]provider.Event(nil), h.events...), append([]provider.PermissionRequest(nil), h.perms...)
}

// Events is the events so far.
func (h *Host) Events() []provider.Event {
	evs, _ := h.Snapshot()
	return evs
}

// Asked is the questions so far.
func (h *Host) Asked() []provider.Question {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]provider.Question(nil), h.asked...)
}

// WaitFor waits until cond holds over what was recorded, or fails the
// test after bound. It looks again on every change and every poll
// interval, for conditions on more than the events (a process running).
func (h *Host) WaitFor(t testing.TB, bound time.Duration, what string, cond func(evs []provider.Event, perms []provider.PermissionRequest) bool) []provider.Event {
	t.Helper()
	deadline := time.NewTimer(bound)
	defer deadline.Stop()
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	for {
		h.mu.Lock()
		evs := append([]provider.Event(nil), h.events...)
		perms := append([]provider.PermissionRequest(nil), h.perms...)
		ch := h.changed
		h.mu.Unlock()
		if cond(evs, perms) {
			return evs
		}
		select {
		case <-ch:
		case <-poll.C:
		case <-deadline.C:
			t.Fatalf("timed out after %v waiting for %s; events:\n%s", bound, what, Dump(evs))
		}
	}
}

// WaitTurns waits for n TurnEnded events and returns all events.
func (h *Host) WaitTurns(t testing.TB, n int, bound time.Duration) []provider.Event {
	t.Helper()
	return h.WaitFor(t, bound, fmt.Sprintf("%d TurnEnded", n), func(evs []provider.Event, _ []provider.PermissionRequest) bool {
		return Count[provider.TurnEnded](evs) >= n
	})
}

// TurnEnded waits for the n-th TurnEnded (1-based) and returns it.
func (h *Host) TurnEnded(t testing.TB, n int, bound time.Duration) provider.TurnEnded {
	t.Helper()
	return All[provider.TurnEnded](h.WaitTurns(t, n, bound))[n-1]
}

// Discard is a Host that drops events and allows every prompt.
type Discard struct{}

func (Discard) Event(provider.Event) {}
func (Discard) Permission(context.Context, provider.PermissionRequest) (provider.Decision, error) {
	return provider.Decision{Allow: true}, nil
}
func (Discard) Ask(context.Context, provider.Question) (string, error) { return "", nil }
func (Discard) Confirm(context.Context, string) (bool, error)          { return true, nil }

// All is the events of type T, in order.
func All[T provider.Event](evs []provider.Event) []T {
	var out []T
	for _, ev := range evs {
		if v, ok := ev.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

// Count is how many events are of type T.
func Count[T provider.Event](evs []provider.Event) int { return len(All[T](evs)) }

// Last is the last event of type T; the test fails without one.
func Last[T provider.Event](t testing.TB, evs []provider.Event) T {
	t.Helper()
	vs := All[T](evs)
	if len(vs) == 0 {
		var zero T
		t.Fatalf("no %T event; events:\n%s", zero, Dump(evs))
	}
	return vs[len(vs)-1]
}

// Without is evs less the events of type T.
func Without[T provider.Event](evs []provider.Event) []provider.Event {
	var out []provider.Event
	for _, ev := range evs {
		if _, ok := ev.(T); !ok {
			out = append(out, ev)
		}
	}
	return out
}

// Kinds names the events' types in order ("ToolStarted"), repeats kept.
func Kinds(evs []provider.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = strings.TrimPrefix(fmt.Sprintf("%T", ev), "provider.")
	}
	return out
}

// InOrder reports whether want is a subsequence of got.
func InOrder(got, want []string) bool {
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	return i == len(want)
}

// Dump is the events, one a line, each cut at 400 bytes.
func Dump(evs []provider.Event) string {
	var b strings.Builder
	for i, ev := range evs {
		s := fmt.Sprintf("%#v", ev)
		if len(s) > 400 {
			s = s[:400] + "…"
		}
		fmt.Fprintf(&b, "  %2d %s\n", i, s)
	}
	return b.String()
}

// SumUsage adds up the token counts of the Usage events.
func SumUsage(evs []provider.Event) provider.Usage {
	var u provider.Usage
	for _, x := range All[provider.Usage](evs) {
		u.InputTokens += x.InputTokens
		u.OutputTokens += x.OutputTokens
		u.CacheReadTokens += x.CacheReadTokens
		u.CacheWriteTokens += x.CacheWriteTokens
	}
	return u
}

// TurnUsage sums each turn's Usage events (the ones before each
// TurnEnded); the context fields are the turn's last ones.
func TurnUsage(evs []provider.Event) []provider.Usage {
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

// Allow allows every prompt with the adapter's allow-once option.
func Allow(optionID string) func(context.Context, provider.PermissionRequest) (provider.Decision, error) {
	return func(context.Context, provider.PermissionRequest) (provider.Decision, error) {
		return provider.Decision{Allow: true, OptionID: optionID}, nil
	}
}

// Deny denies every prompt with optionID ("" for none) and a message.
func Deny(optionID string) func(context.Context, provider.PermissionRequest) (provider.Decision, error) {
	return func(context.Context, provider.PermissionRequest) (provider.Decision, error) {
		return provider.Decision{Allow: false, OptionID: optionID, Message: "not today"}, nil
	}
}
