package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/agents-fleet/fleet/intel/record"
	"github.com/agents-fleet/fleet/protocol"
	"github.com/agents-fleet/fleet/provider"
)

// resultChars is how much of a tool's result a toolCall carries (the
// protocol's bound).
const resultChars = 2000

// interruptGrace bounds how long a turn may take to end after the CLI was
// asked to interrupt it; then the session is closed (its whole process
// tree killed) and the turn counts as ended.
const interruptGrace = 30 * time.Second

// run carries a task out on its worker: prepare the workspace, start an
// agent session through the worker's provider, send it the task, wait for
// the turn to end, and report the files it changed. It runs without e.mu.
func (e *Engine) run(ctx context.Context, h *host) provider.TurnEnded {
	w, t := h.w, h.t
	dir := e.cfg.Cwd
	var track func(context.Context) (func(context.Context) ([]FileChange, error), error)
	if e.cfg.Workspaces != nil {
		pctx, cancel := context.WithTimeout(ctx, workspaceTimeout)
		ws, err := e.cfg.Workspaces.Prepare(pctx, w.id)
		cancel()
		if err != nil {
			return provider.TurnEnded{ExitCode: -1, Err: caused(record.CauseWorkspace, fmt.Errorf("prepare workspace: %w", err))}
		}
		e.mu.Lock()
		w.worktreePath, w.branch, w.baseCommit, w.dir = ws.WorktreePath, ws.Branch, ws.BaseCommit, ws.Dir
		e.saveWorkerLocked(w)
		e.changedLocked()
		e.mu.Unlock()
		for _, warn := range ws.Warnings {
			h.Event(provider.Note{Text: warn})
		}
		e.markRunning(w, t)
		dir, track = ws.Dir, ws.Track
	} else {
		e.mu.Lock()
		w.dir = dir
		e.mu.Unlock()
	}
	var finish func(context.Context) ([]FileChange, error)
	if track != nil {
		var err error
		if finish, err = track(ctx); err != nil {
			h.Event(provider.Note{Text: "file changes are not tracked for this task: " + err.Error()})
		}
	}
	res := e.runTurn(ctx, h, dir, t.command)
	if finish != nil {
		// Changes are collected even after a cancel: they happened.
		fctx, cancel := context.WithTimeout(context.Background(), workspaceTimeout)
		changes, err := finish(fctx)
		cancel()
		if err != nil {
			h.Event(provider.Note{Text: "could not collect file changes: " + err.Error()})
		}
		e.publishChanges(w, h.attribute(changes))
	} else {
		e.publishChanges(w, h.unconfirmedEdits(e.cfg.Cwd))
	}
	return res
}

