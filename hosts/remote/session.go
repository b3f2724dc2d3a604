package remote

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agents-fleet/fleet/engine"
	"github.com/agents-fleet/fleet/hosts"
	"github.com/agents-fleet/fleet/hosts/gitmove"
	"github.com/agents-fleet/fleet/hosts/wire"
	"github.com/agents-fleet/fleet/provider"
)

// Bounds of the fleet's side of a run.
const (
	// controlTimeout bounds one control request (the host answers at once;
	// a turn's work is reported as events, not in the reply).
	controlTimeout = 10 * time.Second
	// closeWait bounds how long Close waits for the host to say the run
	// ended (it commits and sends the last branch first).
	closeWait = 2 * time.Minute
	// fetchWait is how long one pull of the run's events waits: also how
	// often the run looks at its host's state.
	fetchWait = time.Second
	// fetchBatch is how many event batches one pull takes.
	fetchBatch = 32
)

// ErrNotStarted is wrapped by Start's error when the host was lost before
// it took the claim: the claim was taken back, and nothing of the worker
// ran, so the engine puts the task back in the queue.
var ErrNotStarted = engine.ErrNotStarted

// Start starts the worker on the host: it sends the base the worker's
// mirror work tree (spec.Dir) is at, opens the run's event consumer, puts
// the claim into the host's work queue and waits for the host to say the
// session is ready.
func (p *hostProvider) Start(ctx context.Context, spec provider.Spec, h provider.Host) (provider.Session, error) {
	if st, ok := p.f.status(p.host); !ok {
		return nil, fmt.Errorf("host %s is not enrolled", p.host)
	} else if st.State != hosts.StateUp {
		return nil, fmt.Errorf("host %s is %s", p.host, st.State)
	}
	run, err := wire.RunKey(envValue(spec.Env, provider.SessionEnv), spec.Agent)
	if err != nil {
		return nil, err
	}
	mirror := spec.Dir
	base, err := gitOut(ctx, mirror, "rev-parse", "--verify", "HEAD^{commit}")
	if err != nil {
		return nil, fmt.Errorf("the worker's work tree %s: %w", mirror, err)
	}
	branch, err := gitOut(ctx, mirror, "symbolic-ref", "--short", "HEAD")
	if err != nil {
		return nil, fmt.Errorf("the worker's work tree %s is on no branch: %w", mirror, err)
	}
	p.f.log.Debug("remote worker: starting", "host", p.host, "run", run, "base", base)
	lim := p.f.cfg.Limits
	repo, err := gitmove.RepoID(ctx, mirror, base, lim)
	if err != nil {
		return nil, err
	}
	l, err := p.f.link(ctx, p.host)
	if err != nil {
		return nil, err
	}
	s := &session{p: p, l: l, h: h, run: run, mirror: mirror, branch: branch, base: base,
		ready: make(chan struct{}), done: make(chan struct{}), loopDone: make(chan struct{}), answers: map[string]bool{}}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	defer func() {
		if s.claim == 0 {
			s.cancel() // Start failed before the claim: nothing runs
		}
	}()
	var have wire.HaveReply
	if err := s.request(ctx, wire.HaveSubject(p.host), wire.Have{Repo: repo}, &have); err != nil {
		return nil, fmt.Errorf("host %s: ask what it has of the repository: %w", p.host, err)
	}
	sent, err := gitmove.SendBase(ctx, l.store, mirror, base, have.Commits, lim)
	if err != nil {
		return nil, fmt.Errorf("host %s: send the base: %w", p.host, err)
	}
	var nonce [6]byte
	rand.Read(nonce[:])
	s.claimID = run + "." + hex.EncodeToString(nonce[:])
	if err := s.openEvents(ctx); err != nil {
		return nil, err
	}
	claim := wire.Start{Claim: s.claimID, Session: envValue(spec.Env, provider.SessionEnv), Worker: spec.Agent, Provider: p.prov,
		Model: spec.Model, ResumeID: spec.ResumeID, Instructions: spec.Instructions, Env: markers(spec.Env),
		Repo: repo, Base: base, BaseKey: sent.Key, Branch: branch, Acked: base}
	data, err := json.Marshal(claim)
	if err != nil {
		return nil, err
	}
	ack, err := l.js.Publish(ctx, wire.WorkSubject(p.host), data, jetstream.WithMsgID(s.claimID))
	if err != nil {
		s.dropEvents()
		return nil, fmt.Errorf("host %s: put the claim in its work queue: %w", p.host, err)
	}
	s.claim = ack.Sequence
	p.f.log.Debug("remote worker: claimed", "host", p.host, "run", run, "baseSent", sent.Size, "full", sent.Full)
	if len(spec.MCP) > 0 {
		h.Event(provider.Note{Text: "the fleet's MCP tools are not offered to a worker on a host"})
	}
	if !p.f.goLoop(s.loop) {
		s.abort(errors.New("the fleet is shutting down"))
		return nil, s.Err()
	}
	select {
	case <-s.ready:
		return s, nil
	case <-s.done:
		s.abort(s.Err())
		return nil, s.Err()
	case <-ctx.Done():
		err := fmt.Errorf("host %s did not start the worker: %w", p.host, context.Cause(ctx))
		if s.takeBack() {
			err = fmt.Errorf("%w: %w", err, ErrNotStarted)
		} else {
			s.stop()
		}
		s.abort(err)
		return nil, err
	}
}

