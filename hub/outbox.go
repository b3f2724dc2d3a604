package hub

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agents-fleet/fleet/hub/telegram"
)

// sender is what the outbox needs of the Bot API.
type sender interface {
	Send(ctx context.Context, m telegram.OutMessage) (int64, error)
	Edit(ctx context.Context, chatID, messageID int64, text string, buttons [][]telegram.Button) error
}

// Delivery limits (Bot API FAQ: about one message a second per chat, 20 a
// minute in a group, 30 a second overall; edits count too).
const (
	privateGap = time.Second
	groupGap   = 3 * time.Second
	globalGap  = time.Second / 30
	// gather is how long the first line of a stream waits for the rest of
	// a burst, so a burst goes out as one message.
	gather = 300 * time.Millisecond
	// floodLines: more pending lines than this, or more text than one
	// message holds, turn a stream into one progress message that is
	// edited in place until the stream has been quiet for floodQuiet.
	floodLines = 40
	floodTail  = 15
	floodQuiet = 5 * time.Second
	// maxStreamBytes bounds what a stream keeps while it waits its turn;
	// older lines are counted, not kept.
	maxStreamBytes = 16 << 10
	// maxUrgent bounds a chat's queue of messages that must not be merged.
	maxUrgent = 2000
	// maxTries bounds retries of one item on errors other than 429.
	maxTries = 5
	// maxHandles is how many sent messages the outbox remembers ids of.
	maxHandles  = 20000
	callTimeout = 30 * time.Second
)

// handle names a message the hub sent (or will send) before Telegram has
// given it an id; edits refer to it.
type handle uint64

// outItem is a message to send, or an edit of one sent before.
type outItem struct {
	chat    int64
	thread  int64
	h       handle // send: the handle to bind; edit: its target
	edit    bool
	text    string // HTML
	buttons [][]telegram.Button
	force   bool   // ForceReply
	replyTo int64  // a Telegram message id in this chat
	fleet   string // the fleet it is about, for routing replies to it
	tries   int
}

// sentNote tells the hub which Telegram message a handle became.
type sentNote struct {
	h             handle
	chat, message int64
	fleet         string
}

// outbox is the one sender to Telegram: it owns the rate limits, 429
// back-off and the coalescing of noisy text, so nothing else in the hub
// waits on the Bot API. Enqueue never blocks.
type outbox struct {
	api    sender
	log    *slog.Logger
	onSent func(sentNote) // called from the outbox goroutine
	now    func() time.Time

	handles atomic.Uint64

	mu      sync.Mutex
	chats   map[int64]*chatQueue
	ids     map[handle]int64 // handle → message id (its chat is in the item)
	idOrder []handle
	wake    chan struct{}
	lastAPI time.Time // last call, for the global gap
	stats   OutboxStats
}

// chatQueue is one chat's pending work.
type chatQueue struct {
	id      int64
	next    time.Time // no call to this chat before then
	urgent  []outItem
	streams []*stream
	rr      int
}

// stream is a run of low-priority lines (replies, notices, output) from one
// fleet, merged into few messages.
type stream struct {
	key    string // fleet id, and a suffix per kind of text
	fleet  string
	noun   string // what the flood message counts: "updates", "lines of output"
	head   string // HTML header naming the fleet
	thread int64
	lines  []string // escaped HTML lines not yet sent
	bytes  int
	first  time.Time // when the oldest pending line arrived
	last   time.Time // when the newest line arrived
	// flood state: one message edited in place.
	flood    bool
	dirty    bool // the last flood update failed: send the current state again
	fails    int  // flood updates refused in a row
	progress handle
	total    int      // lines in this flood
	tail     []string // its last floodTail lines
}

func newOutbox(api sender, log *slog.Logger, onSent func(sentNote)) *outbox {
	return &outbox{
		api: api, log: log, onSent: onSent, now: time.Now,
		chats: map[int64]*chatQueue{}, ids: map[handle]int64{},
		wake: make(chan struct{}, 1),
	}
}

func (o *outbox) chat(id int64) *chatQueue {
	q := o.chats[id]
	if q == nil {
		q = &chatQueue{id: id}
		o.chats[id] = q
	}
	return q
}

func (o *outbox) signal() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// Enqueue queues a message or an edit that must go out as it is.
func (o *outbox) Enqueue(it outItem) {
	o.mu.Lock()
	q := o.chat(it.chat)
	if len(q.urgent) >= maxUrgent {
		o.stats.Dropped++
		o.log.Warn("telegram queue full; dropping a message", "chat", it.chat)
	} else {
		q.urgent = append(q.urgent, it)
	}
	o.mu.Unlock()
	o.signal()
}

