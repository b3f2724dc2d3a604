// Package journal saves a fleet session as it goes and only then tells the
// clients: it sits between the engine and the control server, writes every
// event that is part of the session's history (history.RecordOf decides)
// and the engine's task, worker, counter and coordinator state to the
// store in batches, and forwards the events after their batch committed.
// So whatever a client was told is in the database, even if the process is
// killed right after.
//
// One goroutine drains a queue in order; a burst of events becomes one
// Append of up to MaxBatch records (group commit; transcript lines go to
// the store's transcript log with one write). A second one forwards each
// batch once it is saved, so the next batch is being saved while the last
// one is encoded and fanned out.
//
// The engine calls Broadcast and the Save methods under its own lock, so
// they never wait, even when saving stalls (a long commit, another process
// holding the database locked): past a bound, the queue drops transcript
// lines and coalesces state (see Broadcast and docs/reliability.md,
// "Saving stalls"). BroadcastBatch, which carries task output without the
// engine's lock, waits for room instead: that wait is backpressure to the
// task.
package journal

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agents-fleet/fleet/history"
	"github.com/agents-fleet/fleet/protocol"
	"github.com/agents-fleet/fleet/store"
)

const (
	// QueueLen is how many events may wait to be saved before
	// BroadcastBatch waits for room (task output is throttled anyway).
	// Single events (Broadcast, the Save methods) never wait; they may
	// queue up to OverloadLen.
	QueueLen = 2048
	// OverloadLen and OverloadBytes bound the queue. Past either, the
	// journal is overloaded until run has drained it to QueueLen again:
	// transcript lines are dropped (and counted, and said), a task's,
	// worker's, counter's or the coordinator's row replaces the one of the
	// same id still queued, a status, fleetState or fleetAnalytics
	// snapshot replaces the queued one of its type, and other events are
	// kept, up to four times the bound.
	OverloadLen   = 8 * QueueLen
	OverloadBytes = 16 << 20
	// MaxBatch is the most records saved in one transaction.
	MaxBatch = 1024
	// DefaultBatchBytes bounds a batch's text, so that what it hands the
	// control server at once stays far below a client's queue bound (a
	// batch of long lines must not look like a slow consumer). See
	// WithBatchBytes.
	DefaultBatchBytes = 256 << 10
)

// limits are the queue's bounds (tests shrink them).
type limits struct {
	queueLen           int // BroadcastBatch waits past it; overload ends at it
	overLen, overBytes int // overload starts past either
	// hardLen, hardBytes: past either, events that are neither state rows
	// nor requests are dropped too.
	hardLen, hardBytes int
}

var defaultLimits = limits{queueLen: QueueLen, overLen: OverloadLen, overBytes: OverloadBytes,
	hardLen: 4 * OverloadLen, hardBytes: 4 * OverloadBytes}

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

// withLimits replaces the queue's bounds (tests).
func withLimits(l limits) Option { return func(j *Journal) { j.lim = l } }

// Publisher is where saved events go next (the control server).
type Publisher interface {
	Broadcast(m protocol.Message)
}

// Journal implements engine.Publisher, engine.BatchPublisher and
// engine.Persister.
type Journal struct {
	st         *store.Store
	session    string
	next       Publisher
	log        *slog.Logger
	batchBytes int
	lim        limits
	saved      chan *batch   // saved batches, to forward in order
	free       chan *batch   // batches to fill, recycled by forwardLoop
	done       chan struct{} // closed once everything is forwarded

	// mu guards the queue: closed, q, live, qBytes, over, and the two
	// conditions. It is held for a few appends or one batch's copy,
	// never across I/O.
	mu     sync.Mutex
	closed bool
	// q holds what waits to be saved, in order. live and qBytes count its
	// items that were not dropped, and their size.
	q            queue
	live, qBytes int
	over         *overload  // non-nil while overloaded
	queuedCond   *sync.Cond // run waits on it for items (or Close)
	roomCond     *sync.Cond // BroadcastBatch waits on it for room (or Close)

	// queued approximates the bytes of events sent and not yet forwarded;
	// drained is closed and replaced after each batch (see Throttle).
	queued    atomic.Int64
	drainedMu sync.Mutex
	drained   chan struct{}

	failing bool               // the last Append failed; owned by the run goroutine
	msgs    []protocol.Message // forward's scratch; owned by forwardLoop
}

