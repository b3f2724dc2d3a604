package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agents-fleet/fleet/protocol"
	"github.com/agents-fleet/fleet/provider"
)

// Rate and usage limits (docs/unattended.md). A limit is the account's,
// not the worker's: while one holds, no new work of that provider starts
// (a hold, by provider name), and the worker that met it waits until the
// reset, then its session is told to continue.

// DefaultRateLimitMaxWait is Limits.RateLimitMaxWaitMs unless configured.
const DefaultRateLimitMaxWait = 6 * time.Hour

// When a CLI does not say when a limit resets (Copilot never does), the
// fleet chooses: rateBackoffMin, doubling at each limit the same turn
// meets, at most rateBackoffMax.
const (
	rateBackoffMin = time.Minute
	rateBackoffMax = 30 * time.Minute
)

// rateHold is a provider held by a limit until a time.
type rateHold struct {
	until  time.Time
	reason string
}

// rateContinue is the turn that resumes a session after its limit reset.
const rateContinue = "continue"

// rateHeldLocked reports whether t must wait because its provider is held
// by a limit, and sets its wait reason.
func (e *Engine) rateHeldLocked(t *task) bool {
	name := e.providerNameLocked(t.provider)
	h, ok := e.rateHolds[name]
	if !ok || !time.Now().Before(h.until) {
		return false
	}
	e.setWaitLocked(t, fmt.Sprintf("waiting: %s is rate-limited until %s", name, h.until.Format("15:04:05")))
	return true
}

// holdProviderLocked holds provider name until until (or later, when it is
// held longer already); a console sees a hubEvent when the hold starts.
func (e *Engine) holdProviderLocked(name string, until time.Time, reason string) {
	h, held := e.rateHolds[name]
	if held && !until.After(h.until) {
		return
	}
	if e.rateHolds == nil {
		e.rateHolds = map[string]rateHold{}
	}
	e.rateHolds[name] = rateHold{until: until, reason: reason}
	if !held {
		e.activityLocked(coordinatorAgent, protocol.HubRateLimited,
			fmt.Sprintf("%s is rate-limited until %s: no new %s work starts until then (%s)", name, until.Format("15:04:05"), name, reason))
	}
	e.changedLocked()
}

// releaseRateHoldsLocked ends the holds whose time has come, and starts
// what waited for them.
func (e *Engine) releaseRateHoldsLocked(now time.Time) {
	released := false
	for name, h := range e.rateHolds {
		if now.Before(h.until) {
			continue
		}
		delete(e.rateHolds, name)
		e.activityLocked(coordinatorAgent, protocol.HubResumed, name+"'s rate limit has reset: its work starts again")
		released = true
	}
	if released {
		for _, t := range e.tasks {
			if t.status == taskPending {
				e.setWaitLocked(t, "")
			}
		}
		e.changedLocked()
		e.dispatchLocked()
	}
}

// rateLimited takes a CLI's report that its account is limited: the
// worker shows rate-limited until the reset, and its provider is held.
func (e *Engine) rateLimited(h *host, ev provider.RateLimited) {
	until := ev.Until
	if until.IsZero() {
		until = time.Now().Add(rateBackoffMin)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if w := h.w; w != nil {
		w.rateUntil, w.rateReason = until, ev.Reason
		w.limited.Store(true)
		e.holdProviderLocked(e.providerNameLocked(w.provider), until, ev.Reason)
	} else {
		e.holdProviderLocked(e.cfg.Provider.Name(), until, ev.Reason)
	}
	e.systemLineLocked(h.agent, fmt.Sprintf("rate-limited until %s: %s", until.Format("15:04:05"), ev.Reason))
}

// waitOutLimit waits out the limit a turn of h's worker ended on (rl),
// the wait-th of this turn: until its reset, or a wait the fleet chooses
// when the CLI gave none. It returns an error when the wait would pass
// limits.rateLimitMaxWaitMs, or the task was cancelled meanwhile.
func (e *Engine) waitOutLimit(ctx context.Context, h *host, rl *provider.RateLimitError, wait int) error {
	w := h.w
	now := time.Now()
	until := rl.Until
	if !until.After(now) {
		until = now.Add(min(rateBackoffMin<<min(wait-1, 10), rateBackoffMax))
	}
	e.mu.Lock()
	bound := e.limits.RateLimitMaxWait
	e.mu.Unlock()
	if until.Sub(now) > bound {
		return fmt.Errorf("%s; it resets at %s, past limits.rateLimitMaxWaitMs (%s)", rl.Reason, until.Format("2006-01-02 15:04"), bound)
	}
	e.rateLimited(h, provider.RateLimited{Until: until, Reason: rl.Reason})
	t := time.NewTimer(time.Until(until))
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return fmt.Errorf("cancelled: %w", context.Cause(ctx))
	}
	e.mu.Lock()
	w.rateUntil, w.rateReason = time.Time{}, ""
	w.limited.Store(false)
	e.releaseRateHoldsLocked(time.Now())
	e.changedLocked()
	e.mu.Unlock()
	return nil
}

// limitPassedLocked: w's agent got a model response while it was rate-
// limited (its CLI waited the limit out itself), so the account works
// again: w is no longer limited, and its provider's hold ends now.
func (e *Engine) limitPassedLocked(w *worker) {
	if w.rateUntil.IsZero() {
		return
	}
	w.rateUntil, w.rateReason = time.Time{}, ""
	name := e.providerNameLocked(w.provider)
	if h, ok := e.rateHolds[name]; ok {
		h.until = time.Now()
		e.rateHolds[name] = h
		e.releaseRateHoldsLocked(time.Now())
	}
}

// rateLimitOf is the limit a turn ended on, or nil.
func rateLimitOf(res provider.TurnEnded) *provider.RateLimitError {
	var rl *provider.RateLimitError
	if errors.As(res.Err, &rl) {
		return rl
	}
	return nil
}

// rateWaiting reports whether h's worker waits out a limit now (its CLI
// waits it itself, or the fleet does): that silence is not a stall.
func (e *Engine) rateWaiting(h *host) bool {
	if h.w == nil {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return time.Now().Before(h.w.rateUntil)
}