// abort ends a session that Start gives up on.
func (s *session) abort(err error) {
	s.end(err)
	s.closeOnce.Do(func() {
		s.cancel()
		s.wg.Wait()
		if s.loopStarted.Load() {
			<-s.loopDone
		}
		s.dropEvents()
	})
}

// session is one worker on a host.
type session struct {
	p       *hostProvider
	l       *link
	h       provider.Host
	run     string
	mirror  string // the worker's work tree here
	branch  string
	base    string // the commit the host started this session from
	claimID string // wire.Start.Claim: its batches carry it
	adopted bool   // taken up by Adopt: the first batch seen sets where the numbering is
	claim   uint64 // the claim's sequence in the work queue
	cons    jetstream.Consumer

	ctx    context.Context // ends with the session: its answers and fetches stop
	cancel context.CancelFunc
	wg     sync.WaitGroup // the answers
	// loopDone is closed when the loop (owned by the Fleet: it outlives a
	// session given up as lost, to take its late work) has returned.
	loopDone chan struct{}
	// late: the host was lost and the session ended; the loop goes on to
	// stop the worker when the host is back and to take its late work.
	late        atomic.Bool
	loopStarted atomic.Bool
	stopped     bool // late: the host said it stops the run; the loop's own

	ready     chan struct{}
	readyOnce sync.Once
	done      chan struct{}
	doneOnce  sync.Once
	closeOnce sync.Once

	mu       sync.Mutex
	err      error
	resumeID string
	last     uint64          // the last event sequence handled
	answers  map[string]bool // requests answered or being answered
}

// Keys of the run's consumer metadata.
const (
	metaClaim  = "fleet-claim"
	metaBase   = "fleet-base"
	metaBranch = "fleet-branch"
)