// overload is the state of one overload, from the moment the queue passed
// its bound until run drained it to QueueLen.
type overload struct {
	since time.Time
	// rows and snaps hold the position in the queue of the row of each
	// task, worker, counter (and the coordinator), and of the snapshot of
	// each type, queued since the overload began. A position the queue no
	// longer has was taken by run.
	rows  map[rowKey]uint64
	snaps map[string]uint64
	// lines and events count what was dropped: transcript lines, and
	// other events past the hard bound.
	lines, events int
	coalesced     int // rows and snapshots that replaced a queued one
}

type rowKey struct {
	kind byte // 't'ask, 'w'orker, 'c'ounter, 'C'oordinator
	id   string
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
	rec    history.Record   // saved; zero when msg is not history
	synced chan struct{}    // closed once forwarded (Sync); may be nil
}

// isDropped reports whether it is the zero item: one taken out of the
// queue (a snapshot a later one replaced), which run skips.
func (it *item) isDropped() bool { return it.msg == nil && it.synced == nil && it.rec.IsZero() }

// New starts a journal for session, saving to st and forwarding to next.
func New(st *store.Store, session string, next Publisher, log *slog.Logger, opts ...Option) *Journal {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	j := &Journal{st: st, session: session, next: next, log: log, lim: defaultLimits, q: newQueue(QueueLen),
		saved: make(chan *batch, pipeDepth), free: make(chan *batch, pipeDepth),
		done: make(chan struct{}), drained: make(chan struct{}), batchBytes: DefaultBatchBytes}
	j.queuedCond = sync.NewCond(&j.mu)
	j.roomCond = sync.NewCond(&j.mu)
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
// forwards it, after everything sent before it. It never waits: the engine
// calls it under its lock. While the journal is overloaded (saving is
// behind by more than OverloadLen events or OverloadBytes), a transcript
// line is dropped, a status, fleetState or fleetAnalytics snapshot
// replaces the one of its type still queued (which is then not sent), and
// other events are kept; past four times the bound, events other than
// confirm/ask requests and their resolutions are dropped too (what is
// which: protocol.ClassOf). Once the
// queue has drained to QueueLen, one system transcript line says what was
// dropped.
func (j *Journal) Broadcast(m protocol.Message) {
	rec, _ := history.RecordOf(m)
	j.enqueue(item{msg: m, rec: rec})
}

// BroadcastBatch is Broadcast for a run of events (a read of task output),
// taking the lock once for all of them. Unlike Broadcast it waits, while
// the queue holds QueueLen events or more, for run to make room (it is not
// called under the engine's lock): that is backpressure to the task, and
// none of its lines is dropped. After Close the events are dropped.
func (j *Journal) BroadcastBatch(ms []protocol.Message) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for !j.closed && j.live > 0 && j.live+len(ms) > j.lim.queueLen {
		j.roomCond.Wait()
	}
	if j.closed {
		j.log.Warn("journal closed; events dropped", "events", len(ms))
		return
	}
	for _, m := range ms {
		rec, _ := history.RecordOf(m)
		j.pushLocked(item{msg: m, rec: rec})
	}
}

// SaveTask, SaveWorker and SaveCounter save engine state in order with the
// events around them (engine.Persister). They never wait. While the
// journal is overloaded, a row replaces the row of the same task, worker
// or counter that is still queued: it is saved at that row's place (so
// creation order holds), with the latest state.
func (j *Journal) SaveTask(t history.Task) { j.enqueue(item{rec: history.Record{Task: &t}}) }

func (j *Journal) SaveWorker(w history.Worker) { j.enqueue(item{rec: history.Record{Worker: &w}}) }

func (j *Journal) SaveCounter(name string, value int64) {
	j.enqueue(item{rec: history.Record{Counter: &history.Counter{Name: name, Value: value}}})
}

