package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agents-fleet/fleet/provider"
)

// Governor is a native root governing the session's work (DESIGN §7): every
// task is a reservation in the session's bound root, a task starts only
// when the root admits it (intent, holds, approvals, plan), and every
// settled worker leaves a settlement record. Nil means a legacy session.
// Calls may do durable writes; the engine never makes them under its lock.
type Governor interface {
	Reserve(ctx context.Context, t Reservation) error
	Admit(ctx context.Context, taskID string) (Admission, error)
	ReleasePlanned(ctx context.Context, taskID string) error
	Settle(ctx context.Context, s Settlement) (proofID string, err error)
	Hold(ctx context.Context, taskID, reason string) (holdHash string, err error)
	// MarkUncertain says the engine lost track of a task's worker (the
	// previous process died while it ran): its effect is uncertain until an
	// operator reconciles it with a settlement record.
	MarkUncertain(ctx context.Context, taskID string) error
	// Intent is the bound root's intent and the task's own ("" for none).
	Intent(taskID string) (root, task string)
	ReportPhase(ctx context.Context, phase string) error
}

// Reservation is a task as the root records it.
type Reservation struct {
	ID, Command   string
	NeedsApproval bool // the confirm policy matched: it waits for approve
	Planned       bool // plan mode: it waits for /go or manual-start
}

// Admission is the root's answer for one task.
type Admission struct {
	Start  bool
	Wait   string // why it waits (shown in /tasks)
	Refuse string // why it will never start (it fails with this reason)
}

// Settlement is how a worker's task ended, for the settlement record.
type Settlement struct {
	TaskID, WorkerID, WorktreePath string
	ExitCode                       int
	Failed                         bool
	At                             time.Time
}

// Native intents and phases.
const (
	intentRun   = "run"
	intentPause = "pause"
	intentStop  = "stop"
	intentAbort = "abort"

	phaseRunning  = "running"
	phasePaused   = "paused"
	phaseStopping = "stopping"
	phaseStopped  = "stopped"
	phaseAborted  = "aborted"
)

// nativeTimeout bounds one call into the governor.
const nativeTimeout = 30 * time.Second

// GovernorChanged tells the engine the root changed (a mutation committed):
// it re-reads intents, stops what a stop or abort covers, and dispatches
// what may now start. The native controller's OnChange calls it.
func (e *Engine) GovernorChanged() {
	select {
	case e.admitWake <- struct{}{}:
	default:
	}
	e.nativeMu.Lock()
	close(e.nativeCh)
	e.nativeCh = make(chan struct{})
	e.nativeMu.Unlock()
}

// nativeChanged returns a channel closed at the root's next change.
func (e *Engine) nativeChanged() <-chan struct{} {
	e.nativeMu.Lock()
	defer e.nativeMu.Unlock()
	return e.nativeCh
}

// nativeApproval holds an agent's tool request that the confirm policy
// names for the native root: it is recorded as a reservation of its own,
// id <task>.p<N>, whose evidence hash covers the tool and its input, and
// waits for the operator's native approve (the call runs) or deny (the
// CLI is told no), or for ctx. A consumed approval is settled at once, so
// the record says how it ended.
func (h *host) nativeApproval(ctx context.Context, r provider.PermissionRequest, summary string) (bool, error) {
	e, g := h.e, h.e.cfg.Governor
	e.mu.Lock()
	h.w.approvals++
	id := fmt.Sprintf("%s.p%d", h.t.id, h.w.approvals)
	e.mu.Unlock()
	in, _ := json.Marshal(r.Input)
	rctx, cancel := context.WithTimeout(ctx, nativeTimeout)
	err := g.Reserve(rctx, Reservation{ID: id, Command: r.Tool + " " + string(in), NeedsApproval: true})
	cancel()
	if err != nil {
		return false, fmt.Errorf("record the tool request in the native root: %w", err)
	}
	h.mu.Lock()
	h.blocked++
	h.mu.Unlock()
	e.mu.Lock()
	h.w.status = workerIdle
	e.setTaskLocked(h.t, taskBlocked, fmt.Sprintf("waiting for a native approve or deny of %s: %s", id, summary))
	e.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.blocked--
		h.mu.Unlock()
		h.touch(nowMs())
		e.resumeHeld(ctx, h)
	}()
	started, err := e.awaitRoot(ctx, id, h.w.id, nil, func(err error) error {
		return fmt.Errorf("ask the native root about %s: %w", id, err)
	})
	if err == errWaitEnded {
		return false, provider.ErrNoAnswer
	}
	return started, err
}