// Adopt takes up a worker that was running on the host when the fleet
// stopped: its event consumer still holds what the fleet had not yet
// taken (the host kept sending while the fleet was down), so nothing is
// lost. It waits, within the lease, for the host to be back, and asks it
// whether it still has the run.
func (p *hostProvider) Adopt(ctx context.Context, spec provider.Spec, h provider.Host) (provider.Session, error) {
	run, err := wire.RunKey(envValue(spec.Env, provider.SessionEnv), spec.Agent)
	if err != nil {
		return nil, err
	}
	l, err := p.f.link(ctx, p.host)
	if err != nil {
		return nil, err
	}
	stream, err := l.js.Stream(ctx, wire.EventStream)
	if err != nil {
		return nil, fmt.Errorf("host %s: its event stream: %w", p.host, err)
	}
	cons, err := stream.Consumer(ctx, consumerName(run))
	if err != nil {
		return nil, fmt.Errorf("host %s: no events of %s to take up: %w", p.host, run, err)
	}
	md := cons.CachedInfo().Config.Metadata
	s := &session{p: p, l: l, h: h, run: run, mirror: spec.Dir, branch: md[metaBranch], base: md[metaBase], claimID: md[metaClaim],
		cons: cons, adopted: true, ready: make(chan struct{}), done: make(chan struct{}), loopDone: make(chan struct{}), answers: map[string]bool{}}
	if s.claimID == "" || s.base == "" || s.branch == "" {
		return nil, fmt.Errorf("host %s: the events of %s do not say which claim they are", p.host, run)
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	// The hub has just started: the host is back once it heartbeats.
	wait := time.NewTimer(p.f.cfg.Lease)
	defer wait.Stop()
	for up := false; !up; {
		st, ok := p.f.status(p.host)
		up = ok && st.State == hosts.StateUp
		if !up {
			select {
			case <-ctx.Done():
				s.cancel()
				return nil, context.Cause(ctx)
			case <-wait.C:
				s.cancel()
				return nil, fmt.Errorf("host %s did not come back within the lease (%s)", p.host, p.f.cfg.Lease)
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	tip, err := gitOut(ctx, s.mirror, "rev-parse", "--verify", "HEAD^{commit}")
	if err != nil {
		s.cancel()
		return nil, err
	}
	if err := s.control(ctx, wire.Control{Op: wire.OpFetched, Commit: tip}); err != nil {
		s.cancel()
		if errors.Is(err, provider.ErrClosed) {
			return nil, fmt.Errorf("host %s no longer has %s (it restarted)", p.host, run)
		}
		return nil, err
	}
	close(s.ready)
	if !p.f.goLoop(s.loop) {
		s.abort(errors.New("the fleet is shutting down"))
		return nil, s.Err()
	}
	h.Event(provider.Note{Text: fmt.Sprintf("Took %s up again on host %s after the fleet restarted; what it did meanwhile follows.", spec.Agent, p.host)})
	return s, nil
}

// consumerName is the durable name of run's event consumer.
func consumerName(run string) string { return "fleet-" + run }

// openEvents makes the run's event consumer, with nothing of an earlier
// session of the same worker left in it.
func (s *session) openEvents(ctx context.Context) error {
	stream, err := s.l.js.Stream(ctx, wire.EventStream)
	if err != nil {
		return fmt.Errorf("host %s: its event stream: %w", s.p.host, err)
	}
	subj := wire.EventSubject(s.p.host, s.run)
	if err := stream.DeleteConsumer(ctx, consumerName(s.run)); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return fmt.Errorf("host %s: drop the old event consumer: %w", s.p.host, err)
	}
	if err := stream.Purge(ctx, jetstream.WithPurgeSubject(subj)); err != nil {
		return fmt.Errorf("host %s: purge old events: %w", s.p.host, err)
	}
	s.cons, err = stream.CreateConsumer(ctx, jetstream.ConsumerConfig{
		Durable: consumerName(s.run), FilterSubject: subj,
		AckPolicy: jetstream.AckExplicitPolicy, DeliverPolicy: jetstream.DeliverAllPolicy,
		AckWait: 5 * time.Minute, MaxAckPending: 4 * fetchBatch,
		// What a fleet started again needs to take the run up (Adopt).
		Metadata: map[string]string{metaClaim: s.claimID, metaBase: s.base, metaBranch: s.branch},
	})
	if err != nil {
		return fmt.Errorf("host %s: open the event consumer: %w", s.p.host, err)
	}
	return nil
}

// dropEvents deletes the run's consumer and its events: the run is over
// and all of it was handled.
func (s *session) dropEvents() {
	ctx, cancel := context.WithTimeout(context.Background(), controlTimeout)
	defer cancel()
	stream, err := s.l.js.Stream(ctx, wire.EventStream)
	if err != nil {
		return
	}
	_ = stream.DeleteConsumer(ctx, consumerName(s.run))
	_ = stream.Purge(ctx, jetstream.WithPurgeSubject(wire.EventSubject(s.p.host, s.run)))
}

// takeBack removes the claim from the host's work queue if the host has
// not taken it, and reports whether it did.
func (s *session) takeBack() bool {
	ctx, cancel := context.WithTimeout(context.Background(), controlTimeout)
	defer cancel()
	stream, err := s.l.js.Stream(ctx, wire.WorkStream)
	if err != nil {
		return false
	}
	return stream.DeleteMsg(ctx, s.claim) == nil
}

// loop pulls the run's events and hands them to the engine, in order,
// until the session ends; between pulls it looks at the host's state. When
// the host is lost the session ends, and the loop goes on late: it stops
// the worker once the host is back and takes what the worker did
// meanwhile, marked late, until the host says the run ended.
func (s *session) loop(fleet context.Context) {
	s.loopStarted.Store(true)
	defer close(s.loopDone)
	for {
		ctx := s.ctx
		if s.late.Load() {
			ctx = fleet
			if !s.lateStep(ctx) {
				s.dropEvents()
				return
			}
		} else {
			select {
			case <-s.done:
				return
			case <-fleet.Done():
				s.end(errors.New("the fleet is shutting down"))
				return
			default:
			}
			if err := s.hostGone(); err != nil {
				if _, ok := s.p.f.status(s.p.host); ok && !errors.Is(err, ErrNotStarted) {
					s.late.Store(true) // before end: Close must not wait for a late loop
				}
				s.end(err)
				continue
			}
		}
		batch, err := s.cons.Fetch(fetchBatch, jetstream.FetchMaxWait(fetchWait))
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			s.p.f.log.Warn("remote worker: pull events", "host", s.p.host, "run", s.run, "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(fetchWait):
			}
			continue
		}
		for m := range batch.Messages() {
			err := s.handle(m.Data())
			if errors.Is(err, errLateEnded) {
				_ = m.Ack()
				s.dropEvents()
				return
			}
			if err != nil {
				_ = m.Term()
				s.stop()
				if s.late.Load() {
					s.p.f.log.Warn("remote worker: late events refused", "host", s.p.host, "run", s.run, "err", err)
					s.dropEvents()
					return
				}
				s.end(err)
				return
			}
			s.ack(m)
		}
	}
}

// ack acknowledges a batch handled and waits, briefly, for the stream to
// have it: a fleet killed right after still finds it taken when it starts
// again (Adopt), so its events are not handed on twice.
func (s *session) ack(m jetstream.Msg) {
	ctx, cancel := context.WithTimeout(context.Background(), controlTimeout)
	defer cancel()
	if err := m.DoubleAck(ctx); err != nil {
		s.p.f.log.Debug("remote worker: ack", "host", s.p.host, "run", s.run, "err", err)
	}
}

// lateStep is the late loop's look at the host before each pull: it asks
// the host, once back, to stop the run; false ends the loop (the fleet is
// closing, the host was removed, or it no longer has the run).
func (s *session) lateStep(ctx context.Context) bool {
	if ctx.Err() != nil {
		return false
	}
	st, ok := s.p.f.status(s.p.host)
	if !ok {
		return false
	}
	if s.stopped || st.State == hosts.StateLost {
		return true
	}
	var r wire.Reply
	if err := s.request(ctx, wire.ControlSubject(s.p.host, s.run), wire.Control{Op: wire.OpStop}, &r); err != nil {
		return true // not reachable yet
	}
	s.stopped = true
	s.h.Event(provider.Note{Text: fmt.Sprintf("Host %s is back; it stops %s, which the fleet gave up. What it did meanwhile follows, marked late.", s.p.host, s.run)})
	return !r.Gone
}

// hostGone says why the run cannot go on when its host is lost or
// removed; a claim the host never took is taken back first.
func (s *session) hostGone() error {
	st, ok := s.p.f.status(s.p.host)
	if ok && st.State != hosts.StateLost {
		return nil
	}
	why := fmt.Sprintf("host %s was removed (fleet hosts remove)", s.p.host)
	if ok {
		why = fmt.Sprintf("host %s lost: not heard from for %s (hosts.leaseMs)", s.p.host, s.p.f.cfg.Lease)
	}
	select {
	case <-s.ready:
	default:
		if s.takeBack() {
			return fmt.Errorf("%s: %w", why, ErrNotStarted)
		}
	}
	return errors.New(why)
}

// handle applies one event batch from the host. An error is the host's
// fault (a batch that does not decode, a bundle refused) and ends the run.
func (s *session) handle(data []byte) error {
	b, err := wire.DecodeBatch(data)
	if err != nil {
		return fmt.Errorf("host %s sent what the fleet cannot take for %s: %w", s.p.host, s.run, err)
	}
	if b.Claim != s.claimID {
		// An earlier claim's (late) batch: that session is over here.
		s.p.f.log.Debug("remote worker: a batch of an earlier claim", "host", s.p.host, "run", s.run, "claim", b.Claim)
		return nil
	}
	for i, ev := range b.Events {
		seq := b.Seq + uint64(i)
		s.mu.Lock()
		if s.adopted && s.last == 0 {
			s.last = seq - 1 // what came before, the fleet took before it stopped
		}
		seen := seq <= s.last
		if !seen {
			if seq != s.last+1 {
				s.mu.Unlock()
				return fmt.Errorf("host %s skipped events of %s: got %d after %d", s.p.host, s.run, seq, s.last)
			}
			s.last = seq
		}
		s.mu.Unlock()
		if seen {
			continue
		}
		if err := s.apply(ev); err != nil {
			return err
		}
	}
	return nil
}

// apply hands one event to the engine.
func (s *session) apply(ev wire.Event) error {
	if s.late.Load() {
		return s.applyLate(ev)
	}
	if pe, ok := ev.Provider(); ok {
		if ss, ok := pe.(provider.SessionStarted); ok && ss.ID != "" {
			s.mu.Lock()
			s.resumeID = ss.ID
			s.mu.Unlock()
		}
		s.h.Event(pe)
		return nil
	}
	switch ev.Kind {
	case wire.KindReady:
		s.mu.Lock()
		if ev.ID != "" {
			s.resumeID = ev.ID
		}
		s.mu.Unlock()
		s.readyOnce.Do(func() { close(s.ready) })
	case wire.KindPermission, wire.KindAsk, wire.KindConfirm:
		s.mu.Lock()
		dup := s.answers[ev.ID]
		s.answers[ev.ID] = true
		s.mu.Unlock()
		if !dup {
			s.wg.Add(1)
			go func() { defer s.wg.Done(); s.answer(ev) }()
		}
	case wire.KindBranch:
		return s.fetch(ev)
	case wire.KindEnded:
		var err error
		if ev.Err != "" {
			err = fmt.Errorf("on host %s: %s", s.p.host, ev.Err)
		}
		s.end(err)
	}
	return nil
}

// lateNote prefixes what a worker given up as lost did after that.
const lateNote = "late from host "

// applyLate hands the engine what the worker did after the fleet gave it
// up: its output and words, each marked late; its work goes to a branch of
// its own (<branch>-late), so that nothing moves the worker's branch or
// its work tree under a retry.
func (s *session) applyLate(ev wire.Event) error {
	late := lateNote + s.p.host + ": "
	switch ev.Kind {
	case wire.KindOutput:
		lines := make([]string, len(ev.Lines))
		for i, l := range ev.Lines {
			lines[i] = late + l
		}
		s.h.Event(provider.Output{Stream: ev.Stream, Lines: lines})
	case wire.KindText, wire.KindNote:
		s.h.Event(provider.Note{Text: late + ev.Text})
	case wire.KindTurnEnded:
		s.h.Event(provider.Note{Text: late + "the turn ended" + errSuffix(ev.Err)})
	case wire.KindBranch:
		ctx, cancel := context.WithTimeout(context.WithoutCancel(s.ctx), 5*time.Minute)
		defer cancel()
		as := s.branch + "-late"
		tip, err := gitmove.FetchBranchAs(ctx, s.l.store, ev.Key, s.mirror, s.branch, as, s.base, s.p.f.cfg.Limits)
		if err != nil {
			return fmt.Errorf("late work of %s: %w", s.run, err)
		}
		s.h.Event(provider.Note{Text: fmt.Sprintf("%sits last work is on branch %s at %s (git log %s)", late, as, tip[:min(12, len(tip))], as)})
	case wire.KindEnded:
		s.h.Event(provider.Note{Text: late + s.run + " ended on the host" + errSuffix(ev.Err)})
		s.stopped = true
		return errLateEnded
	}
	return nil
}

// errLateEnded ends the late loop: the host says the run is over.
var errLateEnded = errors.New("the late run ended")

func errSuffix(err string) string {
	if err == "" {
		return ""
	}
	return ": " + err
}

// fetch takes the branch the host sent into the user's repository and
// the worker's mirror, and tells the host.
func (s *session) fetch(ev wire.Event) error {
	ctx, cancel := context.WithTimeout(s.ctx, 5*time.Minute)
	defer cancel()
	tip, err := gitmove.FetchBranchMirror(ctx, s.l.store, ev.Key, s.mirror, s.branch, s.base, s.p.f.cfg.Limits)
	if err != nil {
		if errors.Is(err, gitmove.ErrBadBundle) || errors.Is(err, gitmove.ErrBadKey) || errors.Is(err, gitmove.ErrTooLarge) {
			return fmt.Errorf("host %s sent a branch the fleet refuses: %w", s.p.host, err)
		}
		s.h.Event(provider.Note{Text: fmt.Sprintf("could not take %s's branch from host %s: %v", s.run, s.p.host, err)})
		return nil
	}
	var r wire.Reply
	_ = s.request(ctx, wire.ControlSubject(s.p.host, s.run), wire.Control{Op: wire.OpFetched, Commit: tip}, &r)
	return nil
}

// answer asks the operator what the host's worker asked and sends the
// answer back.
func (s *session) answer(ev wire.Event) {
	var a wire.Answer
	var err error
	switch ev.Kind {
	case wire.KindPermission:
		var d provider.Decision
		d, err = s.h.Permission(s.ctx, *ev.Permission)
		a.Decision = &d
	case wire.KindAsk:
		a.Text, err = s.h.Ask(s.ctx, *ev.Question)
	case wire.KindConfirm:
		a.Yes, err = s.h.Confirm(s.ctx, ev.Text)
	}
	if err != nil {
		a = wire.Answer{Err: err.Error()}
	}
	var r wire.Reply
	c := wire.Control{Op: wire.OpAnswer, ID: ev.ID, Answer: &a}
	for range 3 {
		if err := s.request(s.ctx, wire.ControlSubject(s.p.host, s.run), c, &r); err == nil || s.ctx.Err() != nil {
			return
		}
	}
}

// stop tells the host to stop the run (best effort: it may be away).
func (s *session) stop() {
	var r wire.Reply
	_ = s.request(context.Background(), wire.ControlSubject(s.p.host, s.run), wire.Control{Op: wire.OpStop}, &r)
}

// end ends the session with err (nil: ended by close).
func (s *session) end(err error) {
	s.doneOnce.Do(func() {
		s.mu.Lock()
		s.err = err
		s.mu.Unlock()
		close(s.done)
	})
}

// request sends a request to the host and decodes its reply into out.
func (s *session) request(ctx context.Context, subject string, req, out any) error {
	data, err := json.Marshal(req)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, controlTimeout)
	defer cancel()
	m, err := s.l.nc.RequestWithContext(ctx, subject, data)
	// A host whose link is being made again (the hub relinks hosts when
	// its accounts change) has no responder for a moment: try again,
	// within the bound.
	for errors.Is(err, nats.ErrNoResponders) {
		select {
		case <-ctx.Done():
			return err
		case <-time.After(250 * time.Millisecond):
		}
		m, err = s.l.nc.RequestWithContext(ctx, subject, data)
	}
	if err != nil {
		return err
	}
	if len(m.Data) > wire.MaxMessage {
		return fmt.Errorf("a reply of %d bytes", len(m.Data))
	}
	return json.Unmarshal(m.Data, out)
}

// control sends op to the run and turns the reply into an error.
func (s *session) control(ctx context.Context, c wire.Control) error {
	var r wire.Reply
	if err := s.request(ctx, wire.ControlSubject(s.p.host, s.run), c, &r); err != nil {
		return fmt.Errorf("host %s: %s: %w", s.p.host, c.Op, err)
	}
	switch {
	case r.Busy:
		return provider.ErrBusy
	case r.Gone:
		return provider.ErrClosed
	case r.Err != "":
		return fmt.Errorf("host %s: %s: %s", s.p.host, c.Op, r.Err)
	}
	return nil
}

func (s *session) Send(ctx context.Context, t provider.Turn) error {
	select {
	case <-s.done:
		return provider.ErrClosed
	default:
	}
	return s.control(ctx, wire.Control{Op: wire.OpSend, Text: t.Text})
}

func (s *session) Interrupt(ctx context.Context) error {
	select {
	case <-s.done:
		return nil
	default:
	}
	return s.control(ctx, wire.Control{Op: wire.OpInterrupt})
}

func (s *session) ResumeID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.resumeID
}