// SaveCoordinator saves the session's coordinator CLI session (what
// `fleet run --resume` continues), replacing the saved one, like the other
// Save methods.
func (j *Journal) SaveCoordinator(c history.Coordinator) {
	j.enqueue(item{rec: history.Record{Coordinator: &c}})
}

// Sync waits until every event sent before it was saved and handed on
// (or ctx ends): the fleet calls it before it lets consoles attach, so that
// what it said at start is in their replay.
func (j *Journal) Sync(ctx context.Context) {
	done := make(chan struct{})
	j.enqueue(item{synced: done})
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// enqueue queues one item, applying the overload policy; it never waits.
func (j *Journal) enqueue(it item) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		if it.synced != nil {
			close(it.synced)
			return
		}
		j.log.Warn("journal closed; event dropped", "type", typeOf(it.msg))
		return
	}
	if j.over == nil && (j.live >= j.lim.overLen || j.qBytes >= j.lim.overBytes) {
		j.over = &overload{since: time.Now(), rows: make(map[rowKey]uint64), snaps: make(map[string]uint64)}
		j.log.Warn("saving the session is behind; dropping transcript lines and coalescing state until it catches up",
			"queued", j.live, "bytes", j.qBytes)
	}
	if j.over != nil && !j.admitLocked(&it) {
		return
	}
	j.pushLocked(it)
}

// admitLocked applies the overload policy to it: false when it was dropped
// or merged into a queued item. j.mu must be held and j.over set.
func (j *Journal) admitLocked(it *item) bool {
	o := j.over
	next := j.q.next() // the position it would take
	switch {
	case it.synced != nil:
		return true
	case it.msg == nil: // a state row
		k := keyOf(&it.rec)
		if p, ok := o.rows[k]; ok && j.q.has(p) {
			replaceRow(&j.q.at(p).rec, &it.rec)
			o.coalesced++
			return false
		}
		o.rows[k] = next
		return true
	case it.rec.Transcript != nil:
		// The saved output (protocol.ClassSavedOutput): the flood, dropped
		// first. Tool calls, droppable too, are not saved and are kept
		// until the hard bound like other events.
		o.lines++
		return false
	}
	switch c := protocol.ClassOf(it.msg); {
	case c.Coalesced():
		t := it.msg.MessageType()
		if p, ok := o.snaps[t]; ok && j.q.has(p) {
			j.dropLocked(j.q.at(p))
			o.coalesced++
		}
		o.snaps[t] = next
		return true
	case c == protocol.ClassRequest:
		// A request no console sees would leave its task (or agent CLI)
		// waiting; the engine bounds how many are pending.
		return true
	}
	if j.live >= j.lim.hardLen || j.qBytes >= j.lim.hardBytes {
		o.events++
		return false
	}
	return true
}

// keyOf is the key a state row is coalesced by.
func keyOf(r *history.Record) rowKey {
	switch {
	case r.Task != nil:
		return rowKey{'t', r.Task.ID}
	case r.Worker != nil:
		return rowKey{'w', r.Worker.ID}
	case r.Counter != nil:
		return rowKey{'c', r.Counter.Name}
	}
	return rowKey{kind: 'C'}
}

// replaceRow gives the queued row dst the content of src, a row of the
// same key. The row dst points to is the journal's own copy.
func replaceRow(dst, src *history.Record) {
	switch {
	case src.Task != nil:
		*dst.Task = *src.Task
	case src.Worker != nil:
		*dst.Worker = *src.Worker
	case src.Counter != nil:
		*dst.Counter = *src.Counter
	case src.Coordinator != nil:
		*dst.Coordinator = *src.Coordinator
	}
}

// pushLocked appends it to the queue. j.mu must be held.
func (j *Journal) pushLocked(it item) {
	j.q.push(it)
	n := it.size()
	j.live++
	j.qBytes += n
	j.queued.Add(int64(n))
	j.queuedCond.Signal()
}

