package engine

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/agents-fleet/fleet/protocol"
)

// Loop statuses (fleetState.loops[].status).
const (
	loopRunning   = "running"
	loopSucceeded = "succeeded"
	loopFailed    = "failed"
	loopCancelled = "cancelled"
	loopStopped   = "stopped" // the fleet shut down mid-loop
)

const (
	defaultLoopMax = 5
	maxLoopMax     = 100
	maxShownLoops  = 20
)

// loop repeats a command until it exits 0 or max attempts were made. Each
// attempt is a task of its own (so it has a worker, a transcript and a
// worktree like any other).
type loop struct {
	id, goal  string
	iteration int
	max       int
	status    string
}

// parseLoop reads "/loop [N] <command>".
func parseLoop(args string) (max int, command string, err error) {
	first, rest, _ := strings.Cut(strings.TrimSpace(args), " ")
	max = defaultLoopMax
	command = strings.TrimSpace(args)
	if n, convErr := strconv.Atoi(first); convErr == nil {
		if n < 1 || n > maxLoopMax {
			return 0, "", fmt.Errorf("the attempt cap must be between 1 and %d", maxLoopMax)
		}
		max, command = n, strings.TrimSpace(rest)
	}
	command = strings.TrimSpace(strings.TrimPrefix(command, shellPrefix))
	if command == "" {
		return 0, "", errors.New("usage: /loop [N] <command> (for example /loop 3 go test ./...)")
	}
	return max, command, nil
}

func (e *Engine) cmdLoop(args string) (string, error) {
	max, command, err := parseLoop(args)
	if err != nil {
		return "", err
	}
	e.nextLoop++
	e.saveCounterLocked(counterLoop, e.nextLoop)
	l := &loop{id: fmt.Sprintf("L%d", e.nextLoop), goal: command, max: max, status: loopRunning}
	e.loops = append(e.loops, l)
	e.loopByID[l.id] = l
	t := e.nextIterationLocked(l)
	e.dispatchLocked()
	return fmt.Sprintf("Loop %s: run %q until it exits 0, at most %d attempts (first: %s). /cancel %s stops it.", l.id, protocol.CutText(command, maxSubject), max, t.id, l.id), nil
}

func (e *Engine) nextIterationLocked(l *loop) *task {
	l.iteration++
	t := e.addTaskLocked(l.goal)
	t.loopID, t.attempt = l.id, l.iteration
	e.saveTaskLocked(t)
	e.changedLocked()
	return t
}

// loopSettledLocked moves a loop on when one of its attempts ends.
func (e *Engine) loopSettledLocked(t *task, ok bool) {
	l := e.loopByID[t.loopID]
	if l == nil || l.status != loopRunning {
		return
	}
	switch {
	case ok:
		l.status = loopSucceeded
		e.replyLocked(fmt.Sprintf("Loop %s succeeded on attempt %d/%d: %s", l.id, l.iteration, l.max, protocol.CutText(l.goal, maxSubject)))
	case t.cancelled:
		l.status = loopCancelled
		e.replyLocked(fmt.Sprintf("Loop %s cancelled at attempt %d/%d.", l.id, l.iteration, l.max))
	case e.closing:
		l.status = loopStopped
	case l.iteration >= l.max:
		l.status = loopFailed
		e.replyLocked(fmt.Sprintf("Loop %s failed: %d attempts, none exited 0: %s", l.id, l.iteration, protocol.CutText(l.goal, maxSubject)))
	default:
		next := e.nextIterationLocked(l)
		e.activityLocked("coordinator", "message", fmt.Sprintf("loop %s: attempt %d failed, starting attempt %d as %s", l.id, l.iteration-1, l.iteration, next.id))
	}
	e.changedLocked()
}

// cancelLoopLocked stops a loop and its current attempt.
func (e *Engine) cancelLoopLocked(l *loop) string {
	if l.status != loopRunning {
		return fmt.Sprintf("Loop %s has already ended (%s).", l.id, l.status)
	}
	for _, t := range e.tasks {
		if t.loopID == l.id && (t.status == taskPending || t.status == taskRunning || t.status == taskBlocked) {
			e.cancelLocked(t.id)
		}
	}
	if l.status == loopRunning { // no attempt was in flight
		l.status = loopCancelled
		e.changedLocked()
	}
	return fmt.Sprintf("Loop %s cancelled.", l.id)
}

func (e *Engine) loopSummariesLocked() []protocol.FleetLoopSummary {
	first := max(0, len(e.loops)-maxShownLoops)
	out := make([]protocol.FleetLoopSummary, 0, len(e.loops)-first)
	for _, l := range e.loops[first:] {
		out = append(out, protocol.FleetLoopSummary{ID: l.id, Goal: protocol.CutText(l.goal, maxSubject), Iteration: int64(l.iteration), Max: int64(l.max), Status: l.status})
	}
	return out
}