// awaitRoot waits for the native root's decision on the reserved id:
// started (settled at once, so the record says how it ended) or refused.
// onErr decides what an error asking the root does: nil asks again at the
// root's next change, an error ends the wait with it. The wait also ends,
// with errWaitEnded, when ctx or stop (when not nil) ends.
func (e *Engine) awaitRoot(ctx context.Context, id, workerID string, stop <-chan struct{}, onErr func(error) error) (started bool, err error) {
	g := e.cfg.Governor
	for {
		changed := e.nativeChanged()
		actx, cancel := context.WithTimeout(ctx, nativeTimeout)
		adm, err := g.Admit(actx, id)
		cancel()
		switch {
		case err != nil:
			if err := onErr(err); err != nil {
				return false, err
			}
		case adm.Start:
			sctx, cancel := context.WithTimeout(context.Background(), nativeTimeout)
			if _, err := g.Settle(sctx, Settlement{TaskID: id, WorkerID: workerID, At: time.Now()}); err != nil {
				e.log.Error("settle what the native root started", "id", id, "err", err)
			}
			cancel()
			return true, nil
		case adm.Refuse != "":
			return false, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return false, errWaitEnded
		case <-stop:
			return false, errWaitEnded
		}
	}
}

var errWaitEnded = errors.New("the wait for the native root ended")

// resumeHeld puts h's task back to running after a hold, unless the hold
// ended it or ctx ended.
func (e *Engine) resumeHeld(ctx context.Context, h *host) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if h.t.status == taskBlocked && ctx.Err() == nil {
		h.w.status = workerRunning
		e.setTaskLocked(h.t, taskRunning, "")
	}
}

// admitLoop is the native dispatcher: it owns every Admit call so that the
// durable writes happen outside e.mu, and it applies the root's intents to
// running work. It runs until Shutdown.
func (e *Engine) admitLoop() {
	defer e.runWG.Done()
	lastPhase := ""
	for {
		select {
		case <-e.admitStop:
			return
		case <-e.admitWake:
		}
		e.applyIntents()
		e.admitPending()
		if phase := e.nativePhase(); phase != lastPhase {
			ctx, cancel := context.WithTimeout(context.Background(), nativeTimeout)
			if err := e.cfg.Governor.ReportPhase(ctx, phase); err != nil {
				e.log.Error("report phase to the native root", "phase", phase, "err", err)
			} else {
				lastPhase = phase
			}
			cancel()
		}
	}
}

// applyIntents cancels running tasks that a stop/abort intent covers, for
// the whole root or one task.
func (e *Engine) applyIntents() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, w := range e.workers {
		if w.cancel == nil || (w.status != workerRunning && w.status != workerIdle) {
			continue
		}
		root, own := e.cfg.Governor.Intent(w.taskID)
		for _, in := range []string{root, own} {
			if in == intentStop || in == intentAbort {
				w.cancel(fmt.Errorf("%s intent of the native root", in))
			}
		}
	}
}

// admitPending records new tasks in the root and asks it about each
// pending task, in creation order, while there is room under the worker
// cap. It is the only caller of Reserve and Admit, so a task is always
// reserved before it is admitted.
func (e *Engine) admitPending() {
	e.mu.Lock()
	if e.closing || e.paused {
		e.mu.Unlock()
		return
	}
	room := e.cfg.Workers - int(e.activeWorkersLocked())
	var candidates []*task
	for _, t := range e.tasks {
		if t.status == taskPending {
			candidates = append(candidates, t)
		}
	}
	e.mu.Unlock()
	for _, t := range candidates {
		if !t.reserved {
			e.mu.Lock()
			r := Reservation{ID: t.id, Command: t.command, NeedsApproval: e.cfg.Policy.Match(t.command) != "", Planned: t.planned}
			e.mu.Unlock()
			ctx, cancel := context.WithTimeout(context.Background(), nativeTimeout)
			err := e.cfg.Governor.Reserve(ctx, r)
			cancel()
			if err != nil {
				e.log.Error("native reserve", "task", t.id, "err", err)
				continue
			}
			e.mu.Lock()
			t.reserved = true
			e.mu.Unlock()
		}
		if room <= 0 {
			continue // reserve every new task; start only what fits
		}
		e.mu.Lock()
		held := e.budgetHoldsLocked(t) || e.rateHeldLocked(t) || e.memoryHoldsLocked(t)
		e.mu.Unlock()
		if held {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), nativeTimeout)
		adm, err := e.cfg.Governor.Admit(ctx, t.id)
		cancel()
		e.mu.Lock()
		switch {
		case err != nil:
			e.log.Error("native admit", "task", t.id, "err", err)
			t.waitReason = "the native root could not be asked: " + err.Error()
		case t.status != taskPending || e.closing:
			// Changed while we asked (cancelled, shutting down).
		case adm.Start:
			e.startLocked(t, "") // native sessions run their workers here
			e.startedLocalLocked(t)
			room--
		case adm.Refuse != "":
			t.reason = adm.Refuse
			e.setTaskLocked(t, taskFailed, t.reason)
		default:
			if t.waitReason != adm.Wait {
				t.waitReason = adm.Wait
				e.changedLocked()
			}
		}
		e.mu.Unlock()
	}
}