// dropLocked takes a queued item out (run skips it). j.mu must be held.
func (j *Journal) dropLocked(it *item) {
	n := it.size()
	*it = item{}
	j.live--
	j.qBytes -= n
	j.queued.Add(-int64(n))
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
// after Close are dropped with a warning, as are those of a BroadcastBatch
// still waiting for room.
func (j *Journal) Close() {
	j.mu.Lock()
	if !j.closed {
		j.closed = true
		j.queuedCond.Broadcast()
		j.roomCond.Broadcast()
	}
	j.mu.Unlock()
	<-j.done
}

// run saves batches in order and hands each to forwardLoop. It owns
// closing saved; forwardLoop owns closing done.
func (j *Journal) run() {
	defer close(j.saved)
	// recs point at the items' rows: a transcript line's record is the
	// frame itself (history.RecordOf), so a batch of task output is saved
	// without an allocation per line.
	recs := make([]history.Record, 0, MaxBatch)
	for {
		b := <-j.free
		if !j.take(b) {
			return
		}
		recs = recs[:0]
		for i := range b.items {
			if !b.items[i].rec.IsZero() {
				recs = append(recs, b.items[i].rec)
			}
		}
		if len(recs) > 0 {
			b.notice = j.save(recs)
		}
		clear(recs)
		j.saved <- b
	}
}

// take fills b with the next batch, waiting for one; false once the
// journal is closed and everything was taken.
func (j *Journal) take(b *batch) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	for j.live == 0 {
		if j.closed {
			return false
		}
		j.queuedCond.Wait()
	}
	limit := MaxBatch
	if j.over != nil {
		limit-- // room for the notice that may end the overload
	}
	for j.q.n > 0 && len(b.items) < limit && b.size < j.batchBytes {
		if it := j.q.at(j.q.first); !it.isDropped() {
			b.items = append(b.items, *it)
			b.size += it.size()
		}
		j.q.pop()
	}
	j.live -= len(b.items)
	j.qBytes -= b.size
	for j.live == 0 && j.q.n > 0 {
		j.q.pop() // what is left was dropped
	}
	if j.over != nil && j.live <= j.lim.queueLen {
		j.endOverloadLocked(b)
	}
	j.roomCond.Broadcast()
	return true
}

// endOverloadLocked ends the overload and, when something was dropped,
// adds to b the system line that says so: it is saved and shown after
// everything that was queued before it. j.mu must be held.
func (j *Journal) endOverloadLocked(b *batch) {
	o := j.over
	j.over = nil
	d := time.Since(o.since).Round(time.Millisecond)
	if o.lines == 0 && o.events == 0 {
		j.log.Info("saving the session caught up; nothing was dropped", "after", d, "coalesced", o.coalesced)
		return
	}
	j.log.Warn("saving the session caught up after dropping events", "after", d,
		"transcriptLines", o.lines, "events", o.events, "coalesced", o.coalesced)
	text := fmt.Sprintf("Saving the session fell behind for %v (more than %d events or %d MiB waited to be saved): "+
		"%d transcript lines were dropped, neither saved nor shown", d, j.lim.overLen, j.lim.overBytes>>20, o.lines)
	if o.events > 0 {
		text += fmt.Sprintf(", and %d other events (hub events, tool calls, replies…) past %d waiting", o.events, j.lim.hardLen)
	}
	text += ". Task and worker state and pending requests were kept."
	m := &protocol.Transcript{Role: protocol.RoleSystem, Text: text, Ts: time.Now().UnixMilli()}
	it := item{msg: m, rec: history.Record{Transcript: m}}
	b.items = append(b.items, it)
	b.size += it.size()
	j.queued.Add(int64(it.size()))
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
		b.items, b.size, b.notice = b.items[:0], 0, nil
		j.free <- b
	}
}

// size approximates the bytes an item puts on the wire.
func (it *item) size() int {
	if tr, ok := it.msg.(*protocol.Transcript); ok {
		return len(tr.Text) + 64
	}
	if it.rec.Worker != nil {
		return len(it.rec.Worker.Prompt) + 256
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
func (j *Journal) save(recs []history.Record) (notice protocol.Message) {
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

func typeOf(m protocol.Message) string {
	if m == nil {
		return "record"
	}
	return m.MessageType()
}
