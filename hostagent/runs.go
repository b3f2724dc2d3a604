package hostagent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agents-fleet/fleet/hosts/wire"
)

// Bounds of taking claims and of a clean stop.
const (
	// claimAckWait is how long a claim the host fetched but did not
	// acknowledge stays with it before the stream gives it out again.
	claimAckWait = 30 * time.Second
	// claimWait bounds one wait for a claim. The wait is a pull request
	// held at the hub, so a claim comes at once; a long one keeps an idle
	// host quiet (one request, and a heartbeat every claimHeartbeat, not a
	// request every few seconds). Stopping cancels it.
	claimWait = 30 * time.Second
	// claimHeartbeat is how often the hub says a claim wait is still
	// there: a wait lost with the link is given up after two missed.
	claimHeartbeat = 12 * time.Second
	// claimLook is how often a host without a free slot looks again (a run
	// that ends wakes it sooner).
	claimLook = time.Second
	// ackTimeout bounds taking a claim (its AckSync) and other single
	// JetStream requests.
	ackTimeout = 10 * time.Second
	// claimRetry is when a claim of a run this host still has comes back.
	claimRetry = time.Second

	// closeRunsBound bounds, on Close, the end of every run: sessions
	// closed, work committed and sent, "ended" queued.
	closeRunsBound = 30 * time.Second
	// flushBound bounds, on Close, the wait for the outboxes to be sent,
	// while the link is up.
	flushBound = 10 * time.Second
	// abortBound bounds the wait for what is left once Close stops waiting.
	abortBound = 10 * time.Second
)

// startRuns opens what runs workers, subscribes to the fleet's requests
// and starts taking claims.
func (a *Agent) startRuns() error {
	var err error
	if a.js, err = jetstream.New(a.nc); err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	name := a.cfg.Join.Name
	if _, err := a.nc.Subscribe(wire.ControlSubjects(name), a.onControl); err != nil {
		return fmt.Errorf("subscribe to control requests: %w", err)
	}
	if _, err := a.nc.Subscribe(wire.HaveSubject(name), a.onHave); err != nil {
		return fmt.Errorf("subscribe to have requests: %w", err)
	}
	var ctx context.Context
	ctx, a.stopClaims = context.WithCancel(context.Background())
	go func() { defer close(a.claimsDone); a.claimLoop(ctx) }()
	return nil
}

// claimLoop takes claims from WORK while the host has a free slot and is
// not drained, until ctx ends. While WORK or the link is not there (the
// fleet has placed nothing here yet), it tries again quietly.
func (a *Agent) claimLoop(ctx context.Context) {
	var cons jetstream.Consumer
	pause := retryMin
	backoff := func(what string, err error) {
		a.log.Debug(what+"; trying again", "err", err)
		a.waitClaim(ctx, pause)
		pause = min(2*pause, retryMax)
	}
	for ctx.Err() == nil {
		if !a.canClaim() {
			a.claimPasses.Add(1)
			a.waitClaim(ctx, claimLook)
			continue
		}
		if cons == nil {
			var err error
			if cons, err = a.workConsumer(ctx); err != nil {
				backoff("no work queue yet", err)
				continue
			}
		}
		msg, err := fetchClaim(ctx, cons)
		if err != nil {
			if errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrConsumerNotFound) {
				cons = nil
			}
			backoff("fetching a claim failed", err)
			continue
		}
		pause = retryMin
		if msg != nil {
			a.claim(ctx, msg)
		}
	}
}

// waitClaim waits d, or until a run ends or draining changes, or ctx ends.
func (a *Agent) waitClaim(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-a.wake:
	case <-t.C:
	}
}

