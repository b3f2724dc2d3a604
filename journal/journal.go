// Package journal saves a fleet session as it goes and only then tells the
// clients: it sits between the engine and the control server, writes every
// event worth keeping (conversation, transcripts, hub events) and the
// engine's task, worker and counter state to the store in batches, and
// forwards the events after their batch committed. So whatever a client was
// told is in the database, even if the process is killed right after.
//
// One goroutine drains a bounded queue in order; a burst of events becomes
// one Append of up to MaxBatch records (group commit; transcript lines go
// to the store's transcript log with one write). A second one forwards
// each batch once it is saved, so the next batch is being saved while the
// last one is encoded and fanned out.
package journal

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agents-fleet/fleet/engine"
	"github.com/agents-fleet/fleet/protocol"
	"github.com/agents-fleet/fleet/store"
)

const (
	// QueueLen bounds the events waiting to be saved. A full queue makes
	// the producer wait (task output is throttled anyway; the engine's own
	// events are few).
	QueueLen = 2048
	// MaxBatch is the most records saved in one transaction.
	MaxBatch = 1024
	// DefaultBatchBytes bounds a batch's text, so that what it hands the
	// control server at once stays far below a client's queue bound (a
	// batch of long lines must not look like a slow consumer). See
	// WithBatchBytes.
	DefaultBatchBytes = 256 << 10
)

// Option configures a Journal.
type Option func(*Journal)

// WithBatchBytes sets the batch byte bound; Throttle holds producers back
// beyond twice that. Give a quarter of the control server's soft queue
// bound, so events past the server's Throttle cannot overrun a client.
func WithBatchBytes(n int) Option {
	return func(j *Journal) {
		if n > 0 {
			j.batchBytes = n
		}
	}
}

// Publisher is where saved events go next (the control server).
type Publisher interface {
	Broadcast(m protocol.Message)
}

// Journal implements engine.Publisher and engine.Persister.
type Journal struct {
	st      *store.Store
	session string
	next    Publisher
	log     *slog.Logger

	mu     sync.RWMutex // guards closed; held (read) while sending on in
	closed bool
	in     chan item
	saved  chan *batch // saved batches, to forward in order
	free   chan *batch // batches to fill, recycled by forwardLoop
	done   chan struct{}

	// queued approximates the bytes of events waiting in in; drained is
	// closed and replaced after each batch (see Throttle).
	queued    atomic.Int64
	drainedMu sync.Mutex
	drained   chan struct{}

	batchBytes int

	failing bool               // the last Append failed; owned by the run goroutine
	msgs    []protocol.Message // forward's scratch; owned by forwardLoop
}

// batch is what run saves in one transaction and forwardLoop then sends.
type batch struct {
	items  []item
	size   int              // the items' size(), for Throttle's account
	notice protocol.Message // a word about saving, sent before items; may be nil
}

// pipeDepth is how many batches are in flight between saving and
// forwarding: one being saved, one being forwarded.
const pipeDepth = 2

type item struct {
	msg    protocol.Message // forwarded after the batch is saved; may be nil
	rec    store.Record     // saved; zero when msg is not worth keeping
	synced chan struct{}    // closed once forwarded (Sync); may be nil
}

// New starts a journal for session, saving to st and forwarding to next.
func New(st *store.Store, session string, next Publisher, log *slog.Logger, opts ...Option) *Journal {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	j := &Journal{st: st, session: session, next: next, log: log, in: make(chan item, QueueLen),
		saved: make(chan *batch, pipeDepth), free: make(chan *batch, pipeDepth),
		done: make(chan struct{}), drained: make(chan struct{}), batchBytes: DefaultBatchBytes}
	for _, o := range opts {
		o(j)
	}
	for range pipeDepth {
		j.free <- &batch{items: make([]item, 0, MaxBatch)}
	}
	go j.run()
	go j.forwardLoop()
	return j
}

// Broadcast saves m when it is part of the session's history, then
// forwards it.
func (j *Journal) Broadcast(m protocol.Message) { j.send(item{msg: m, rec: recordFor(m)}) }

