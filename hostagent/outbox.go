package hostagent

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agents-fleet/fleet/hosts/wire"
)

// maxOutbox bounds the events a run holds that the EVENTS stream has not
// taken yet, in encoded bytes: past it, Host.Event blocks, and so the agent
// CLI's output waits (a link down for long stops the worker's output, not
// the host's memory). 8 MiB is far more than an agent prints in minutes;
// a shell printing as fast as it can waits on the link either way, and a
// larger queue only made the host's heap peak at 46 MB in a flood (28 MB
// now) without making the flood faster.
const maxOutbox = 8 << 20

// Retries of a batch the stream did not take: the first after
// retryMin, doubling up to retryMax, for as long as the run's outbox is
// not aborted. publishTimeout bounds each attempt.
const (
	retryMin       = 100 * time.Millisecond
	retryMax       = 2 * time.Second
	publishTimeout = 10 * time.Second
)

// batchEnvelope is what wire.EncodeBatch adds around the events, at most.
const batchEnvelope = 64

// publisher is what an outbox needs of JetStream (jetstream.JetStream
// has it).
type publisher interface {
	PublishMsg(ctx context.Context, m *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error)
}

// outbox sends one run's events to the EVENTS stream: in order, in
// batches numbered by their first event (events count from 1), one batch at
// a time, each retried as the same message (the same id, so the stream's
// duplicate window drops a second copy) until the stream acknowledges it.
// Its sender (send) runs on a goroutine the caller owns.
type outbox struct {
	pub     publisher
	subject string // wire.EventSubject of the run
	// claim names the batches and their message ids (wire.Start.Claim), so
	// that a later claim of the same run, numbering from 1 again, is not
	// taken for a copy of this one's batches.
	claim string
	max   int // bytes; maxOutbox but in tests
	log   *slog.Logger

	ctx    context.Context // ends at abort
	cancel context.CancelFunc
	wake   chan struct{} // cap 1: there is something to send
	done   chan struct{} // closed when send returns

	mu      sync.Mutex
	room    *sync.Cond // on mu: the queue shrank, or the outbox aborted
	queue   [][]byte   // encoded events not yet taken by the stream
	bytes   int        // their size
	next    uint64     // the number of queue[0]
	late    bool       // mark what is pushed from now on Late
	closed  bool       // no more events: send returns once the queue is empty
	blocked int        // pushes waiting for room
	dropped int        // events pushed after abort, never sent
}

func newOutbox(pub publisher, subject, claim string, log *slog.Logger) *outbox {
	o := &outbox{pub: pub, subject: subject, claim: claim, max: maxOutbox, log: log, next: 1,
		wake: make(chan struct{}, 1), done: make(chan struct{})}
	o.ctx, o.cancel = context.WithCancel(context.Background())
	o.room = sync.NewCond(&o.mu)
	return o
}

// push queues e, waiting while the outbox is full. After abort it drops e.
func (o *outbox) push(e wire.Event) {
	o.mu.Lock()
	e.Late = e.Late || o.late
	o.mu.Unlock()
	data := wire.EncodeEvent(e)
	o.mu.Lock()
	defer o.mu.Unlock()
	// An event larger than the bound still goes once the queue is empty.
	for o.bytes > 0 && o.bytes+len(data) > o.max && o.ctx.Err() == nil {
		o.blocked++
		o.room.Wait()
		o.blocked--
	}
	if o.ctx.Err() != nil || o.closed {
		o.dropped++
		return
	}
	o.queue = append(o.queue, data)
	o.bytes += len(data)
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// setLate marks every event pushed from now on Late.
func (o *outbox) setLate() {
	o.mu.Lock()
	o.late = true
	o.mu.Unlock()
}

// close says no more events come: send returns once every queued one is
// taken. Later pushes are dropped.
func (o *outbox) close() {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// abort stops the sender at once, whatever it still holds, and unblocks
// and drops every push.
func (o *outbox) abort() {
	o.mu.Lock()
	o.cancel()
	o.room.Broadcast()
	o.mu.Unlock()
}

// queued is how many events wait to be taken.
func (o *outbox) queued() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.queue)
}

// send publishes the queue's batches until the outbox is closed and empty,
// or aborted.
func (o *outbox) send() {
	defer close(o.done)
	for {
		seq, batch, size, ok := o.nextBatch()
		if !ok {
			return
		}
		if !o.publish(seq, batch) {
			return
		}
		o.mu.Lock()
		// The stream has them: let them go. The slice's array would keep
		// every event sent since it was allocated.
		clear(o.queue[:len(batch)])
		o.queue = o.queue[len(batch):]
		if len(o.queue) == 0 {
			o.queue = nil
		}
		o.bytes -= size
		o.next += uint64(len(batch))
		o.room.Broadcast()
		o.mu.Unlock()
	}
}

// nextBatch waits for events and returns the first batch of the queue:
// at least one event, then as many as fit wire.MaxBatch and
// wire.MaxBatchEvents. ok is false when the sender is to stop.
func (o *outbox) nextBatch() (seq uint64, batch [][]byte, size int, ok bool) {
	for {
		o.mu.Lock()
		switch {
		case o.ctx.Err() != nil:
			o.mu.Unlock()
			return 0, nil, 0, false
		case len(o.queue) > 0:
			n := 0
			for n < len(o.queue) && n < wire.MaxBatchEvents {
				// Each event after the first costs a comma too.
				if n > 0 && batchEnvelope+size+n+len(o.queue[n]) > wire.MaxBatch {
					break
				}
				size += len(o.queue[n])
				n++
			}
			batch, seq = o.queue[:n:n], o.next
			o.mu.Unlock()
			return seq, batch, size, true
		case o.closed:
			o.mu.Unlock()
			return 0, nil, 0, false
		}
		o.mu.Unlock()
		select {
		case <-o.wake:
		case <-o.ctx.Done():
		}
	}
}

// publish sends the batch at seq until the stream takes it; false when
// the outbox was aborted first.
func (o *outbox) publish(seq uint64, batch [][]byte) bool {
	m := &nats.Msg{Subject: o.subject, Data: wire.EncodeBatch(o.claim, seq, batch)}
	id := wire.BatchID(o.claim, seq)
	pause := retryMin
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(o.ctx, publishTimeout)
		_, err := o.pub.PublishMsg(ctx, m, jetstream.WithMsgID(id), jetstream.WithExpectStream(wire.EventStream))
		cancel()
		if err == nil {
			if attempt > 1 {
				o.log.Info("events sent again after failures", "seq", seq, "attempts", attempt)
			}
			return true
		}
		if o.ctx.Err() != nil {
			return false
		}
		if attempt == 1 || attempt%20 == 0 {
			o.log.Debug("events not taken by the fleet's stream; trying again", "seq", seq, "attempt", attempt, "err", err)
		}
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-o.ctx.Done():
			t.Stop()
			return false
		}
		pause = min(2*pause, retryMax)
	}
}