// wakeClaims tells the claim loop to look again.
func (a *Agent) wakeClaims() {
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// canClaim reports whether the host takes a claim now: it has a free
// slot and the fleet does not drain it.
func (a *Agent) canClaim() bool {
	return !a.draining.Load() && int(a.running.Load()) < a.cfg.Slots
}

// workConsumer is the host's durable consumer of WORK, made when missing.
func (a *Agent) workConsumer(ctx context.Context) (jetstream.Consumer, error) {
	ctx, cancel := context.WithTimeout(ctx, ackTimeout)
	defer cancel()
	return a.js.CreateOrUpdateConsumer(ctx, wire.WorkStream, jetstream.ConsumerConfig{
		Durable:       wire.WorkConsumer,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       claimAckWait,
		MaxAckPending: maxAckPending,
	})
}

// maxAckPending: the host fetches one claim at a time, so more than one
// unacknowledged claim is one given up (a fetch whose answer was lost).
const maxAckPending = 16

// fetchClaim waits up to claimWait for one claim; nil when none came.
func fetchClaim(ctx context.Context, cons jetstream.Consumer) (jetstream.Msg, error) {
	ctx, cancel := context.WithTimeout(ctx, claimWait)
	defer cancel()
	batch, err := cons.Fetch(1, jetstream.FetchContext(ctx), jetstream.FetchHeartbeat(claimHeartbeat))
	if err != nil {
		return nil, err
	}
	var msg jetstream.Msg
	for m := range batch.Messages() {
		msg = m
	}
	if err := batch.Error(); msg == nil && err != nil && ctx.Err() == nil {
		return nil, err
	}
	return msg, nil
}

// claim takes the claim msg and starts its run; a claim that does not
// decode is dropped, one of a run the host still has comes back later.
func (a *Agent) claim(ctx context.Context, msg jetstream.Msg) {
	s, err := wire.DecodeStart(msg.Data())
	if err != nil {
		a.log.Warn("a claim that does not decode; dropped", "err", err)
		if err := msg.Term(); err != nil {
			a.log.Debug("dropping the claim", "err", err)
		}
		return
	}
	key, _ := s.Run() // checked by DecodeStart
	if !a.canClaim() {
		_ = msg.Nak() // drained meanwhile: another time
		return
	}
	if old := a.lookup(key); old != nil {
		// The fleet claims a run again that this host still has: it gave
		// the old one up. That one ends first, so that its events are all
		// in the stream before the new one's.
		old.requestEnd("stopped: the fleet claimed this worker again", true)
		_ = msg.NakWithDelay(claimRetry)
		return
	}
	actx, cancel := context.WithTimeout(ctx, ackTimeout)
	err = msg.DoubleAck(actx)
	cancel()
	if err != nil {
		// The claim went back to the fleet (or the link did): not ours.
		a.log.Info("a claim could not be taken; left to the fleet", "run", key, "err", err)
		return
	}
	r := newRun(a, key, s)
	a.runsMu.Lock()
	a.runs[key] = r
	a.runsMu.Unlock()
	a.running.Add(1)
	a.outWG.Go(func() {
		r.out.send()
		a.forget(r)
	})
	a.runWG.Go(r.live)
}

// lookup is the run key: live, or ended with events still to send.
func (a *Agent) lookup(key string) *run {
	a.runsMu.Lock()
	defer a.runsMu.Unlock()
	return a.runs[key]
}

// runEnded notes that a run's session is gone: its slot is free.
func (a *Agent) runEnded() {
	a.running.Add(-1)
	a.wakeClaims()
}

// forget drops r, whose last event is sent.
func (a *Agent) forget(r *run) {
	a.runsMu.Lock()
	if a.runs[r.key] == r {
		delete(a.runs, r.key)
	}
	a.runsMu.Unlock()
	a.wakeClaims()
}

// all is every run the host has.
func (a *Agent) all() []*run {
	a.runsMu.Lock()
	defer a.runsMu.Unlock()
	out := make([]*run, 0, len(a.runs))
	for _, r := range a.runs {
		out = append(out, r)
	}
	return out
}

// bucket is the host's object store bucket, bound on first use.
func (a *Agent) bucket(ctx context.Context) (jetstream.ObjectStore, error) {
	a.storeMu.Lock()
	defer a.storeMu.Unlock()
	if a.store != nil {
		return a.store, nil
	}
	ctx, cancel := context.WithTimeout(ctx, ackTimeout)
	defer cancel()
	store, err := a.js.ObjectStore(ctx, wire.Bucket(a.cfg.Join.Name))
	if err != nil {
		return nil, fmt.Errorf("the host's bucket %s: %w", wire.Bucket(a.cfg.Join.Name), err)
	}
	a.store = store
	return store, nil
}

// stopRuns is Close's part for workers: no more claims, every run ended
// (its session closed, its work sent, "ended" said), the outboxes sent
// while the link is up, each step bounded; then whatever is left is
// stopped.
func (a *Agent) stopRuns() {
	if a.stopClaims == nil {
		return // Start failed before the runs started
	}
	a.stopClaims()
	<-a.claimsDone // bounded by claimWait and ackTimeout
	for _, r := range a.all() {
		r.requestEnd(fmt.Sprintf("host %s stopped", a.cfg.Join.Name), false)
	}
	if !waitFor(&a.runWG, closeRunsBound) {
		a.log.Warn("workers still ending after the bound; stopping them", "bound", closeRunsBound)
	}
	a.flush(flushBound)
	a.abortRuns()
	for _, r := range a.all() {
		r.out.abort()
	}
	if !waitFor(&a.runWG, abortBound) || !waitFor(&a.outWG, abortBound) {
		a.log.Error("workers did not stop; leaving them", "bound", abortBound)
	}
}

// linkUp reports whether the leaf node has its link to the hub.
func (a *Agent) linkUp() bool { return a.srv.NumLeafNodes() > 0 }

// flush waits up to bound for every outbox to be sent, while the link is
// up.
func (a *Agent) flush(bound time.Duration) {
	deadline := time.Now().Add(bound)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		left := 0
		for _, r := range a.all() {
			left += r.out.queued()
		}
		if left == 0 {
			return
		}
		if !a.linkUp() || time.Now().After(deadline) {
			a.log.Warn("events of workers not sent to the fleet", "events", left)
			return
		}
		<-tick.C
	}
}

// waitFor waits up to d for wg; false when it did not finish in time (the
// waiting goroutine then ends with wg).
func waitFor(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}
