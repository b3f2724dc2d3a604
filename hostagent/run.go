package hostagent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agents-fleet/fleet/hosts/gitmove"
	"github.com/agents-fleet/fleet/hosts/wire"
	"github.com/agents-fleet/fleet/provider"
)

// Bounds of a run's own work.
const (
	// sessionStartTimeout bounds a provider's Start (as the engine's).
	sessionStartTimeout = 2 * time.Minute
	// shipTimeout bounds a commit and the send of the branch.
	shipTimeout = 10 * time.Minute
	// controlTimeout bounds a Send or an Interrupt of the session.
	controlTimeout = 30 * time.Second
	// maxQueuedControl bounds the fleet's sends and interrupts of a run
	// waiting for the run's goroutine.
	maxQueuedControl = 16
)

// run is one worker the host runs for the fleet: one claim (wire.Start),
// from taking it until its last event is in the EVENTS stream. Its
// goroutine (live) starts the session, serves the fleet's sends and
// interrupts in order, and ends it; the provider reports to it as its
// provider.Host.
type run struct {
	a     *Agent
	key   string // wire.RunKey
	start wire.Start
	dir   string // the worktree, <work-dir>/runs/<key>
	log   *slog.Logger
	out   *outbox

	ctl    chan control  // sends and interrupts, in the order they came
	endReq chan struct{} // closed by requestEnd
	quit   chan struct{} // closed when the run starts to end: prompts end unanswered
	// setup bounds the start; requestEnd ends it early.
	setup       context.Context
	cancelSetup context.CancelFunc

	// Set by live before the session starts, read-only after.
	cache *gitmove.Cache
	store gitmove.ObjectStore

	shipMu sync.Mutex // one commit and send of the branch at a time

	mu      sync.Mutex
	sess    provider.Session // nil until started
	ending  bool             // requestEnd or the session's end came
	ended   bool             // "ended" is queued; only the outbox is left
	reason  string           // why it ends: the ended event's Err ("" by the fleet's close)
	turns   int              // turns ended
	acked   string           // the branch tip the fleet has
	sent    string           // the branch tip last sent
	pending map[string]chan wire.Answer
}

// commitRE matches a full object id, the only commit the fleet may say it
// fetched.
var commitRE = regexp.MustCompile(`^(?:[0-9a-f]{40}|[0-9a-f]{64})$`)

// control is a request of the fleet for the run's goroutine.
type control struct {
	req wire.Control
	msg *nats.Msg // to reply to
}

func newRun(a *Agent, key string, s wire.Start) *run {
	log := a.log.With("run", key)
	r := &run{a: a, key: key, start: s, dir: filepath.Join(a.cfg.WorkDir, "runs", key), log: log,
		out:    newOutbox(a.js, wire.EventSubject(a.cfg.Join.Name, key), s.Claim, log),
		ctl:    make(chan control, maxQueuedControl),
		endReq: make(chan struct{}), quit: make(chan struct{}),
		acked: s.Acked, pending: map[string]chan wire.Answer{}}
	r.setup, r.cancelSetup = context.WithCancel(a.runCtx)
	return r
}

// nonce is 16 random hex digits.
func nonce() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// live runs the run: it starts the session and says "ready", serves the
// fleet's requests until the run ends, and ends it.
func (r *run) live() {
	err := r.begin(r.setup)
	r.cancelSetup()
	if err == nil {
		r.log.Info("worker started", "provider", r.start.Provider, "worker", r.start.Worker)
		r.emit(wire.Event{Kind: wire.KindReady, ID: r.sess.ResumeID()})
		err = r.serve()
	}
	r.finish(err)
}