// runTurn starts (or resumes) the worker's agent session, sends it text,
// and waits for the turn to end, the session to die, the task to be
// cancelled, or the agent to stall. The session is closed before it
// returns: a settled worker keeps nothing running.
func (e *Engine) runTurn(ctx context.Context, h *host, dir, text string) provider.TurnEnded {
	w := h.w
	task := text
	prov, sess, res := e.startSession(ctx, h, dir)
	if sess == nil {
		return res
	}
	ts := &turnSession{prov: prov, sess: sess}
	defer func() { ts.sess.Close() }() // the session in use when it returns
	defer w.healing.Store(0)
	heals, waits := 0, 0 // stalls healed and limits waited out in this turn
	for {
		if err := e.budgetGate(ctx, h); err != nil {
			return provider.TurnEnded{ExitCode: -1, Err: err, Interrupted: ctx.Err() != nil}
		}
		// The stall clock starts with the turn: a CLI's start-up (bounded
		// by sessionStartTimeout) is not silence in a turn, and on a loaded
		// machine it can take longer than the stall timeout.
		h.touch(nowMs())
		if err := ts.sess.Send(ctx, provider.Turn{Text: text}); err != nil {
			return provider.TurnEnded{ExitCode: -1, Err: fmt.Errorf("send the task to %s: %w", ts.prov.Name(), err)}
		}
		res := e.awaitTurn(ctx, h, ts.sess, quiet(ts.prov))
		// A stall is healed, up to limits.stallRetries times: first the
		// turn is interrupted and the same session told to continue; then
		// the CLI is stopped and a fresh one resumes its saved session
		// (or, when it has none, starts the task again in its worktree).
		if causeOf(res) == record.CauseStall && ctx.Err() == nil && heals < e.stallRetries() {
			heals++
			why := res.Err
			w.healing.Store(int32(heals)) // stalled until the agent shows progress (healthy)
			h.clearTools()
			if heals == 1 && ts.alive() {
				e.healed(h, heals, why, "interrupted its turn and told it to continue")
				text = stallContinue
				continue
			}
			if res, ok := e.renewSession(ctx, h, dir, ts, true); !ok {
				return res
			}
			e.mu.Lock()
			resumed := w.agentSession != ""
			e.mu.Unlock()
			if resumed {
				e.healed(h, heals, why, "stopped its CLI and resumed its session in a new one")
				text = stallResumed
			} else {
				e.healed(h, heals, why, "stopped its CLI and started the task again in a new one, in the same worktree")
				text = task + "\n\n" + stallRestarted
			}
			continue
		}
		// The model API failed after the CLI's own retries (5xx, reset
		// connection): after a backoff the session is told to continue (a
		// new CLI resuming it, when the old one ended), within the same
		// limits.stallRetries as a stall.
		var te *provider.TransportError
		if errors.As(res.Err, &te) && ctx.Err() == nil && heals < e.stallRetries() {
			heals++
			wait := transportBackoff << (heals - 1)
			e.healed(h, heals, te, fmt.Sprintf("resuming it in %s", wait))
			w.healing.Store(int32(heals))
			if !sleepCtx(ctx, wait) {
				return res
			}
			if res, ok := e.renewSession(ctx, h, dir, ts, false); !ok {
				return res
			}
			text = stallContinue
			continue
		}
		// A rate or usage limit: wait for its reset, then continue in the
		// same session (a new one resuming it, when the CLI ended).
		if rl := rateLimitOf(res); rl != nil && ctx.Err() == nil {
			waits++
			if err := e.waitOutLimit(ctx, h, rl, waits); err != nil {
				res.Err = err
				return res
			}
			if res, ok := e.renewSession(ctx, h, dir, ts, false); !ok {
				return res
			}
			text = rateContinue
			continue
		}
		// Interrupted at a budget: the same session goes on once raised.
		if paused, err := e.budgetPaused(ctx, h, ts.sess, res); err != nil {
			return provider.TurnEnded{ExitCode: -1, Err: err}
		} else if paused {
			text = budgetContinue
			continue
		}
		if res.Err != nil || res.Interrupted {
			return res
		}
		// /tell turns that arrived meanwhile go to the same session.
		next, ok := e.nextFollowUp(w)
		if !ok {
			return res
		}
		text = next
	}
}

// turnSession is the agent session a worker's turn runs in, and its
// provider; renewSession replaces them.
type turnSession struct {
	prov provider.Provider
	sess provider.Session
}

// alive reports whether the session's CLI is still running.
func (ts *turnSession) alive() bool {
	select {
	case <-ts.sess.Done():
		return false
	default:
		return true
	}
}

// renewSession replaces ts's session with a new one, which resumes the
// worker's saved session, when its CLI ended (always, with fresh). ok is
// false, with the turn's end that says why, when the new one did not start.
func (e *Engine) renewSession(ctx context.Context, h *host, dir string, ts *turnSession, fresh bool) (res provider.TurnEnded, ok bool) {
	if !fresh && ts.alive() {
		return res, true
	}
	ts.sess.Close()
	prov, sess, res := e.startSession(ctx, h, dir)
	if sess == nil {
		return res, false
	}
	ts.prov, ts.sess = prov, sess
	return res, true
}

// sleepCtx waits d, or less when ctx ends first (false).
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// startSession starts (or resumes, when the worker has a saved session)
// the worker's agent session; a nil session comes with the turn's end
// that says why.
func (e *Engine) startSession(ctx context.Context, h *host, dir string) (provider.Provider, provider.Session, provider.TurnEnded) {
	prov, spec, res := e.workerProvider(h, dir)
	if prov == nil {
		return nil, nil, res
	}
	sctx, cancel := context.WithTimeout(ctx, sessionStartTimeout)
	sess, err := prov.Start(sctx, spec, h)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return prov, nil, provider.TurnEnded{ExitCode: -1, Interrupted: true, Err: fmt.Errorf("cancelled: %w", context.Cause(ctx))}
		}
		return prov, nil, provider.TurnEnded{ExitCode: -1, Err: caused(record.CauseStart, fmt.Errorf("start %s: %w", prov.Name(), err))}
	}
	return prov, sess, provider.TurnEnded{}
}

// transportBackoff is the wait before the first resume after the model API
// failed; it doubles for each further one.
const transportBackoff = 5 * time.Second

// The turns that heal a stall (runTurn).
const (
	stallContinue  = "continue"
	stallResumed   = "Continue the task where you left off. (Your previous attempt stalled: no response came, so this session was resumed in a new process.)"
	stallRestarted = "(A previous attempt at this task stalled and was stopped; its changes so far are in this worktree. Continue from them.)"
)

