package remote

// Starting a worker on a host, and taking one up again after the fleet
// restarted.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agents-fleet/fleet/hosts"
	"github.com/agents-fleet/fleet/hosts/gitmove"
	"github.com/agents-fleet/fleet/hosts/wire"
	"github.com/agents-fleet/fleet/provider"
)

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
	repo, err := p.f.repoID(ctx, mirror, base)
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
	claim := wire.Start{Claim: s.claimID, Session: envValue(spec.Env, provider.SessionEnv), Worker: spec.Agent, Provider: p.prov,
		Model: spec.Model, ResumeID: spec.ResumeID, Instructions: spec.Instructions, Env: markers(spec.Env),
		Repo: repo, Base: base, BaseKey: sent.Key, Branch: branch, Acked: base}
	if err := s.claimRun(ctx, claim); err != nil {
		return nil, err
	}
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
	// The hub has just started: the host is back once it heartbeats, and
	// by then the hub has its account's streams back from disk (they are
	// not looked at, let alone made, before).
	wait := time.NewTimer(p.f.cfg.Lease)
	defer wait.Stop()
	for up := false; !up; {
		st, ok := p.f.status(p.host)
		up = ok && st.State == hosts.StateUp
		if !up {
			select {
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			case <-wait.C:
				return nil, fmt.Errorf("host %s did not come back within the lease (%s)", p.host, p.f.cfg.Lease)
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	l, err := p.f.link(ctx, p.host)
	if err != nil {
		return nil, err
	}
	var cons jetstream.Consumer
	for try := 1; ; try++ {
		tctx, cancel := context.WithTimeout(ctx, linkTry)
		var stream jetstream.Stream
		if stream, err = l.js.Stream(tctx, wire.EventStream); err == nil {
			if cons, err = stream.Consumer(tctx, consumerName(run)); err == nil {
				cons, err = rewind(tctx, stream, cons)
			}
		}
		cancel()
		if err == nil || try == adoptTries || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
	if err != nil {
		return nil, fmt.Errorf("host %s: no events of %s to take up: %w", p.host, run, err)
	}
	md := cons.CachedInfo().Config.Metadata
	s := &session{p: p, l: l, h: h, run: run, mirror: spec.Dir, branch: md[metaBranch], base: md[metaBase], claimID: md[metaClaim],
		cons: cons, adopted: true, ready: make(chan struct{}), done: make(chan struct{}), loopDone: make(chan struct{}), answers: map[string]bool{}}
	if s.claimID == "" || s.base == "" || s.branch == "" {
		return nil, fmt.Errorf("host %s: the events of %s do not say which claim they are", p.host, run)
	}
	sl := p.f.slot(p.host, run)
	sl.mu.Lock()
	sl.owner = s
	sl.mu.Unlock()
	s.ctx, s.cancel = context.WithCancel(context.Background())
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

// adoptTries bounds the looks for a run's consumer while the hub takes its
// streams back from disk.
const adoptTries = 20

// claimRun makes s the run's current session, opens its event consumer
// and puts claim in the host's work queue.
func (s *session) claimRun(ctx context.Context, claim wire.Start) error {
	data, err := json.Marshal(claim)
	if err != nil {
		return err
	}
	sl := s.p.f.slot(s.p.host, s.run)
	sl.mu.Lock()
	defer sl.mu.Unlock()
	sl.owner = s
	if err := s.openEvents(ctx); err != nil {
		sl.owner = nil
		return err
	}
	ack, err := s.l.js.Publish(ctx, wire.WorkSubject(s.p.host), data, jetstream.WithMsgID(s.claimID))
	if err != nil {
		sl.owner = nil
		s.deleteEvents()
		return fmt.Errorf("host %s: put the claim in its work queue: %w", s.p.host, err)
	}
	s.claim = ack.Sequence
	return nil
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

// rewind makes cons hand out again, at once, the event batches it handed
// out that were never acknowledged: a fleet stopped (or a pull iterator
// given up) with batches taken but not yet handled would otherwise get
// them back only after AckWait, and take the later ones first. The stream
// keeps every event until the run's are dropped (limits retention), so
// the consumer is made again, with its configuration, from the first
// batch not acknowledged; the loop acknowledges in order, so that is the
// one after the ack floor.
func rewind(ctx context.Context, stream jetstream.Stream, cons jetstream.Consumer) (jetstream.Consumer, error) {
	info, err := cons.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("look at the event consumer: %w", err)
	}
	if info.NumAckPending == 0 {
		return cons, nil
	}
	cfg := info.Config
	cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
	cfg.OptStartSeq = info.AckFloor.Stream + 1
	if err := stream.DeleteConsumer(ctx, cfg.Durable); err != nil {
		return nil, fmt.Errorf("drop the event consumer to rewind it: %w", err)
	}
	cons, err = stream.CreateConsumer(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("make the event consumer again from %d: %w", cfg.OptStartSeq, err)
	}
	return cons, nil
}

// dropEvents deletes the run's consumer and its events, the run being over
// and all of it handled, unless a newer session of the run has them now.
func (s *session) dropEvents() {
	sl := s.p.f.slot(s.p.host, s.run)
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.owner != s {
		return
	}
	sl.owner = nil
	s.deleteEvents()
}

// deleteEvents deletes the run's consumer and its events on the host's
// stream; the caller holds the run's slot.
func (s *session) deleteEvents() {
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