// Line queues one line of low-priority text about fleet, to be merged with
// its neighbours of the same kind (output is kept apart from notices, so a
// flood of output never buries a reply). head is the fleet's HTML header.
func (o *outbox) Line(chat, thread int64, fleet string, output bool, head, line string) {
	key, noun := fleet, "updates"
	if output {
		key, noun = fleet+"/output", "lines of output"
	}
	now := o.now()
	o.mu.Lock()
	q := o.chat(chat)
	var s *stream
	for _, c := range q.streams {
		if c.key == key {
			s = c
		}
	}
	if s == nil {
		s = &stream{key: key, fleet: fleet, noun: noun}
		q.streams = append(q.streams, s)
	}
	s.head, s.thread = head, thread
	if s.flood && len(s.lines) == 0 && !s.dirty && now.Sub(s.last) >= floodQuiet {
		// The flood is over: new text starts a new message.
		s.flood, s.progress, s.total, s.tail = false, 0, 0, nil
	}
	if len(s.lines) == 0 {
		s.first = now
	}
	s.last = now
	s.lines = append(s.lines, line)
	s.bytes += len(line) + 1
	for s.bytes > maxStreamBytes && len(s.lines) > 1 {
		// Keep the newest; the flood message counts what was dropped.
		s.bytes -= len(s.lines[0]) + 1
		s.lines = s.lines[1:]
		s.total++
		s.flood = true
	}
	first := len(s.lines) == 1
	o.mu.Unlock()
	if first {
		// Only the first pending line needs a wake-up: the outbox already
		// waits for a stream that has lines.
		o.signal()
	}
}

// messageID is the Telegram id a handle became, or 0.
func (o *outbox) messageID(h handle) int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.ids[h]
}

func (o *outbox) bind(h handle, id int64) {
	if h == 0 {
		return
	}
	o.ids[h] = id
	o.idOrder = append(o.idOrder, h)
	if len(o.idOrder) > maxHandles {
		delete(o.ids, o.idOrder[0])
		o.idOrder = o.idOrder[1:]
	}
}

// Stats returns the counters.
func (o *outbox) Stats() OutboxStats {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.stats
}

// run sends until ctx is done.
func (o *outbox) run(ctx context.Context) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		job, wait := o.pick()
		if job == nil {
			t.Reset(wait)
			select {
			case <-ctx.Done():
				return
			case <-o.wake:
			case <-t.C:
			}
			continue
		}
		o.do(ctx, job)
		if ctx.Err() != nil {
			return
		}
	}
}

// job is one API call picked from a queue.
type job struct {
	q    *chatQueue
	item outItem
	s    *stream // set when the item flushes a stream
}

// pick chooses the next call that the rate limits allow, or how long to
// wait for one (an hour when there is nothing to do).
func (o *outbox) pick() (*job, time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := o.now()
	wait := time.Hour
	if g := o.lastAPI.Add(globalGap); now.Before(g) {
		return nil, g.Sub(now)
	}
	for _, q := range o.chats {
		if len(q.urgent) == 0 && !q.hasStream() {
			continue
		}
		if now.Before(q.next) {
			wait = min(wait, q.next.Sub(now))
			continue
		}
		if len(q.urgent) > 0 {
			it := q.urgent[0]
			q.urgent = q.urgent[1:]
			return &job{q: q, item: it}, 0
		}
		if j, w := o.flushStream(q, now); j != nil {
			return j, 0
		} else {
			wait = min(wait, w)
		}
	}
	return nil, max(wait, time.Millisecond)
}

func (q *chatQueue) hasStream() bool {
	for _, s := range q.streams {
		if len(s.lines) > 0 || s.dirty {
			return true
		}
	}
	return false
}

// flushStream turns a stream's pending lines into one call: a new message,
// or, in a flood, an edit of the progress message. It returns how long to
// wait when no stream is ready yet.
func (o *outbox) flushStream(q *chatQueue, now time.Time) (*job, time.Duration) {
	wait := time.Hour
	n := len(q.streams)
	for i := range n {
		s := q.streams[(q.rr+i)%n]
		if len(s.lines) == 0 && !s.dirty {
			continue
		}
		if ready := s.first.Add(gather); len(s.lines) > 0 && now.Before(ready) {
			wait = min(wait, ready.Sub(now))
			continue
		}
		q.rr = (q.rr + i + 1) % n
		body := strings.Join(s.lines, "\n")
		if !s.flood && len(s.lines) <= floodLines && utf16Len(s.head)+1+utf16Len(body) <= MaxMessageLen {
			it := outItem{chat: q.id, thread: s.thread, text: s.head + "\n" + body, h: o.NewHandle(), fleet: s.fleet}
			s.lines, s.bytes = nil, 0
			return &job{q: q, item: it}, 0
		}
		// A flood: one message, edited in place, with a count and the tail.
		s.flood, s.dirty = true, false
		s.total += len(s.lines)
		s.tail = append(s.tail, s.lines...)
		if len(s.tail) > floodTail {
			s.tail = s.tail[len(s.tail)-floodTail:]
		}
		s.lines, s.bytes = nil, 0
		text := floodText(s.head, s.noun, s.total, s.tail)
		it := outItem{chat: q.id, thread: s.thread, text: text, fleet: s.fleet}
		if s.progress != 0 {
			it.edit, it.h = true, s.progress
		} else {
			s.progress = o.NewHandle()
			it.h = s.progress
		}
		return &job{q: q, item: it, s: s}, 0
	}
	q.streams = dropIdle(q.streams, now)
	return nil, wait
}