func (s *session) Done() <-chan struct{} { return s.done }

func (s *session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Close asks the host to end the run (it commits and sends the last
// branch first) and waits, bounded, for it to say so; then the run's
// consumer and events go.
func (s *session) Close() error {
	s.closeOnce.Do(func() {
		select {
		case <-s.done:
		default:
			ctx, cancel := context.WithTimeout(context.Background(), controlTimeout)
			err := s.control(ctx, wire.Control{Op: wire.OpClose})
			cancel()
			if errors.Is(err, provider.ErrClosed) {
				s.end(nil)
			}
			select {
			case <-s.done:
			case <-time.After(closeWait):
				s.end(fmt.Errorf("host %s did not end the worker within %s", s.p.host, closeWait))
			}
		}
		s.cancel()
		s.wg.Wait()
		if s.late.Load() {
			return // the late loop drops the events when it is done
		}
		<-s.loopDone
		s.dropEvents()
	})
	return nil
}

// envValue is name's value in env.
func envValue(env []string, name string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], name+"="); ok {
			return v
		}
	}
	return ""
}

// markers are the fleet's AGENTS_FLEET_* entries of env: all of the
// fleet's environment that goes to a host.
func markers(env []string) []string {
	var out []string
	for _, kv := range env {
		if strings.HasPrefix(kv, "AGENTS_FLEET_") && len(out) < wire.MaxEnv {
			out = append(out, kv)
		}
	}
	return out
}

// gitOut runs git in dir and returns its trimmed output.
func gitOut(ctx context.Context, dir string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}
