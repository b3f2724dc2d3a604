package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agents-fleet/fleet/engine"
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
	// fetchWait is how long the loop waits for the run's next event batch
	// before it looks at its host's state again.
	fetchWait = time.Second
	// fetchBatch is how many event batches the pull iterator asks for at a
	// time, and how many the loop hands on between looks at the host.
	fetchBatch = 32
	// pullExpiry is how long a pull request waits at the hub before the
	// iterator makes a new one.
	pullExpiry = 30 * time.Second
)

// ErrNotStarted is wrapped by Start's error when the host was lost before
// it took the claim: the claim was taken back, and nothing of the worker
// ran, so the engine puts the task back in the queue.
var ErrNotStarted = engine.ErrNotStarted

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