// begin brings the base into the cache, makes (or, for a resumed worker,
// reuses) the worktree and starts the session.
func (r *run) begin(ctx context.Context) error {
	s := r.start
	prov := r.a.cfg.Providers[s.Provider]
	if prov == nil {
		return fmt.Errorf("this host has no provider %q", s.Provider)
	}
	store, err := r.a.bucket(ctx)
	if err != nil {
		return err
	}
	cache, err := r.a.caches.Open(ctx, s.Repo)
	if err != nil {
		return err
	}
	if s.BaseKey != "" {
		got, err := cache.ReceiveBase(ctx, store, s.BaseKey)
		if err != nil {
			return err
		}
		if got != s.Base {
			return fmt.Errorf("the base bundle %s brings %s, not the claim's base %s", s.BaseKey, got, s.Base)
		}
	}
	if _, err := os.Lstat(r.dir); errors.Is(err, os.ErrNotExist) {
		if err := r.worktree(ctx, cache); err != nil {
			return err
		}
		// The fleet has the base: a worker that commits nothing sends
		// nothing.
		r.mu.Lock()
		r.sent = s.Base
		r.mu.Unlock()
	} else if err != nil {
		return fmt.Errorf("worktree: %w", err)
	} else if reset, err := r.a.committer.resetTo(ctx, r.dir, s.Base); err != nil {
		return err
	} else if reset {
		r.log.Info("worktree reset to the fleet's base: it held work the fleet does not have", "base", s.Base)
	}
	r.cache, r.store = cache, store
	env := slices.DeleteFunc(slices.Clone(r.a.cfg.Env), func(kv string) bool { return strings.HasPrefix(kv, "AGENTS_FLEET_") })
	env = append(append(env, s.Env...), provider.HostEnv+"="+r.a.cfg.Join.Name)
	spec := provider.Spec{Agent: s.Worker, Role: provider.RoleWorker, Dir: r.dir, Env: env,
		Model: s.Model, ResumeID: s.ResumeID, Instructions: s.Instructions}
	sctx, cancel := context.WithTimeout(ctx, sessionStartTimeout)
	defer cancel()
	sess, err := prov.Start(sctx, spec, r)
	if err != nil {
		return fmt.Errorf("start %s: %w", s.Provider, err)
	}
	r.mu.Lock()
	r.sess = sess
	r.mu.Unlock()
	return nil
}

// worktree makes the run's worktree on its branch at the base. A branch
// the cache still has from a worker whose worktree is gone is dropped
// first: the fleet says where the worker starts.
func (r *run) worktree(ctx context.Context, cache *gitmove.Cache) error {
	s := r.start
	err := cache.Worktree(ctx, s.Base, r.dir, s.Branch)
	if errors.Is(err, gitmove.ErrExists) {
		if err := cache.Remove(ctx, r.dir, s.Branch); err != nil {
			return err
		}
		err = cache.Worktree(ctx, s.Base, r.dir, s.Branch)
	}
	return err
}

// serve handles the fleet's sends and interrupts until the session ends or
// the run is asked to end; it returns why the session ended by itself.
func (r *run) serve() error {
	for {
		select {
		case c := <-r.ctl:
			r.handle(c)
		case <-r.endReq:
			return nil
		case <-r.sess.Done():
			err := r.sess.Err()
			if err == nil {
				err = errors.New("the agent session ended")
			}
			return err
		}
	}
}

// handle runs a send or an interrupt and replies.
func (r *run) handle(c control) {
	r.mu.Lock()
	ending := r.ending
	r.mu.Unlock()
	if ending {
		reply(c.msg, wire.Reply{Gone: true})
		return
	}
	ctx, cancel := context.WithTimeout(r.a.runCtx, controlTimeout)
	defer cancel()
	var err error
	if c.req.Op == wire.OpSend {
		err = r.sess.Send(ctx, provider.Turn{Text: c.req.Text})
	} else {
		err = r.sess.Interrupt(ctx)
	}
	switch {
	case err == nil:
		reply(c.msg, wire.Reply{OK: true})
	case errors.Is(err, provider.ErrBusy):
		reply(c.msg, wire.Reply{Busy: true, Err: err.Error()})
	case errors.Is(err, provider.ErrClosed):
		reply(c.msg, wire.Reply{Gone: true, Err: err.Error()})
	default:
		reply(c.msg, wire.Reply{Err: err.Error()})
	}
}