// healed says that h's worker stalled and what the fleet did about it:
// a system line in its transcript and a hubEvent.
func (e *Engine) healed(h *host, attempt int, why error, did string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	text := fmt.Sprintf("%v; %s (attempt %d of %d)", why, did, attempt, e.limits.StallRetries)
	e.systemLineLocked(h.agent, text)
	e.activityLocked(h.agent, protocol.HubStalled, text)
	e.changedLocked()
}

// stallRetries is how many stalls a turn heals before it fails.
func (e *Engine) stallRetries() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.limits.StallRetries
}

// workerProvider is the provider of h's worker (on its host when it has
// one) and the spec of its session in dir; a nil provider comes with the
// turn's end that says why.
func (e *Engine) workerProvider(h *host, dir string) (provider.Provider, provider.Spec, provider.TurnEnded) {
	w := h.w
	e.mu.Lock()
	prov := e.providerLocked(w.provider)
	name, onHost := e.providerNameLocked(w.provider), w.hostName
	spec := provider.Spec{
		Agent: w.id, Role: provider.RoleWorker, Dir: dir, Env: e.agentEnv(w.id, h.taskID()),
		Model: w.model, ResumeID: w.agentSession,
	}
	e.mu.Unlock()
	if onHost != "" {
		var err error
		if prov, err = e.hostProvider(onHost, name); err != nil {
			return nil, spec, provider.TurnEnded{ExitCode: -1, Err: caused(record.CauseStart, err)}
		}
	}
	if prov == nil {
		return nil, spec, provider.TurnEnded{ExitCode: -1, Err: fmt.Errorf("no provider %q is configured", w.provider)}
	}
	return prov, spec, provider.TurnEnded{}
}

// Adopter is a provider that can take up a session still running
// elsewhere when the fleet starts again: a worker on a host keeps running
// while the fleet is down (hosts/remote implements it).
type Adopter interface {
	Adopt(ctx context.Context, spec provider.Spec, h provider.Host) (provider.Session, error)
}

// adoptTurn takes up the turn h's worker was running on its host when the
// fleet stopped, and waits for it to end: what the worker did since then
// arrives first.
func (e *Engine) adoptTurn(ctx context.Context, h *host, dir string) provider.TurnEnded {
	prov, spec, res := e.workerProvider(h, dir)
	if prov == nil {
		return res
	}
	a, ok := prov.(Adopter)
	if !ok {
		return provider.TurnEnded{ExitCode: -1, Err: errors.New(reasonInterrupted)}
	}
	sctx, cancel := context.WithTimeout(ctx, sessionStartTimeout)
	sess, err := a.Adopt(sctx, spec, h)
	cancel()
	if err != nil {
		return provider.TurnEnded{ExitCode: -1, Err: fmt.Errorf("%s: could not take the worker up again: %w", reasonInterrupted, err)}
	}
	defer sess.Close()
	h.touch(nowMs())
	return e.awaitTurn(ctx, h, sess, quiet(prov))
}

// sessionStartTimeout bounds a provider's Start (a CLI that never
// initialises).
const sessionStartTimeout = 2 * time.Minute

// awaitTurn waits for the turn sent to sess to end.
func (e *Engine) awaitTurn(ctx context.Context, h *host, sess provider.Session, quiet bool) provider.TurnEnded {
	var stall <-chan time.Time
	if e.cfg.StallTimeout > 0 && !quiet {
		tick := time.NewTicker(min(e.cfg.StallTimeout/4+time.Millisecond, 5*time.Second))
		defer tick.Stop()
		stall = tick.C
	}
	pause := e.budgetPause(h)
	for {
		select {
		case res := <-h.turns:
			return res
		case <-pause:
			return e.budgetInterrupt(h, sess)
		case <-sess.Done():
			select {
			case res := <-h.turns:
				return res
			default:
			}
			err := sess.Err()
			if err == nil {
				err = errors.New("the agent session ended before the turn did")
			}
			return provider.TurnEnded{ExitCode: -1, Err: err}
		case <-ctx.Done():
			res := e.interruptTurn(h, sess)
			res.Interrupted = true
			var om errOverMemory
			if cause := context.Cause(ctx); errors.As(cause, &om) {
				res.Err = cause // the fleet stopped it: the reason says why
			} else {
				res.Err = fmt.Errorf("cancelled: %w", cause)
			}
			return res
		case <-stall:
			idle := time.Since(time.UnixMilli(h.lastActivity()))
			// Waiting on the operator is not a stall, nor is a tool call
			// in flight: CLIs do not stream a running tool's output.
			if h.waiting() || h.toolRunning() || e.rateWaiting(h) || idle < e.cfg.StallTimeout {
				continue
			}
			res := e.interruptTurn(h, sess)
			res.Err = caused(record.CauseStall, fmt.Errorf("the agent stalled: no output for %s (limits.agentStallTimeoutMs)", idle.Round(time.Second)))
			return res
		}
	}
}

