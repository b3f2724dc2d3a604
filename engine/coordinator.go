package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agents-fleet/fleet/protocol"
	"github.com/agents-fleet/fleet/provider"
)

// The agent coordinator: with an agent provider (Config.Coordinator set), a
// plain prompt is a turn of a long-lived coordinator session of that CLI,
// which plans and delegates through the fleet's MCP tools (package
// fleetmcp, served by the daemon; the engine implements what they do). Its
// final text of a turn is the fleet's reply.

// CoordinatorConfig turns the agent coordinator on.
type CoordinatorConfig struct {
	// Instructions are appended to the CLI's system prompt; default
	// DefaultCoordinatorInstructions.
	Instructions string
	// MCP returns the MCP servers to offer an agent (the fleet's own, with
	// a token for that agent); nil offers none.
	MCP func(agent string) []provider.MCPServer
	// Revoke ends an agent's MCP access once it settled; optional.
	Revoke func(agent string)
}

// DefaultCoordinatorInstructions tell the coordinator agent what it is.
const DefaultCoordinatorInstructions = `You are the coordinator of a fleet of coding agents working in parallel on this repository, each in its own git worktree.
Plan the operator's request, then delegate the work with the fleet's tools: spawn_worker (one clear, self-contained task per worker), list_workers, list_tasks, read_worker_output, tell_worker, cancel_worker. Ask the operator with ask_operator or confirm when a decision is theirs.
Do small lookups yourself; delegate changes. When you have delegated, say in one short paragraph what you started and why.`

// maxQueuedPrompts bounds prompts waiting for the coordinator's turn.
const maxQueuedPrompts = 32

// coordinator is the coordinator session's state; guarded by Engine.mu.
type coordinator struct {
	sess   provider.Session
	h      *host
	busy   bool
	since  time.Time // the running turn's start
	queue  []string
	cancel context.CancelCauseFunc // ends the session's context at shutdown
}

// coordinatorPromptLocked hands a plain prompt to the coordinator: now, or
// after its running turn.
func (e *Engine) coordinatorPromptLocked(text string) {
	c := &e.coord
	if c.busy {
		if len(c.queue) >= maxQueuedPrompts {
			e.replyErrorLocked(fmt.Sprintf("The coordinator already has %d prompts waiting; this one was not queued.", len(c.queue)))
			return
		}
		c.queue = append(c.queue, text)
		e.activityLocked("operator", "queued", fmt.Sprintf("prompt %d waits for the coordinator's turn", len(c.queue)))
		return
	}
	e.startCoordinatorTurnLocked(text)
}

func (e *Engine) startCoordinatorTurnLocked(text string) {
	c := &e.coord
	c.busy, c.since = true, time.Now()
	e.changedLocked()
	e.runWG.Add(1)
	go func() {
		defer e.runWG.Done()
		res := e.coordinatorTurn(text)
		e.mu.Lock()
		defer e.mu.Unlock()
		c.busy = false
		e.changedLocked()
		switch {
		case res.Err != nil && e.closing:
		case res.Err != nil:
			e.replyErrorLocked("The coordinator's turn failed: " + res.Err.Error())
		case strings.TrimSpace(res.Result) != "":
			e.replyLocked(res.Result)
		}
		if len(c.queue) > 0 && !e.closing {
			next := c.queue[0]
			c.queue = c.queue[1:]
			e.startCoordinatorTurnLocked(next)
		}
	}()
}