// requestEnd asks the run to end: its session is closed, its work sent,
// and "ended" says reason (the fleet's close: none). late marks every
// event from now on Late (the fleet gave the run up). A run already ending
// keeps its first reason.
func (r *run) requestEnd(reason string, late bool) {
	if late {
		r.out.setLate()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ending {
		return
	}
	r.ending, r.reason = true, reason
	close(r.endReq)
	r.cancelSetup()
}

// finish ends the run: it closes the session, commits and sends the last
// of the branch, and says "ended"; the outbox then sends what is left. err
// is why the run ends when nothing asked it to.
func (r *run) finish(err error) {
	r.mu.Lock()
	if !r.ending {
		r.ending, r.reason = true, "the worker ended"
		if err != nil {
			r.reason = err.Error()
		}
	}
	reason, sess := r.reason, r.sess
	r.mu.Unlock()
	// Nothing queues once ending is set, and nothing serves the queue any
	// more: what it holds is answered now.
	for len(r.ctl) > 0 {
		reply((<-r.ctl).msg, wire.Reply{Gone: true})
	}
	close(r.quit)
	if sess != nil {
		if err := sess.Close(); err != nil {
			r.log.Warn("closing the agent session", "err", err)
		}
	}
	if r.cache != nil {
		ctx, cancel := context.WithTimeout(r.a.runCtx, shipTimeout)
		r.ship(ctx, fmt.Sprintf("fleet: %s at its end", r.start.Worker))
		cancel()
	}
	r.emit(wire.Event{Kind: wire.KindEnded, Err: reason})
	r.out.close()
	r.mu.Lock()
	r.ended = true
	r.mu.Unlock()
	r.a.runEnded()
	r.log.Info("worker ended", "reason", reason)
}

// ship commits what the worktree holds and sends the branch, if it moved
// since it was last sent, as a "branch" event. Failures become notes: the
// next turn or the end sends what this one could not.
func (r *run) ship(ctx context.Context, message string) {
	r.shipMu.Lock()
	defer r.shipMu.Unlock()
	head, err := r.a.committer.commit(ctx, r.dir, message)
	if err != nil {
		r.note("could not commit the worker's work on host %s: %v", r.a.cfg.Join.Name, err)
	}
	r.mu.Lock()
	acked, sent := r.acked, r.sent
	r.mu.Unlock()
	if head != "" && (head == acked || head == sent) {
		return
	}
	s, err := r.sendBranch(ctx, acked)
	if err != nil {
		r.note("could not send the worker's branch from host %s: %v", r.a.cfg.Join.Name, err)
		return
	}
	r.mu.Lock()
	r.sent = s.Commit
	r.mu.Unlock()
	if s.Key != "" {
		r.emit(wire.Event{Kind: wire.KindBranch, Key: s.Key, Commit: s.Commit})
	}
}

// sendBranch sends the branch against acked, and again while the link is
// down, until ctx ends: a link that heals in time delivers the turn's
// work with the turn's end. A failure with the link up is final.
func (r *run) sendBranch(ctx context.Context, acked string) (gitmove.Sent, error) {
	pause := retryMin
	for {
		down := !r.a.linkUp()
		s, err := r.cache.SendBranch(ctx, r.store, r.start.Branch, r.start.Base, acked)
		if err == nil || ctx.Err() != nil || (!down && r.a.linkUp()) {
			return s, err
		}
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return s, err
		}
		pause = min(2*pause, retryMax)
	}
}

// control takes a request of the fleet for the run and replies, now or
// (sends and interrupts, in order) from the run's goroutine.
func (r *run) control(c wire.Control, m *nats.Msg) {
	r.mu.Lock()
	ended := r.ended
	r.mu.Unlock()
	if ended {
		reply(m, wire.Reply{Gone: true})
		return
	}
	switch c.Op {
	case wire.OpSend, wire.OpInterrupt:
		// Queued under mu, and only while the run is not ending: finish
		// answers what the queue holds once it set ending.
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.ending {
			reply(m, wire.Reply{Gone: true})
			return
		}
		select {
		case r.ctl <- control{req: c, msg: m}:
		default:
			reply(m, wire.Reply{Err: fmt.Sprintf("%d requests for this worker are still waiting", maxQueuedControl)})
		}
	case wire.OpAnswer:
		reply(m, r.answer(c))
	case wire.OpFetched:
		if !commitRE.MatchString(c.Commit) {
			reply(m, wire.Reply{Err: fmt.Sprintf("fetched: %q is not a commit id", c.Commit)})
			return
		}
		r.mu.Lock()
		r.acked = c.Commit
		r.mu.Unlock()
		reply(m, wire.Reply{OK: true})
	case wire.OpClose:
		r.requestEnd("", false)
		reply(m, wire.Reply{OK: true})
	case wire.OpStop:
		r.requestEnd("stopped: the fleet gave this worker up", true)
		reply(m, wire.Reply{OK: true})
	default:
		reply(m, wire.Reply{Err: fmt.Sprintf("unknown op %q", c.Op)})
	}
}

