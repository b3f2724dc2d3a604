package remote

// The run's events: pulled in order, handed to the engine, late ones
// marked.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agents-fleet/fleet/hosts"
	"github.com/agents-fleet/fleet/hosts/gitmove"
	"github.com/agents-fleet/fleet/hosts/wire"
	"github.com/agents-fleet/fleet/provider"
)

// loop pulls the run's events and hands them to the engine, in order,
// until the session ends; at least every fetchWait it looks at the host's
// state. When the host is lost the session ends, and the loop goes on
// late: it stops the worker once the host is back and takes what the
// worker did meanwhile, marked late, until the host says the run ended.
//
// The events come through one pull iterator for the loop's life: it keeps
// a pull request waiting at the hub (renewed every pullExpiry), so a
// quiet worker costs the fleet a timer a second, not a pull a second.
func (s *session) loop(fleet context.Context) {
	s.loopStarted.Store(true)
	defer close(s.loopDone)
	var it jetstream.MessagesContext
	first := true // the iterator given up, if any, may have held batches: rewind
	defer func() {
		if it != nil {
			it.Stop()
		}
	}()
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
		if it == nil {
			var err error
			it, err = s.pull(ctx, first)
			first = false
			if errors.Is(err, errNotOwner) {
				return
			}
			if err != nil {
				it = nil
				if !s.pullFailed(ctx, err) {
					return
				}
				continue
			}
		}
		// Up to a batch's worth of what has come, then back to the look.
		for range fetchBatch {
			m, err := it.Next(jetstream.NextMaxWait(fetchWait))
			if errors.Is(err, nats.ErrTimeout) {
				break
			}
			if err != nil {
				it.Stop()
				it = nil
				if !s.pullFailed(ctx, err) {
					return
				}
				break
			}
			err = s.handle(m.Data())
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

// errNotOwner: a newer session of the run owns its consumer.
var errNotOwner = errors.New("a newer session of the run has its events")

// pull makes the loop's pull iterator; after the first, what an iterator
// given up had taken and not handed on comes back first (rewind). A
// heartbeat the hub missed is not an error: the iterator asks again.
func (s *session) pull(ctx context.Context, first bool) (jetstream.MessagesContext, error) {
	if !first {
		sl := s.p.f.slot(s.p.host, s.run)
		sl.mu.Lock()
		defer sl.mu.Unlock()
		if sl.owner != s {
			return nil, errNotOwner // a /retry's session has the consumer now
		}
		tctx, cancel := context.WithTimeout(ctx, controlTimeout)
		stream, err := s.l.js.Stream(tctx, wire.EventStream)
		if err == nil {
			var cons jetstream.Consumer
			if cons, err = rewind(tctx, stream, s.cons); err == nil {
				s.cons = cons
			}
		}
		cancel()
		if err != nil {
			return nil, err
		}
	}
	return s.cons.Messages(jetstream.PullMaxMessages(fetchBatch), jetstream.PullExpiry(pullExpiry),
		jetstream.WithMessagesErrOnMissingHeartbeat(false))
}

// pullFailed logs a failed pull and waits before the next; false when ctx
// ended meanwhile (the loop returns).
func (s *session) pullFailed(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	s.p.f.log.Warn("remote worker: pull events", "host", s.p.host, "run", s.run, "err", err)
	select {
	case <-ctx.Done():
		return false
	case <-time.After(fetchWait):
		return true
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
	sl := s.p.f.slot(s.p.host, s.run)
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.owner != s {
		// A newer session of the run (/retry) has it: the host's run of
		// that name is the new one's, not to be stopped, and what this
		// one left on the stream went with the new one's start.
		return false
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