// BroadcastBatch is Broadcast for a run of events (a read of task output),
// taking the lock once for all of them.
func (j *Journal) BroadcastBatch(ms []protocol.Message) {
	j.mu.RLock()
	defer j.mu.RUnlock()
	if j.closed {
		j.log.Warn("journal closed; events dropped", "events", len(ms))
		return
	}
	size := 0
	for _, m := range ms {
		size += item{msg: m}.size()
	}
	j.queued.Add(int64(size))
	for _, m := range ms {
		j.in <- item{msg: m, rec: recordFor(m)}
	}
}

// SaveTask, SaveWorker and SaveCounter save engine state in order with the
// events around them.
func (j *Journal) SaveTask(t engine.TaskRecord) {
	j.send(item{rec: store.Record{Task: &store.Task{
		ID: t.ID, Command: t.Command, Status: t.Status, Worker: t.Worker, Reason: t.Reason,
		LoopID: t.LoopID, Attempts: t.Attempt, Planned: t.Planned, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt,
	}}})
}

func (j *Journal) SaveWorker(w engine.WorkerRecord) {
	j.send(item{rec: store.Record{Worker: &store.Worker{
		ID: w.ID, TaskID: w.TaskID, Status: w.Status, WorktreePath: w.WorktreePath, Branch: w.Branch,
		BaseCommit: w.BaseCommit, StartedAt: w.StartedAt, EndedAt: w.EndedAt, LastActivityAt: w.LastActivityAt,
		ToolUses: w.ToolUses,
	}}})
}

func (j *Journal) SaveCounter(name string, value int64) {
	j.send(item{rec: store.Record{Counter: &store.Counter{Name: name, Value: value}}})
}

// Sync waits until every event sent before it was saved and handed on
// (or ctx ends): the fleet calls it before it lets consoles attach, so that
// what it said at start is in their replay.
func (j *Journal) Sync(ctx context.Context) {
	done := make(chan struct{})
	j.send(item{synced: done})
	select {
	case <-done:
	case <-ctx.Done():
	}
}

func (j *Journal) send(it item) {
	j.mu.RLock()
	defer j.mu.RUnlock()
	if j.closed {
		if it.synced != nil {
			close(it.synced)
			return
		}
		j.log.Warn("journal closed; event dropped", "type", typeOf(it.msg))
		return
	}
	j.queued.Add(int64(it.size()))
	j.in <- it
}

// Throttle waits while more than two batches' worth of events are queued.
// A producer that also waits on the control server's Throttle calls it
// after that: the events between the two would otherwise reach clients
// after the server asked for a pause.
func (j *Journal) Throttle(ctx context.Context) {
	for j.queued.Load() > 2*int64(j.batchBytes) {
		j.drainedMu.Lock()
		ch := j.drained
		j.drainedMu.Unlock()
		if j.queued.Load() <= 2*int64(j.batchBytes) {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return
		case <-j.done:
			return
		}
	}
}

// Close saves and forwards everything queued, then stops. Events sent
// after Close are dropped with a warning.
func (j *Journal) Close() {
	j.mu.Lock()
	if !j.closed {
		j.closed = true
		close(j.in)
	}
	j.mu.Unlock()
	<-j.done
}

// run saves batches in order and hands each to forwardLoop. It owns
// closing saved; forwardLoop owns closing done.
func (j *Journal) run() {
	defer close(j.saved)
	recs := make([]store.Record, 0, MaxBatch)
	// lines holds the batch's transcript lines for recs to point at: task
	// output is most of what is saved, and a line per event would be an
	// allocation per line. A batch has at most MaxBatch items, so lines
	// never grows and the pointers stay valid.
	lines := make([]store.TranscriptLine, 0, MaxBatch)
	for it := range j.in {
		b := <-j.free
		b.items = append(b.items[:0], it)
		b.size = it.size()
	fill:
		for len(b.items) < MaxBatch && b.size < j.batchBytes {
			select {
			case more, ok := <-j.in:
				if !ok {
					break fill
				}
				b.items = append(b.items, more)
				b.size += more.size()
			default:
				break fill
			}
		}
		recs, lines = recs[:0], lines[:0]
		for _, it := range b.items {
			if tr, ok := it.msg.(*protocol.Transcript); ok {
				lines = append(lines, store.TranscriptLine{Agent: tr.Agent, Role: string(tr.Role), Text: tr.Text,
					Stream: string(tr.Stream), Ts: tr.Ts})
				recs = append(recs, store.Record{Transcript: &lines[len(lines)-1]})
			} else if !it.rec.IsZero() {
				recs = append(recs, it.rec)
			}
		}
		if len(recs) > 0 {
			b.notice = j.save(recs)
		}
		clear(recs)
		clear(lines)
		j.saved <- b
	}
}