// interruptTurn asks the CLI to stop the turn and waits, bounded, for it.
func (e *Engine) interruptTurn(h *host, sess provider.Session) provider.TurnEnded {
	ictx, cancel := context.WithTimeout(context.Background(), interruptGrace)
	defer cancel()
	_ = sess.Interrupt(ictx)
	select {
	case res := <-h.turns:
		return res
	case <-sess.Done():
	case <-ictx.Done():
	}
	_ = sess.Close()
	select {
	case res := <-h.turns:
		return res
	default:
		return provider.TurnEnded{ExitCode: -1}
	}
}

// agentEnv is the environment of an agent's CLI: the daemon's own plus
// the fleet's markers (provider.SessionEnv).
func (e *Engine) agentEnv(agent, taskID string) []string {
	env := e.cfg.Env
	if env == nil {
		env = os.Environ()
	}
	env = append(slices.Clip(env), provider.SessionEnv+"="+e.cfg.SessionID, provider.WorkerEnv+"="+agent)
	if taskID != "" {
		env = append(env, "AGENTS_FLEET_TASK="+taskID)
	}
	return env
}

// hostProvider is the provider that runs prov's workers on worker host
// host. A worker stays on its host for every turn, so a follow-up of one
// whose host this fleet does not know fails, saying so.
func (e *Engine) hostProvider(host, prov string) (provider.Provider, error) {
	if e.cfg.Hosts == nil {
		return nil, fmt.Errorf("the worker ran on host %s, and this fleet has no worker hosts (fleet run --hosts-listen)", host)
	}
	p := e.cfg.Hosts.Provider(host, prov)
	if p == nil {
		return nil, fmt.Errorf("worker host %s cannot run %s workers now", host, prov)
	}
	return p, nil
}

// providerLocked returns the provider called name, or the default one.
func (e *Engine) providerLocked(name string) provider.Provider {
	if name == "" || name == e.cfg.Provider.Name() {
		return e.cfg.Provider
	}
	return e.cfg.Providers[name]
}

// host is the provider.Host of one agent session: a worker's (w and t set)
// or the coordinator's (both nil).
type host struct {
	e     *Engine
	w     *worker
	t     *task
	agent string                  // "w3" or "coordinator"
	ctx   context.Context         // the task's: ends when it is cancelled
	turns chan provider.TurnEnded // cap 1: the current turn's end

	mu       sync.Mutex
	started  map[string]time.Time // tool call id → start, to measure durations
	edits    map[string]string    // absolute path → the tool that edited it
	order    []string             // edited paths in first-edit order
	blocked  int                  // requests waiting for the operator
	lastTool string               // the last tool the agent started
	held     *provider.Text       // the coordinator's latest text, not yet published
	activity int64                // epoch ms, the coordinator's (workers use w.lastActivity)
}

func newHost(e *Engine, w *worker, t *task, ctx context.Context) *host {
	agent := coordinatorAgent
	if w != nil {
		agent = w.id
	}
	return &host{e: e, w: w, t: t, agent: agent, ctx: ctx, turns: make(chan provider.TurnEnded, 1),
		started: make(map[string]time.Time), edits: make(map[string]string)}
}

func (h *host) taskID() string {
	if h.t == nil {
		return ""
	}
	return h.t.id
}

func (h *host) touch(now int64) {
	if h.w != nil {
		h.w.lastActivity.Store(now)
		return
	}
	h.mu.Lock()
	h.activity = now
	h.mu.Unlock()
}

func (h *host) lastActivity() int64 {
	if h.w != nil {
		return h.w.lastActivity.Load()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.activity
}

// healthy ends the stalled or rate-limited state of h's worker when ev
// shows the agent at work again: text, a tool call, output or tokens (a
// CLI's own start-up events do not count). A model response proves the
// account works again, so the limit's hold on the provider ends too.
func (h *host) healthy(ev provider.Event) {
	switch ev.(type) {
	case provider.Text, provider.ToolStarted, provider.ToolCompleted, provider.Output, provider.Usage:
	default:
		return
	}
	healed := h.w.healing.Swap(0) != 0
	limited := h.w.limited.Swap(false)
	if !healed && !limited {
		return
	}
	e := h.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if limited {
		e.limitPassedLocked(h.w)
	}
	e.changedLocked()
}

// toolRunning reports whether a tool call of the agent has started and not
// completed.
func (h *host) toolRunning() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.started) > 0
}