// coordinatorTurn runs one turn, starting (or resuming) the coordinator's
// session when there is none.
func (e *Engine) coordinatorTurn(text string) provider.TurnEnded {
	e.mu.Lock()
	if e.closing {
		e.mu.Unlock()
		return provider.TurnEnded{Err: errShutdown}
	}
	c := &e.coord
	sess, h := c.sess, c.h
	if sess == nil {
		ctx, cancel := context.WithCancelCause(context.Background())
		c.cancel = cancel
		h = newHost(e, nil, nil, ctx)
		h.touch(nowMs())
		c.h = h
	}
	spec := provider.Spec{
		Agent: coordinatorAgent, Role: provider.RoleCoordinator, Dir: e.cfg.Cwd,
		Env: e.agentEnv(coordinatorAgent, ""), ResumeID: e.coordSession,
		Instructions: e.cfg.Coordinator.Instructions,
	}
	if spec.Instructions == "" {
		spec.Instructions = DefaultCoordinatorInstructions
	}
	if e.cfg.Coordinator.MCP != nil {
		spec.MCP = e.cfg.Coordinator.MCP(coordinatorAgent)
	}
	ctx := h.ctx
	e.mu.Unlock()

	if sess == nil {
		sctx, cancel := context.WithTimeout(ctx, sessionStartTimeout)
		s, err := e.cfg.Provider.Start(sctx, spec, h)
		cancel()
		if err != nil {
			return provider.TurnEnded{Err: fmt.Errorf("start the %s coordinator: %w", e.cfg.Provider.Name(), err)}
		}
		sess = s
		e.mu.Lock()
		if e.closing {
			e.mu.Unlock()
			s.Close()
			return provider.TurnEnded{Err: errShutdown}
		}
		c.sess = s
		e.mu.Unlock()
	}
	h.touch(nowMs())
	if err := sess.Send(ctx, provider.Turn{Text: text}); err != nil {
		e.dropCoordinatorSession(sess)
		return provider.TurnEnded{Err: fmt.Errorf("send the prompt to the coordinator: %w", err)}
	}
	res := e.awaitTurn(ctx, h, sess, quiet(e.cfg.Provider))
	select {
	case <-sess.Done():
		// The CLI is gone: the next prompt starts it again, resuming the
		// conversation by its session id.
		e.dropCoordinatorSession(sess)
	default:
	}
	return res
}

func (e *Engine) dropCoordinatorSession(s provider.Session) {
	s.Close()
	e.mu.Lock()
	if e.coord.sess == s {
		e.coord.sess = nil
	}
	e.mu.Unlock()
}

// closeCoordinator ends the coordinator's session (shutdown); it must be
// called without e.mu.
func (e *Engine) closeCoordinator() {
	e.mu.Lock()
	s, cancel := e.coord.sess, e.coord.cancel
	e.coord.sess = nil
	e.mu.Unlock()
	if cancel != nil {
		cancel(errShutdown)
	}
	if s != nil {
		s.Close()
	}
}

// coordinatorStaleMsLocked is the time since the coordinator's last
// activity while it is processing, nil otherwise.
func (e *Engine) coordinatorStaleMsLocked() *int64 {
	if !e.coord.busy || e.coord.h == nil {
		return nil
	}
	return protocol.Int(max(0, nowMs()-e.coord.h.lastActivity()))
}

// spawnUsage is /spawn's usage, in its catalog entry and its errors.
const spawnUsage = "/spawn [--provider P] [--model M] [--skill NAME] [--host NAME|--label L] TEXT"

// cmdSpawn starts a worker on TEXT directly, without the coordinator.
func (e *Engine) cmdSpawn(args string) (string, error) {
	s, err := parseSpawn(args)
	if err == nil {
		err = e.checkPinLocked(s.Host, s.Label)
	}
	if err != nil {
		return "", failf("%v. Usage: %s", err, spawnUsage)
	}
	if s.Skill != "" {
		if e.cfg.Intel == nil {
			return "", failure("Skills need the intel store, which is unavailable in this fleet.")
		}
		e.spawnSkill(s)
		return "", nil
	}
	t, err := e.spawnLocked("operator", s)
	if err != nil {
		return "", err
	}
	return e.queuedLocked(t, s.Text, ""), nil
}

// queuedLocked is the reply to a /spawn of text that queued t (with what,
// when not ""): the worker it asks for, where, and why it waits if it does.
func (e *Engine) queuedLocked(t *task, text, with string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Queued %s for a %s worker", t.id, e.providerNameLocked(t.provider))
	switch {
	case t.pinHost != "":
		b.WriteString(" on host " + t.pinHost)
	case t.pinLabel != "":
		b.WriteString(" on a host with label " + t.pinLabel)
	}
	if with != "" {
		b.WriteString(" with " + with)
	}
	b.WriteString(": " + oneLine(text, 200))
	if e.cfg.Hosts != nil && t.status == taskPending && t.waitReason != "" {
		b.WriteString(" (waits: " + t.waitReason + ")")
	}
	return b.String()
}