// nativePhase is what the engine has reached for the root's intent.
func (e *Engine) nativePhase() string {
	root, _ := e.cfg.Governor.Intent("")
	e.mu.Lock()
	active := e.activeWorkersLocked()
	e.mu.Unlock()
	switch root {
	case intentPause:
		return phasePaused // nothing new starts; running work goes on
	case intentStop:
		if active > 0 {
			return phaseStopping
		}
		return phaseStopped
	case intentAbort:
		if active > 0 {
			return phaseStopping
		}
		return phaseAborted
	}
	return phaseRunning
}

// settleNative writes the worker-settlement record; a failed one holds the
// task in the root until an operator releases it.
func (e *Engine) settleNative(s Settlement) {
	e.runWG.Add(1)
	go func() {
		defer e.runWG.Done()
		ctx, cancel := context.WithTimeout(context.Background(), nativeTimeout)
		defer cancel()
		proof, err := e.cfg.Governor.Settle(ctx, s)
		if err != nil {
			e.log.Error("native settle", "task", s.TaskID, "err", err)
			return
		}
		e.mu.Lock()
		e.activityLocked(s.WorkerID, "message", fmt.Sprintf("%s settled (settlement %s)", s.TaskID, proof))
		e.mu.Unlock()
		e.GovernorChanged()
	}()
}

// releasePlannedNative tells the root the operator released a planned task
// with /go (durable, off the engine's lock).
func (e *Engine) releasePlannedNative(taskID string) {
	e.runWG.Add(1)
	go func() {
		defer e.runWG.Done()
		ctx, cancel := context.WithTimeout(context.Background(), nativeTimeout)
		defer cancel()
		if err := e.cfg.Governor.ReleasePlanned(ctx, taskID); err != nil {
			e.log.Error("native release planned", "task", taskID, "err", err)
		}
		e.GovernorChanged()
	}()
}

func (e *Engine) cmdHold(args string) (string, error) {
	if e.cfg.Governor == nil {
		return "", failure("/hold needs a native-root session (fleet run --native-root).")
	}
	id, reason, _ := strings.Cut(strings.TrimSpace(args), " ")
	reason = strings.TrimSpace(reason)
	if id == "" || reason == "" {
		return "", failure("Usage: /hold <task> <reason>")
	}
	if e.taskByID[id] == nil {
		return "", failf("No task %q. /tasks lists them.", id)
	}
	e.runWG.Add(1)
	go func() {
		defer e.runWG.Done()
		ctx, cancel := context.WithTimeout(context.Background(), nativeTimeout)
		defer cancel()
		hash, err := e.cfg.Governor.Hold(ctx, id, reason)
		e.mu.Lock()
		if err != nil {
			e.replyErrorLocked(fmt.Sprintf("Could not hold %s: %v", id, err))
		} else {
			e.replyLocked(fmt.Sprintf("Held %s in the native root (hold %s). Release it with: fleet root release --hold-hash %s …", id, hash, hash))
		}
		e.mu.Unlock()
		e.GovernorChanged()
	}()
	return fmt.Sprintf("Holding %s…", id), nil
}

// markUncertain records, off the engine's lock, that an interrupted task's
// effect is uncertain.
func (e *Engine) markUncertain(taskID string) {
	e.runWG.Add(1)
	go func() {
		defer e.runWG.Done()
		ctx, cancel := context.WithTimeout(context.Background(), nativeTimeout)
		defer cancel()
		if err := e.cfg.Governor.MarkUncertain(ctx, taskID); err != nil {
			e.log.Error("native mark uncertain", "task", taskID, "err", err)
		}
	}()
}