// clearTools forgets the tool calls in flight: the turn they were part of
// was interrupted.
func (h *host) clearTools() {
	h.mu.Lock()
	clear(h.started)
	h.mu.Unlock()
}

// waiting reports whether the agent is blocked on the operator (a stall
// then is the operator's, not the agent's).
func (h *host) waiting() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.blocked > 0
}

// outputGroup bounds the lines published between two Throttle calls, so
// a read full of short lines cannot run far past a client's soft bound.
const (
	outputGroupLines = 128
	outputGroupBytes = 32 << 10
)

// Event handles one event of the session; see provider.Event.
func (h *host) Event(ev provider.Event) {
	e := h.e
	if h.w == nil {
		// The coordinator's last text of a turn is its reply: it is held
		// until the next event shows whether it was the last (then the
		// reply carries it, once) or not (then it is a transcript line).
		if !h.holdCoordinatorText(ev) {
			return
		}
	}
	if h.w != nil && (h.w.healing.Load() != 0 || h.w.limited.Load()) {
		h.healthy(ev)
	}
	switch ev := ev.(type) {
	case provider.RateLimited:
		e.rateLimited(h, ev)
	case provider.Output:
		h.output(ev.Stream, ev.Lines)
	case provider.Text:
		now := nowMs()
		h.touch(now)
		if strings.TrimSpace(ev.Text) == "" {
			return
		}
		h.remember(ev.Text)
		m := &protocol.Transcript{Role: protocol.RoleAssistant, Text: ev.Text, Agent: h.lineAgent(), Ts: now}
		if ev.Reasoning {
			m.Kind = protocol.TranscriptReasoning
		}
		e.pub.Broadcast(m)
	case provider.Note:
		h.remember("[fleet] " + ev.Text)
		e.pub.Broadcast(&protocol.Transcript{Role: protocol.RoleSystem, Text: ev.Text, Agent: h.lineAgent(), Ts: nowMs()})
	case provider.ToolStarted:
		h.mu.Lock()
		h.started[ev.ID] = time.Now()
		h.lastTool = ev.Name
		h.mu.Unlock()
		h.remember("▶ " + ev.Name + ": " + oneLine(ev.Detail, 300))
		e.toolStarted(h, ev)
	case provider.ToolCompleted:
		h.mu.Lock()
		if ev.Duration == 0 {
			if at, ok := h.started[ev.ID]; ok {
				ev.Duration = time.Since(at)
			}
		}
		delete(h.started, ev.ID)
		h.mu.Unlock()
		mark := "✓ "
		if ev.IsError {
			mark = "✗ "
		}
		h.remember(mark + ev.Name + ": " + truncateRunes(ev.Result, 500))
		e.toolCompleted(h, ev)
	case provider.FileEdited:
		h.touch(nowMs())
		p := ev.Path
		if !filepath.IsAbs(p) && h.w != nil {
			e.mu.Lock()
			p = filepath.Join(h.w.dir, p)
			e.mu.Unlock()
		}
		p = filepath.Clean(p)
		h.mu.Lock()
		if _, ok := h.edits[p]; !ok {
			h.order = append(h.order, p)
		}
		h.edits[p] = ev.Tool
		h.mu.Unlock()
	case provider.Usage:
		h.touch(nowMs())
		e.addUsage(h, ev)
	case provider.SessionStarted:
		h.touch(nowMs())
		e.sessionStarted(h, ev)
	case provider.TurnEnded:
		h.touch(nowMs())
		select {
		case h.turns <- ev:
		default:
			e.log.Warn("a provider ended a turn twice; the second end is ignored", "agent", h.agent)
		}
	default:
		e.log.Warn("unknown provider event", "type", fmt.Sprintf("%T", ev))
	}
}

// output publishes raw process output as role "tool" lines, in groups
// that Throttle can hold back.
func (h *host) output(stream provider.Stream, lines []string) {
	now := nowMs() // the lines of one read arrived together
	h.touch(now)
	var st protocol.Stream
	if stream == provider.Stderr {
		st = protocol.StreamStderr
	}
	if h.w != nil {
		h.w.recent.add(lines[max(0, len(lines)-recentCap):]...)
	}
	ctx := h.ctx
	for len(lines) > 0 {
		n, size := 0, 0
		for n < len(lines) && n < outputGroupLines && size < outputGroupBytes {
			size += len(lines[n])
			n++
		}
		if h.e.cfg.Throttle != nil {
			h.e.cfg.Throttle(ctx)
		}
		// One allocation for the group's events, not one a line.
		ts := make([]protocol.Transcript, n)
		ms := make([]protocol.Message, n)
		for i, line := range lines[:n] {
			ts[i] = protocol.Transcript{Role: protocol.RoleTool, Text: line, Agent: h.lineAgent(), Ts: now, Stream: st}
			ms[i] = &ts[i]
		}
		h.e.publishBatch(ms)
		lines = lines[n:]
	}
}