// Spawn is a worker asked for by /spawn or spawn_worker; "" fields are the
// fleet's defaults.
type Spawn struct {
	Text            string // the task
	Provider, Model string
	Skill           string // a skill the task follows
	// Host or Label (at most one) pins the worker to that worker host, or
	// to a host with that label.
	Host, Label string
}

func parseSpawn(args string) (Spawn, error) {
	var s Spawn
	flags := []struct {
		prefix string
		v      *string
	}{{"--provider ", &s.Provider}, {"--model ", &s.Model}, {"--skill ", &s.Skill}, {"--host ", &s.Host}, {"--label ", &s.Label}}
	rest := strings.TrimSpace(args)
next:
	for {
		for _, f := range flags {
			if after, ok := strings.CutPrefix(rest, f.prefix); ok {
				v, after, _ := strings.Cut(strings.TrimSpace(after), " ")
				if v == "" {
					return Spawn{}, errors.New("a flag needs a value")
				}
				*f.v, rest = v, strings.TrimSpace(after)
				continue next
			}
		}
		if rest == "" {
			return Spawn{}, errors.New("nothing to do")
		}
		s.Text = rest
		return s, nil
	}
}

// spawnLocked queues a task for the worker s asks for.
func (e *Engine) spawnLocked(from string, s Spawn) (*task, error) {
	if e.closing {
		return nil, errShutdown
	}
	text := s.Text
	if strings.TrimSpace(text) == "" {
		return nil, errors.New("the task is empty")
	}
	if len(text) > maxTaskText {
		return nil, fmt.Errorf("the task is %d bytes; the limit is %d", len(text), maxTaskText)
	}
	if s.Provider != "" && e.providerLocked(s.Provider) == nil {
		return nil, fmt.Errorf("no provider %q is configured (this fleet has %s)", s.Provider, strings.Join(e.providerNamesLocked(), ", "))
	}
	if err := e.checkPinLocked(s.Host, s.Label); err != nil {
		return nil, err
	}
	t := e.addTaskLocked(strings.TrimSpace(text))
	t.provider, t.model, t.from = s.Provider, s.Model, from
	t.pinHost, t.pinLabel = s.Host, s.Label
	e.saveTaskLocked(t)
	e.dispatchLocked()
	return t, nil
}

// maxTaskText bounds a task's text.
const maxTaskText = 64 << 10

func (e *Engine) providerNameLocked(name string) string {
	if name == "" {
		return e.cfg.Provider.Name()
	}
	return name
}

func (e *Engine) providerNamesLocked() []string {
	names := []string{e.cfg.Provider.Name()}
	for n := range e.cfg.Providers {
		if n != names[0] {
			names = append(names, n)
		}
	}
	return names
}

// cmdTell sends a follow-up turn to a worker.
func (e *Engine) cmdTell(args string) (string, error) {
	id, text, _ := strings.Cut(strings.TrimSpace(args), " ")
	if id == "" || strings.TrimSpace(text) == "" {
		return "", failure("Usage: /tell WORKER TEXT")
	}
	if err := e.tellLocked("operator", id, strings.TrimSpace(text)); err != nil {
		return "", err
	}
	return fmt.Sprintf("Sent to %s.", id), nil
}

// maxFollowUps bounds the turns waiting for a busy worker.
const maxFollowUps = 8

// tellLocked gives worker id another turn: after its current one when it
// is working, or by resuming its CLI session when it has settled.
func (e *Engine) tellLocked(from, id, text string) error {
	if e.closing {
		return errShutdown
	}
	w := e.workerByID[id]
	if w == nil {
		return fmt.Errorf("no worker %q; /workers lists them", id)
	}
	if w.landing {
		return fmt.Errorf("%s is being merged; /tell it again when that is done", id)
	}
	if w.cleaning || (e.cfg.Workspaces != nil && w.branch != "" && w.worktreePath == "") {
		return fmt.Errorf("%s's worktree was removed; /spawn a new worker instead", id)
	}
	e.activityLocked(from, protocol.HubMessage, id+": "+oneLine(text, 500))
	if from == "operator" {
		e.steerLocked("tell", text, id)
	}
	switch w.status {
	case workerRunning, workerIdle:
		if len(w.followUps) >= maxFollowUps {
			return fmt.Errorf("%s already has %d follow-ups waiting", id, len(w.followUps))
		}
		w.followUps = append(w.followUps, followUp{from: from, text: text})
		return nil
	}
	t := e.addTaskLocked(text)
	t.provider, t.model, t.from = w.provider, w.model, from
	e.resumeWorkerLocked(w, t)
	return nil
}