// answer hands the fleet's answer to the prompt waiting for it.
func (r *run) answer(c wire.Control) wire.Reply {
	if c.ID == "" || c.Answer == nil {
		return wire.Reply{Err: "answer: an id and an answer are required"}
	}
	r.mu.Lock()
	ch := r.pending[c.ID]
	delete(r.pending, c.ID)
	r.mu.Unlock()
	if ch == nil {
		return wire.Reply{Err: fmt.Sprintf("answer: no request %q is waiting (answered, or it ended)", c.ID)}
	}
	ch <- *c.Answer // cap 1, and the only send
	return wire.Reply{OK: true}
}

// emit queues e for the fleet; it blocks while the outbox is full.
func (r *run) emit(e wire.Event) {
	r.a.lastEvent.Store(time.Now().UnixNano())
	r.out.push(e)
}

// note emits a note of the host's own.
func (r *run) note(format string, args ...any) {
	text := fmt.Sprintf(format, args...)
	r.log.Warn(text)
	r.emit(wire.Event{Kind: wire.KindNote, Text: text})
}

// Event is provider.Host's: the event goes to the fleet. A turn's end
// first commits the worktree and sends the branch, so the fleet has the
// turn's work when it hears the turn ended.
func (r *run) Event(ev provider.Event) {
	if _, ok := ev.(provider.TurnEnded); ok {
		r.mu.Lock()
		r.turns++
		n := r.turns
		r.mu.Unlock()
		ctx, cancel := context.WithTimeout(r.a.runCtx, shipTimeout)
		r.ship(ctx, fmt.Sprintf("fleet: %s turn %d", r.start.Worker, n))
		cancel()
	}
	r.emit(wire.FromProvider(ev))
}

// Permission is provider.Host's: the request goes to the fleet, and the
// first answer the fleet sends back decides.
func (r *run) Permission(ctx context.Context, req provider.PermissionRequest) (provider.Decision, error) {
	ans, err := r.prompt(ctx, wire.Event{Kind: wire.KindPermission, Permission: &req})
	if err != nil {
		return provider.Decision{}, err
	}
	if ans.Decision == nil {
		return provider.Decision{}, fmt.Errorf("%w: the answer has no decision", provider.ErrNoAnswer)
	}
	return *ans.Decision, nil
}

// Ask is provider.Host's, as Permission.
func (r *run) Ask(ctx context.Context, q provider.Question) (string, error) {
	ans, err := r.prompt(ctx, wire.Event{Kind: wire.KindAsk, Text: q.Text, Question: &q})
	return ans.Text, err
}

// Confirm is provider.Host's, as Permission.
func (r *run) Confirm(ctx context.Context, summary string) (bool, error) {
	ans, err := r.prompt(ctx, wire.Event{Kind: wire.KindConfirm, Text: summary})
	return ans.Yes, err
}

// prompt sends e with a fresh id and waits for the fleet's answer, ctx's
// end or the run's.
func (r *run) prompt(ctx context.Context, e wire.Event) (wire.Answer, error) {
	e.ID = nonce()
	ch := make(chan wire.Answer, 1)
	r.mu.Lock()
	r.pending[e.ID] = ch
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.pending, e.ID)
		r.mu.Unlock()
	}()
	select {
	case <-r.quit:
		return wire.Answer{}, fmt.Errorf("%w: the worker is ending", provider.ErrNoAnswer)
	default:
	}
	if data, err := json.Marshal(e); err != nil || len(data) > wire.MaxBatch {
		r.note("a %s request of the worker is too large to send to the fleet; it is refused", e.Kind)
		return wire.Answer{}, fmt.Errorf("%w: the request is too large to send", provider.ErrNoAnswer)
	}
	r.emit(e)
	select {
	case ans := <-ch:
		if ans.Err != "" {
			return wire.Answer{}, fmt.Errorf("%w: %s", provider.ErrNoAnswer, ans.Err)
		}
		return ans, nil
	case <-ctx.Done():
		return wire.Answer{}, fmt.Errorf("%w: %w", provider.ErrNoAnswer, context.Cause(ctx))
	case <-r.quit:
		return wire.Answer{}, fmt.Errorf("%w: the worker is ending", provider.ErrNoAnswer)
	}
}