func (e *Engine) toolStarted(h *host, c provider.ToolStarted) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := nowMs()
	h.touch(now)
	if w := h.w; w != nil {
		w.toolUses++
		w.lastTool = c.Name + ": " + oneLine(c.Detail, 200)
		w.toolCounts = bumpTool(w.toolCounts, c.Name)
	}
	st := e.tools[c.Name]
	if st == nil {
		st = &toolStat{}
		e.tools[c.Name] = st
	}
	st.count++
	st.lastUsed = now
	e.changedLocked()
	e.pub.Broadcast(&protocol.ToolCall{
		Agent: h.agent, Tool: c.Name, Phase: protocol.PhaseStart, Ts: now,
		AgentName: h.agent, Detail: protocol.CutText(c.Detail, maxToolDetail), Input: cutInput(c.Input), ToolCallID: c.ID,
	})
}

func (e *Engine) toolCompleted(h *host, r provider.ToolCompleted) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := nowMs()
	h.touch(now)
	e.changedLocked()
	if h.w != nil {
		h.w.gitStale = true // the tool may have changed the worktree
	}
	e.pub.Broadcast(&protocol.ToolCall{
		Agent: h.agent, Tool: r.Name, Phase: protocol.PhaseComplete, Ts: now,
		AgentName: h.agent, Result: truncateRunes(r.Result, resultChars), IsError: protocol.Bool(r.IsError),
		DurationMs: protocol.Int(r.Duration.Milliseconds()), ToolCallID: r.ID,
	})
}

func (e *Engine) addUsage(h *host, u provider.Usage) {
	e.mu.Lock()
	defer e.mu.Unlock()
	tok := &e.coordTokens
	if h.w != nil {
		tok = &h.w.tokens
	}
	tok.add(u)
	e.sessionTokens.add(u)
	if h.w != nil {
		e.saveWorkerLocked(h.w)
	}
	e.checkBudgetsLocked(h)
	e.changedLocked()
}

func (e *Engine) sessionStarted(h *host, s provider.SessionStarted) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if h.w == nil {
		changed := false
		if s.ID != "" && s.ID != e.coordSession {
			e.coordSession, changed = s.ID, true
		}
		if s.Model != "" && s.Model != e.coordModel {
			e.coordModel, changed = s.Model, true
		}
		if changed {
			e.saveCoordinatorLocked()
			e.changedLocked()
		}
		return
	}
	changed := false
	if s.ID != "" && s.ID != h.w.agentSession {
		h.w.agentSession, changed = s.ID, true
	}
	if s.Model != "" && s.Model != h.w.model {
		h.w.model, changed = s.Model, true
	}
	if changed {
		e.saveWorkerLocked(h.w)
		e.changedLocked()
	}
}

// attribute names the tool of each change the worktree diff found: the
// agent tool that reported editing the file, else the shell (a command
// wrote it). Reported edits the diff does not show are not published:
// the diff is the truth.
func (h *host) attribute(changes []FileChange) []FileChange {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := range changes {
		if tool, ok := h.edits[filepath.Clean(changes[i].AbsolutePath)]; ok && tool != "" {
			changes[i].Tool = tool
		} else if h.lastTool != "" {
			changes[i].Tool = h.lastTool // a command the agent ran made it
		}
	}
	return changes
}

// unconfirmedEdits turns the edits the agent reported into changes when
// there is no worktree to confirm them (the fleet's cwd is not a git
// repository): all the fleet knows is what the agent said.
func (h *host) unconfirmedEdits(cwd string) []FileChange {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]FileChange, 0, len(h.order))
	for _, p := range h.order {
		rel, err := filepath.Rel(cwd, p)
		if err != nil {
			rel = p
		}
		typ := protocol.ChangeEdited
		if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
			typ = protocol.ChangeDeleted
		}
		out = append(out, FileChange{Path: filepath.ToSlash(rel), AbsolutePath: p, Type: typ, Tool: h.edits[p]})
	}
	return out
}