// resumeWorkerLocked runs t on the settled worker w, in its workspace,
// continuing its CLI session.
func (e *Engine) resumeWorkerLocked(w *worker, t *task) {
	e.continueWorkerLocked(w, t, "resumed", func(ctx context.Context, h *host, dir string) provider.TurnEnded {
		return e.runTurn(ctx, h, dir, t.command)
	})
}

// continueWorkerLocked runs turn for t on the existing worker w (said as
// what: "resumed", "adopted"), tracking its file changes, and settles it.
func (e *Engine) continueWorkerLocked(w *worker, t *task, what string, turn func(ctx context.Context, h *host, dir string) provider.TurnEnded) {
	ctx, cancel := context.WithCancelCause(context.Background())
	w.status, w.taskID, w.cancel, w.endedAt = workerRunning, t.id, cancel, time.Time{}
	w.lastActivity.Store(nowMs())
	t.worker = w.id
	t.startedAt = time.Now()
	beginRunLocked(w, t)
	e.activityLocked(w.id, what, t.id+": "+oneLine(t.command, 200))
	e.saveWorkerLocked(w)
	e.setTaskLocked(t, taskRunning, "")
	h := newHost(e, w, t, ctx)
	w.host = h
	if w.dir == "" { // restored from a saved session
		w.dir = e.cfg.Cwd
		if tr, ok := e.cfg.Workspaces.(Tracker); ok && w.worktreePath != "" {
			w.dir = tr.Dir(w.id)
		}
	}
	dir := w.dir
	e.runWG.Add(1)
	go func() {
		defer e.runWG.Done()
		defer cancel(nil)
		var finish func(context.Context) ([]FileChange, error)
		if e.cfg.Workspaces != nil && w.worktreePath != "" {
			e.markRunning(w, t)
			if tr, ok := e.cfg.Workspaces.(Tracker); ok {
				finish, _ = tr.Track(ctx, w.id)
			}
		}
		res := turn(ctx, h, dir)
		if finish != nil {
			fctx, fcancel := context.WithTimeout(context.Background(), workspaceTimeout)
			changes, err := finish(fctx)
			fcancel()
			if err != nil {
				h.Event(provider.Note{Text: "could not collect file changes: " + err.Error()})
			}
			e.publishChanges(w, h.attribute(changes))
		}
		e.finishWork(w, t, res)
	}()
}

// Tracker is implemented by Workspaces that can watch an existing
// worker's workspace again (for a follow-up turn).
type Tracker interface {
	Track(ctx context.Context, worker string) (func(context.Context) ([]FileChange, error), error)
	// Dir is where the worker's agent runs in its workspace.
	Dir(worker string) string
}

// nextFollowUp takes the next follow-up for w, if any.
func (e *Engine) nextFollowUp(w *worker) (string, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(w.followUps) == 0 || e.closing {
		return "", false
	}
	f := w.followUps[0]
	w.followUps = w.followUps[1:]
	return f.text, true
}

// reportLocked tells the coordinator's feed how a worker's turn ended
// (hubEvent report, worker → coordinator).
func (e *Engine) reportLocked(w *worker, t *task, res provider.TurnEnded) {
	if e.cfg.Coordinator == nil {
		return
	}
	text := t.id + " done"
	if res.Err != nil {
		text = t.id + " failed: " + res.Err.Error()
	}
	if r := strings.TrimSpace(res.Result); r != "" {
		text += ": " + oneLine(r, 500)
	}
	e.pub.Broadcast(&protocol.HubEvent{From: w.id, To: coordinatorAgent, Kind: protocol.HubReport, Ts: nowMs(), Text: text})
}
