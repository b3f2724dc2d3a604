package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/agents-fleet/fleet/intel/record"
	"github.com/agents-fleet/fleet/provider"
)

// Intel is the fleet's intelligence service (docs/intel.md): it records
// what runs did and how operators steered them, resolves skills, answers
// /fleet-intel and /learn and publishes the intelligence snapshots.
// Optional: without it nothing is recorded.
type Intel interface {
	// Record and Steer only enqueue: they never block, so they are called
	// with e.mu held.
	Record(record.Run)
	Steer(record.Steering)
	// Skill resolves skill name for a new task (which version, or its
	// shadow candidate, this run uses). It may read files and the
	// database: called without e.mu.
	Skill(ctx context.Context, name string) (record.SkillUse, error)
	// Command answers /fleet-intel or /learn (name) with args; called
	// without e.mu. It republishes the snapshots it changed.
	Command(ctx context.Context, name, args string) (string, error)
}

// causedError marks a failure with what the fleet knows of its cause, for
// the intel store's classification (intel.Classify). It reads as err.
type causedError struct {
	cause string
	err   error
}

func (c *causedError) Error() string { return c.err.Error() }
func (c *causedError) Unwrap() error { return c.err }

func caused(cause string, err error) error { return &causedError{cause: cause, err: err} }

// causeOf is what the engine knows of why a run failed.
func causeOf(res provider.TurnEnded) string {
	var c *causedError
	switch {
	case res.Err == nil:
		return ""
	case errors.Is(res.Err, errCancelled):
		return record.CauseCancelled
	case errors.Is(res.Err, errShutdown):
		return record.CauseShutdown
	case errors.As(res.Err, &c):
		return c.cause
	case res.ExitCode > 0:
		return record.CauseExit
	}
	return ""
}

// recordRunLocked hands t's run on w to the intel store.
func (e *Engine) recordRunLocked(w *worker, t *task, res provider.TurnEnded) {
	if e.cfg.Intel == nil {
		return
	}
	r := record.Run{
		SessionID: e.cfg.SessionID, ID: e.cfg.SessionID + "/" + w.id + "/" + t.id,
		Worker: w.id, TaskID: t.id, Provider: e.agentTypeLocked(w), Model: w.model,
		Task: truncateRunes(t.command, record.MaxText), Skill: t.skill.Name, SkillVersion: t.skill.Version,
		Shadow: t.skill.Shadow, Repo: e.cfg.Repo, Worktree: w.worktreePath, Host: w.hostName,
		StartedAt: t.startedAt.UnixMilli(), EndedAt: w.endedAt.UnixMilli(),
		Outcome: record.OutcomeCompleted, ExitCode: res.ExitCode,
		InputTokens: w.tokens.input - t.tokensAt.input, OutputTokens: w.tokens.output - t.tokensAt.output,
		CacheReadTokens:  w.tokens.cacheRead - t.tokensAt.cacheRead,
		CacheWriteTokens: w.tokens.cacheWrite - t.tokensAt.cacheWrite,
		Tools:            toolDelta(t.toolsAt, w.toolCounts),
	}
	if r.Model == "" {
		r.Model = e.cfg.Model
	}
	if res.Err != nil {
		r.Outcome, r.Error, r.Cause = record.OutcomeFailed, truncateRunes(res.Err.Error(), record.MaxText), causeOf(res)
		if r.Cause == record.CauseCancelled || r.Cause == record.CauseShutdown {
			r.Outcome = record.OutcomeCancelled
		}
	}
	e.cfg.Intel.Record(r)
}

// toolDelta is what now counts beyond before, by tool.
func toolDelta(before, now []toolCount) map[string]int64 {
	out := map[string]int64{}
	for _, c := range now {
		n := c.count
		for _, b := range before {
			if b.name == c.name {
				n -= b.count
			}
		}
		if n > 0 {
			out[c.name] = n
		}
	}
	return out
}

// beginRunLocked notes where t's run starts from on w (its accounts are
// cumulative over a worker's turns).
func beginRunLocked(w *worker, t *task) {
	t.tokensAt = w.tokens
	t.toolsAt = append([]toolCount(nil), w.toolCounts...)
}

// steerLocked records an operator action that changed running work.
func (e *Engine) steerLocked(source, text, target string) {
	if e.cfg.Intel == nil {
		return
	}
	e.cfg.Intel.Steer(record.Steering{SessionID: e.cfg.SessionID, Source: source,
		Text: truncateRunes(text, record.MaxText), Target: target, CreatedAt: nowMs()})
}

// steerAnswerLocked records how an operator answered r. The text leaves
// out who asked (that is the target), so the same denial of different
// workers groups as one.
func (e *Engine) steerAnswerLocked(r *request, a answer) {
	target := r.agent
	text := r.summary
	if r.kind == kindAsk {
		text = r.question.Text
	}
	text = strings.TrimPrefix(text, target+" ")
	prefix := ""
	if r.topic != "" {
		prefix = r.topic + "-"
	}
	switch {
	case r.kind == kindConfirm && a.approve:
		e.steerLocked(prefix+"approve", text, target)
	case r.kind == kindConfirm:
		e.steerLocked(prefix+"deny", text, target)
	case r.denyValue != "" && a.text == r.denyValue:
		e.steerLocked("deny", text, target)
	case r.allowValue != "" && a.text != r.denyValue:
		e.steerLocked("approve", text+" → "+a.text, target)
	default:
		e.steerLocked("answer", text+" → "+a.text, target)
	}
}

// intelCmd routes /fleet-intel and /learn to the intel service, off the
// engine's lock; its answer is the reply.
func intelCmd(name string) func(*Engine, string) (string, error) {
	return func(e *Engine, args string) (string, error) {
		in := e.cfg.Intel
		if in == nil {
			return "", failure("Intel is unavailable in this fleet (see the note at start-up).")
		}
		e.runWG.Add(1)
		go func() {
			defer e.runWG.Done()
			ctx, cancel := context.WithTimeout(context.Background(), workspaceTimeout)
			text, err := in.Command(ctx, name, args)
			cancel()
			e.mu.Lock()
			defer e.mu.Unlock()
			if err != nil {
				e.replyErrorLocked(err.Error())
				return
			}
			e.replyLocked(text)
		}()
		return "", nil
	}
}

// spawnSkill resolves skill then queues text for a worker following it,
// replying when done: skills are files and database rows, read without
// e.mu.
func (e *Engine) spawnSkill(s Spawn) {
	in := e.cfg.Intel
	e.runWG.Add(1)
	go func() {
		defer e.runWG.Done()
		ctx, cancel := context.WithTimeout(context.Background(), workspaceTimeout)
		use, err := in.Skill(ctx, s.Skill)
		cancel()
		e.mu.Lock()
		defer e.mu.Unlock()
		if err != nil {
			e.replyErrorLocked(fmt.Sprintf("Skill %s: %v", s.Skill, err))
			return
		}
		text := s.Text
		s.Text = use.Apply(text)
		t, err := e.spawnLocked("operator", s)
		if err != nil {
			e.replyErrorLocked(err.Error())
			return
		}
		t.skill = use
		e.saveTaskLocked(t)
		what := fmt.Sprintf("skill %s v%d", use.Name, use.Version)
		if use.Shadow != "" {
			what = fmt.Sprintf("skill %s, shadow %s (A/B against v%d)", use.Name, use.Shadow, use.Version)
		}
		e.replyLocked(e.queuedLocked(t, text, what))
	}()
}