// Permission relays a CLI's permission prompt to the operator: a confirm
// when the CLI offers allow/deny, an ask with the CLI's choices when it
// offers more (allow once / allow for the session / deny).
func (h *host) Permission(ctx context.Context, r provider.PermissionRequest) (provider.Decision, error) {
	summary := h.permissionSummary(r)
	if h.e.cfg.Policy.MatchTool(r.Tool, r.Input) != "" && h.e.cfg.Governor != nil && h.w != nil {
		// A native session: the root decides, by an approve or deny
		// pinned to this very request.
		ok, err := h.nativeApproval(ctx, r, summary)
		if err != nil {
			return provider.Decision{Message: "no native decision: " + err.Error()}, err
		}
		d := provider.Decision{Allow: ok}
		for _, o := range r.Options {
			if (o.Kind == provider.Reject) != ok && o.Kind != provider.AllowAlways {
				d.OptionID = o.ID
				break
			}
		}
		if !ok {
			d.Message = "denied by the operator (native root)"
		}
		return d, nil
	}
	if h.e.cfg.Policy.MatchTool(r.Tool, r.Input) != "" {
		// The confirm policy names it (git push, rm -rf…): it is approved
		// one call at a time, never for the rest of the session.
		r.Options = slices.DeleteFunc(slices.Clone(r.Options), func(o provider.PermissionOption) bool { return o.Kind == provider.AllowAlways })
	}
	allows, rejects := 0, 0
	for _, o := range r.Options {
		if o.Kind == provider.Reject {
			rejects++
		} else {
			allows++
		}
	}
	if allows <= 1 && rejects <= 1 {
		ok, err := h.raise(ctx, request{kind: kindConfirm, summary: summary})
		if err != nil {
			return provider.Decision{Message: "no answer from the operator"}, err
		}
		d := provider.Decision{Allow: ok.approve}
		for _, o := range r.Options {
			if (o.Kind == provider.Reject) != ok.approve {
				d.OptionID = o.ID
				break
			}
		}
		if !ok.approve {
			d.Message = "denied by the operator"
		}
		return d, nil
	}
	q := provider.Question{Text: summary, Kind: "choice"}
	req := request{kind: kindAsk}
	for _, o := range r.Options {
		q.Choices = append(q.Choices, provider.Choice{Label: o.Label, Value: o.ID, Description: string(o.Kind)})
		switch {
		case o.Kind == provider.AllowOnce && req.allowValue == "":
			req.allowValue = o.ID
		case o.Kind == provider.Reject && req.denyValue == "":
			req.denyValue = o.ID
		}
	}
	if req.allowValue == "" || req.denyValue == "" {
		req.allowValue, req.denyValue = "", ""
	}
	req.question = q
	ans, err := h.raise(ctx, req)
	if err != nil {
		return provider.Decision{Message: "no answer from the operator"}, err
	}
	for _, o := range r.Options {
		if o.ID == ans.text {
			d := provider.Decision{Allow: o.Kind != provider.Reject, OptionID: o.ID}
			if !d.Allow {
				d.Message = "denied by the operator"
			}
			return d, nil
		}
	}
	return provider.Decision{Message: "the operator's answer matched no option"}, nil
}

// permissionSummary says who wants to do what: the worker, the tool, and
// the command or file, with the CLI's own description.
func (h *host) permissionSummary(r provider.PermissionRequest) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s wants to use %s", h.agent, r.Tool)
	if what := toolDetail(r.Input); what != "" {
		fmt.Fprintf(&b, ": %s", oneLine(what, 500))
	}
	if d := strings.TrimSpace(r.Description); d != "" && !strings.Contains(b.String(), d) {
		fmt.Fprintf(&b, " (%s)", oneLine(d, 200))
	}
	if p := h.e.cfg.Policy.MatchTool(r.Tool, r.Input); p != "" {
		fmt.Fprintf(&b, " — matches the confirm policy (%s)", p)
	}
	return b.String()
}

// toolDetail is the part of a tool's input a human needs to judge it.
func toolDetail(in map[string]any) string {
	for _, k := range []string{"command", "cmd", "fullCommandText", "file_path", "path", "notebook_path", "url", "pattern"} {
		switch v := in[k].(type) {
		case string:
			if v != "" {
				return v
			}
		case []any:
			parts := make([]string, 0, len(v))
			for _, a := range v {
				parts = append(parts, fmt.Sprint(a))
			}
			return strings.Join(parts, " ")
		}
	}
	return ""
}

func (h *host) Ask(ctx context.Context, q provider.Question) (string, error) {
	ans, err := h.raise(ctx, request{kind: kindAsk, question: q})
	return ans.text, err
}

func (h *host) Confirm(ctx context.Context, summary string) (bool, error) {
	ans, err := h.raise(ctx, request{kind: kindConfirm, summary: summary})
	return ans.approve, err
}