// forwardLoop sends the saved batches on, in order, and accounts for them
// in Throttle.
func (j *Journal) forwardLoop() {
	defer close(j.done)
	for b := range j.saved {
		if b.notice != nil {
			j.next.Broadcast(b.notice)
		}
		j.forward(b.items)
		for _, it := range b.items {
			if it.synced != nil {
				close(it.synced)
			}
		}
		j.queued.Add(-int64(b.size))
		j.drainedMu.Lock()
		close(j.drained)
		j.drained = make(chan struct{})
		j.drainedMu.Unlock()
		clear(b.items)
		b.items, b.notice = b.items[:0], nil
		j.free <- b
	}
}

// size approximates the bytes an item puts on the wire.
func (it item) size() int {
	if tr, ok := it.msg.(*protocol.Transcript); ok {
		return len(tr.Text) + 64
	}
	return 256
}

// batchPublisher is a Publisher that takes a batch at once (the control
// server does: one lock per batch instead of one per event).
type batchPublisher interface {
	BroadcastBatch(ms []protocol.Message)
}

// forward hands the batch's events on, in order.
func (j *Journal) forward(batch []item) {
	if bp, ok := j.next.(batchPublisher); ok {
		j.msgs = j.msgs[:0]
		for _, it := range batch {
			if it.msg != nil {
				j.msgs = append(j.msgs, it.msg)
			}
		}
		if len(j.msgs) > 0 {
			bp.BroadcastBatch(j.msgs)
		}
		clear(j.msgs)
		return
	}
	for _, it := range batch {
		if it.msg != nil {
			j.next.Broadcast(it.msg)
		}
	}
}

// save appends recs. If the store fails (disk full, read-only), the fleet
// keeps running and telling clients: it says once that the session is not
// being saved (the notice it returns, sent before the batch), logs the
// error, and tries again with every batch.
func (j *Journal) save(recs []store.Record) (notice protocol.Message) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := j.st.Append(ctx, j.session, recs)
	switch {
	case err != nil && !j.failing:
		j.failing = true
		j.log.Error("saving the session failed; events are still delivered but not saved", "err", err, "records", len(recs))
		return &protocol.Transcript{Role: protocol.RoleSystem, Ts: time.Now().UnixMilli(),
			Text: "The session is not being saved: " + err.Error() + ". It cannot be resumed past this point until the problem is fixed."}
	case err == nil && j.failing:
		j.failing = false
		j.log.Info("saving the session works again")
		return &protocol.Transcript{Role: protocol.RoleSystem, Ts: time.Now().UnixMilli(),
			Text: "The session is being saved again."}
	}
	return nil
}

// recordFor maps the events that make up a session's history to records.
// Transcript lines are not among them: run makes those records per batch,
// without an allocation each.
func recordFor(m protocol.Message) store.Record {
	switch m := m.(type) {
	case *protocol.UserMessage:
		return store.Record{Conversation: &store.ConversationEntry{Role: "user", Source: m.Source, Text: m.Text, RequestID: m.RequestID, Ts: time.Now().UnixMilli()}}
	case *protocol.Reply:
		ts := m.Ts
		if ts == 0 {
			ts = time.Now().UnixMilli()
		}
		return store.Record{Conversation: &store.ConversationEntry{Role: "assistant", Text: m.Text, Ts: ts}}
	case *protocol.HubEvent:
		return store.Record{Hub: &store.HubEvent{From: m.From, Kind: m.Kind, To: m.To, Text: m.Text, Ts: m.Ts}}
	}
	return store.Record{}
}

func typeOf(m protocol.Message) string {
	if m == nil {
		return "record"
	}
	return m.MessageType()
}