// dropIdle forgets streams with nothing pending and no flood going on.
func dropIdle(ss []*stream, now time.Time) []*stream {
	out := ss[:0]
	for _, s := range ss {
		if len(s.lines) > 0 || s.dirty || (s.flood && now.Sub(s.last) < floodQuiet) {
			out = append(out, s)
		}
	}
	return out
}

// floodText is a progress message: how many lines so far and the last ones.
func floodText(head, noun string, total int, tail []string) string {
	var b strings.Builder
	b.WriteString(head)
	fmt.Fprintf(&b, "\n<i>%d %s so far; the last %d:</i>\n", total, noun, len(tail))
	for _, l := range tail {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	t := strings.TrimRight(b.String(), "\n")
	for utf16Len(t) > MaxMessageLen && len(tail) > 1 {
		tail = tail[1:]
		t = floodText(head, noun, total, tail)
	}
	if utf16Len(t) > MaxMessageLen {
		t = split(t, MaxMessageLen)[0]
	}
	return t
}

// NewHandle returns a fresh handle for a message about to be enqueued.
func (o *outbox) NewHandle() handle { return handle(o.handles.Add(1)) }

// do makes one call and books its outcome: the rate-limit clocks, the
// handle binding, a retry on 429 or a transient error.
func (o *outbox) do(ctx context.Context, j *job) {
	it := j.item
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	var err error
	var id int64
	if it.edit {
		id = o.messageID(it.h)
		if id == 0 {
			o.log.Debug("telegram edit of a message that was never sent; dropped", "chat", it.chat)
			return
		}
		err = o.api.Edit(cctx, it.chat, id, it.text, it.buttons)
	} else {
		id, err = o.api.Send(cctx, telegram.OutMessage{
			ChatID: it.chat, ThreadID: it.thread, ReplyTo: it.replyTo,
			Text: it.text, Buttons: it.buttons, ForceReply: it.force,
		})
	}
	now := o.now()
	o.mu.Lock()
	o.lastAPI = now
	gap := privateGap
	if it.chat < 0 {
		gap = groupGap
	}
	j.q.next = now.Add(gap)
	var ra *telegram.RetryAfterError
	switch {
	case err == nil:
		if j.s != nil {
			j.s.fails = 0
		}
		if it.edit {
			o.stats.Edited++
		} else {
			o.stats.Sent++
			o.bind(it.h, id)
		}
	case errors.As(err, &ra):
		o.stats.RetryAfter++
		j.q.next = now.Add(max(ra.After, time.Second))
		o.requeueLocked(j)
		o.log.Warn("telegram asks the hub to slow down", "chat", it.chat, "retryAfter", ra.After)
	case ctx.Err() != nil:
	case it.tries+1 < maxTries && retryable(err):
		j.item.tries++
		j.q.next = now.Add(time.Second << it.tries)
		o.requeueLocked(j)
		o.log.Warn("telegram call failed; will retry", "chat", it.chat, "err", err)
	default:
		o.stats.Dropped++
		o.log.Error("telegram call failed; message dropped", "chat", it.chat, "err", err)
		if j.s != nil && j.s.progress == it.h {
			// The progress message was refused or is gone: the flood's
			// next update starts a new one instead of editing nothing.
			j.s.progress = 0
			j.s.fails++
			j.s.dirty = j.s.fails < maxTries
		}
	}
	o.mu.Unlock()
	if err == nil && !it.edit && it.h != 0 && o.onSent != nil {
		o.onSent(sentNote{h: it.h, chat: it.chat, message: id, fleet: it.fleet})
	}
}

// requeueLocked puts a failed call back at the front of its queue.
func (o *outbox) requeueLocked(j *job) {
	if j.s != nil {
		// A flood flush: the next flush sends the newer state anyway;
		// only a lost first send must be redone.
		if !j.item.edit && o.ids[j.item.h] == 0 {
			j.s.progress = 0
		}
		j.s.dirty = true
		return
	}
	j.q.urgent = append([]outItem{j.item}, j.q.urgent...)
}

// retryable is true for errors that may pass on a second try: network
// trouble and server errors, not a request Telegram refused.
func retryable(err error) bool {
	for _, permanent := range []error{telegram.ErrBadRequest, telegram.ErrForbidden, telegram.ErrUnsupported, telegram.ErrUnauthorized} {
		if errors.Is(err, permanent) {
			return false
		}
	}
	return true
}