func (h *host) raise(ctx context.Context, r request) (answer, error) {
	h.mu.Lock()
	h.blocked++
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.blocked--
		h.mu.Unlock()
		h.touch(nowMs())
	}()
	return h.e.broker.raise(ctx, h, r)
}

// tokens is a token account: a worker's, the coordinator's, the session's.
type tokens struct {
	input, output, cacheRead, cacheWrite int64
	contextTokens, contextWindow         int64
}

func (t *tokens) add(u provider.Usage) {
	t.input += u.InputTokens
	t.output += u.OutputTokens
	t.cacheRead += u.CacheReadTokens
	t.cacheWrite += u.CacheWriteTokens
	if u.ContextTokens > 0 {
		t.contextTokens = u.ContextTokens
	}
	if u.ContextWindow > 0 {
		t.contextWindow = u.ContextWindow
	}
}

func (t tokens) total() int64 { return t.input + t.output }

// toolCount is one tool's uses by a worker (topTools).
type toolCount struct {
	name  string
	count int64
}

func bumpTool(tc []toolCount, name string) []toolCount {
	for i := range tc {
		if tc[i].name == name {
			tc[i].count++
			return tc
		}
	}
	if len(tc) >= 32 { // a bound: topTools shows a handful
		return tc
	}
	return append(tc, toolCount{name: name, count: 1})
}

// topTools returns up to n tool names, most used first.
func topTools(tc []toolCount, n int) []string {
	s := slices.Clone(tc)
	slices.SortStableFunc(s, func(a, b toolCount) int { return int(b.count - a.count) })
	out := make([]string, 0, min(n, len(s)))
	for _, c := range s[:min(n, len(s))] {
		out = append(out, c.name)
	}
	return out
}

func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	return truncateRunes(s, max)
}

func truncateRunes(s string, max int) string {
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	r := []rune(s)
	return string(r[:max-1]) + "…"
}

// coordinatorAgent is the coordinator's agent id on the wire.
const coordinatorAgent = "coordinator"

// recentLines keeps a worker's last transcript lines for
// read_worker_output: a bounded ring, safe for concurrent use.
type recentLines struct {
	mu    sync.Mutex
	lines []string
	next  int
	full  bool
}

const recentCap = 500

func (r *recentLines) add(lines ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lines == nil {
		r.lines = make([]string, recentCap)
	}
	for _, l := range lines {
		r.lines[r.next] = l
		r.next = (r.next + 1) % recentCap
		if r.next == 0 {
			r.full = true
		}
	}
}

func (r *recentLines) last(n int) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	size := r.next
	if r.full {
		size = recentCap
	}
	n = min(max(n, 0), size)
	out := make([]string, 0, n)
	for i := size - n; i < size; i++ {
		idx := i
		if r.full {
			idx = (r.next + i) % recentCap
		}
		out = append(out, r.lines[idx])
	}
	return out
}

// remember keeps a line for read_worker_output.
func (h *host) remember(line string) {
	if h.w != nil {
		h.w.recent.add(line)
	}
}

// lineAgent is a transcript line's agent: the worker, or none for the
// coordinator (the protocol leaves it out for coordinator-level lines).
func (h *host) lineAgent() string {
	if h.w == nil {
		return ""
	}
	return h.agent
}

// quiet reports whether p's turns may be silent for long (provider.Quiet).
func quiet(p provider.Provider) bool {
	q, ok := p.(provider.Quiet)
	return ok && q.Quiet()
}

// holdCoordinatorText handles the coordinator's text ahead of Event: it
// keeps the latest assistant text back and publishes the one before it. It
// reports whether Event should go on with ev.
func (h *host) holdCoordinatorText(ev provider.Event) bool {
	switch ev.(type) {
	case provider.Usage, provider.SessionStarted, provider.FileEdited:
		return true // not something a console shows: the held text stays last
	}
	h.mu.Lock()
	held := h.held
	h.held = nil
	if t, ok := ev.(provider.Text); ok && !t.Reasoning && strings.TrimSpace(t.Text) != "" {
		h.held = &t
		h.mu.Unlock()
		h.touch(nowMs())
		if held != nil {
			h.publishText(*held)
		}
		return false
	}
	h.mu.Unlock()
	if held != nil {
		if end, ok := ev.(provider.TurnEnded); ok && end.Err == nil && strings.TrimSpace(end.Result) == strings.TrimSpace(held.Text) {
			return true // the reply says it
		}
		h.publishText(*held)
	}
	return true
}

func (h *host) publishText(t provider.Text) {
	h.e.pub.Broadcast(&protocol.Transcript{Role: protocol.RoleAssistant, Text: t.Text, Agent: h.lineAgent(), Ts: nowMs()})
}
