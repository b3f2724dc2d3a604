package controlsock

import (
	"bytes"
	"container/heap"
	"encoding/json"
	"slices"
	"strconv"
	"time"

	"github.com/agents-fleet/fleet/history"
	"github.com/agents-fleet/fleet/protocol"
)

// HistoryLimits bound the recent history the server keeps for hydrate.
type HistoryLimits struct {
	Conversation       int // userMessage/reply entries; default 200
	TranscriptPerAgent int // lines per agent; default 200
	TranscriptAgents   int // agents remembered; default 64 (least recently active dropped)
	Hub                int // hub events; default 500
}

func (h *HistoryLimits) setDefaults() {
	if h.Conversation <= 0 {
		h.Conversation = 200
	}
	if h.TranscriptPerAgent <= 0 {
		h.TranscriptPerAgent = 200
	}
	if h.TranscriptAgents <= 0 {
		h.TranscriptAgents = 64
	}
	if h.Hub <= 0 {
		h.Hub = 500
	}
}

// snapshotOrder is the replay order of the set-once snapshots (protocol page,
// "Replay order on attach", step 2). hydrate is built at attach time from
// the history rings, after these.
var snapshotOrder = protocol.SnapshotTypes()

// hydrateBudget bounds the encoded hydrate frame, with room to spare under
// the 1 MiB frame cap: the window is trimmed to fit (the conversation to
// the newest entries that fit in half of it, the hub events to the newest
// that fit in a quarter, the transcript lines to the newest that fit in
// the rest). Each entry's text was cut to history.MaxEntryText when it was
// kept, so the frame fits by construction, whatever the session holds.
const hydrateBudget = protocol.MaxFrameSize - 64<<10

// hydrateOverhead is the hydrate frame's own bytes: its keys, brackets
// and the truncated flag.
const hydrateOverhead = 128

// replayCache is what a late-attaching client is sent before replayEnd. It
// holds the same encoded bytes that were broadcast, so replay costs no
// encoding: even hydrate is assembled from the broadcast frames of its
// transcript lines and hub events. Guarded by Server.mu.
type replayCache struct {
	limits    HistoryLimits
	snapshots map[string][]byte
	pending   []pendingRequest // unresolved confirm/ask, creation order
	fleet     []byte           // last fleetState

	conversation ring[convEntry]
	convoTotal   int // entries ever seen, to tell whether the window truncates
	transcripts  map[string]*agentLines
	tick         uint64 // recency clock for transcripts
	hub          ring[rawEntry]
	hydrated     []byte // the last hydrate frame, until the history changes
}

// convEntry is a conversation entry kept for hydrate, encoded once.
type convEntry struct {
	json []byte // the hydrate entry object
}

type pendingRequest struct {
	id    string
	frame []byte
}

// rawEntry is a broadcast frame kept for hydrate, with its time.
type rawEntry struct {
	ts    int64
	seq   uint64 // arrival order, to order lines with equal ts
	frame []byte // the whole frame, newline included
}

type agentLines struct {
	lines ring[rawEntry]
	last  uint64
}

func newReplayCache(l HistoryLimits) replayCache {
	return replayCache{
		limits:       l,
		snapshots:    make(map[string][]byte),
		conversation: newRing[convEntry](l.Conversation),
		transcripts:  make(map[string]*agentLines),
		hub:          newRing[rawEntry](l.Hub),
	}
}

// observe records what a broadcast frame means for later attaches, by its
// class (protocol.ClassOf): a frame that is part of the session's history
// (history.RecordOf makes its record, as it does for what the journal
// saves) goes to the hydrate window; the replay state (set-once snapshots,
// pending requests, the last fleetState) is kept as the newest frames.
// frame may be part of a buffer that clients' queues share
// (BroadcastBatch), so what is kept is copied: a transcript line into the
// buffer of the ring slot it takes over (no allocation once the ring is
// full), the few others cloned.
func (r *replayCache) observe(m protocol.Message, frame []byte) {
	if rec, ok := history.RecordOf(m); ok {
		r.hydrated = nil
		switch {
		case rec.Transcript != nil:
			r.addLine(rec.Transcript, frame)
		case rec.Conversation != nil:
			r.addConversation(rec.Conversation.HydrateEntry())
		case rec.Hub != nil:
			r.addHub(rec.Hub, frame)
		}
		return
	}
	switch protocol.ClassOf(m) {
	case protocol.ClassFleetState:
		r.fleet = bytes.Clone(frame)
	case protocol.ClassSnapshot:
		r.snapshots[m.MessageType()] = bytes.Clone(frame)
	case protocol.ClassRequest:
		r.observeRequest(m, frame)
	}
}

// observeRequest keeps a confirm or ask until its confirmResolved.
func (r *replayCache) observeRequest(m protocol.Message, frame []byte) {
	switch m := m.(type) {
	case *protocol.ConfirmRequest:
		r.pending = append(r.pending, pendingRequest{id: m.ID, frame: bytes.Clone(frame)})
	case *protocol.AskRequest:
		r.pending = append(r.pending, pendingRequest{id: m.ID, frame: bytes.Clone(frame)})
	case *protocol.ConfirmResolved:
		for i, p := range r.pending {
			if p.id == m.ID {
				r.pending = append(r.pending[:i], r.pending[i+1:]...)
				break
			}
		}
	}
}

// addLine keeps a transcript line as hydrate carries it
// (history.HydrateLine): most lines are kept as their broadcast frame; a
// line of the coordinator (no agent) or one too long is encoded anew.
func (r *replayCache) addLine(l *protocol.Transcript, frame []byte) {
	if e := history.HydrateLine(l); e != l || frame == nil {
		f, err := protocol.Encode(e)
		if err != nil {
			return // cannot happen: the text was cut to MaxEntryText
		}
		l, frame = e, f
	}
	r.addTranscript(l.Agent, l.Ts, frame)
}

// addHub keeps a hub event as hydrate carries it (history.HydrateHubEvent).
func (r *replayCache) addHub(ev *protocol.HubEvent, frame []byte) {
	if e := history.HydrateHubEvent(ev); e != ev || frame == nil {
		f, err := protocol.Encode(e)
		if err != nil {
			return
		}
		ev, frame = e, f
	} else {
		frame = bytes.Clone(frame)
	}
	r.hub.push(rawEntry{ts: ev.Ts, frame: frame})
}

// addConversation keeps a conversation entry, encoded as hydrate carries
// it.
func (r *replayCache) addConversation(e protocol.HydrateConversationEntry) {
	r.convoTotal++
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // as the codec: the frames are not HTML
	if enc.Encode(e) != nil {
		return
	}
	r.conversation.push(convEntry{json: bytes.TrimSuffix(b.Bytes(), []byte("\n"))})
}

// addTranscript keeps frame, the transcript frame of a line of agent.
func (r *replayCache) addTranscript(agent string, ts int64, frame []byte) {
	r.tick++
	al := r.transcripts[agent]
	if al == nil {
		if len(r.transcripts) >= r.limits.TranscriptAgents {
			r.dropQuietestAgent()
		}
		al = &agentLines{lines: newRing[rawEntry](r.limits.TranscriptPerAgent)}
		r.transcripts[agent] = al
	}
	al.last = r.tick
	if ts == 0 {
		ts = nowMs()
	}
	var slot []byte
	if old, full := al.lines.next(); full {
		slot = old.frame[:0] // only this ring ever held it
	}
	al.lines.push(rawEntry{ts: ts, seq: r.tick, frame: append(slot, frame...)})
}

func (r *replayCache) dropQuietestAgent() {
	var victim string
	oldest := ^uint64(0)
	for name, al := range r.transcripts {
		if al.last < oldest {
			victim, oldest = name, al.last
		}
	}
	delete(r.transcripts, victim)
}

// seed loads history saved by a previous process (a resumed session), as if
// it had been broadcast. total is how many conversation entries the
// session has in all, so hydrate can say it is truncated.
func (r *replayCache) seed(h *protocol.Hydrate, total int) {
	r.hydrated = nil
	for _, c := range h.Conversation {
		c.Text = protocol.CutText(c.Text, history.MaxEntryText)
		r.addConversation(c)
	}
	r.convoTotal = max(total, len(h.Conversation))
	for _, e := range h.Transcripts {
		l := &protocol.Transcript{Role: e.Role, Text: e.Text, Agent: e.Agent, Ts: e.Ts}
		if f, err := protocol.Encode(l); err == nil {
			r.addLine(l, f)
		} else if err == protocol.ErrFrameTooLarge {
			r.addLine(l, nil) // cut, then encoded
		}
	}
	for i := range h.Hub {
		if f, err := protocol.Encode(&h.Hub[i]); err == nil {
			r.addHub(&h.Hub[i], f)
		} else if err == protocol.ErrFrameTooLarge {
			r.addHub(&h.Hub[i], nil)
		}
	}
}

var transcriptPrefix = []byte(`{"type":"transcript",`)

// hydrateFrame assembles the hydrate frame from the kept frames. A hydrate
// transcript entry is the transcript frame without its "type" key (its
// fields are the entry's: role, text, agent, ts; a "stream" extension may
// follow); a hub entry is the whole hubEvent frame, as the page says.
// Conversation is small and encoded here. The newest transcript lines and
// hub events are kept when the window would not fit hydrateBudget.
func (r *replayCache) hydrateFrame() []byte {
	if r.hydrated == nil {
		r.hydrated = r.buildHydrate()
	}
	return r.hydrated
}

func (r *replayCache) buildHydrate() []byte {
	budget := hydrateBudget - hydrateOverhead

	// The newest conversation entries, in at most half the budget: a long
	// conversation must not starve the transcripts.
	convo := r.conversation.items()
	convoSize := 0
	for i := len(convo) - 1; i >= 0; i-- {
		if convoSize+len(convo[i].json)+1 > budget/2 {
			convo = convo[i+1:]
			break
		}
		convoSize += len(convo[i].json) + 1
	}
	budget -= convoSize

	// Hub events next (they are few and short), in at most a quarter of
	// the budget; the transcript lines get the rest.
	hub := r.hub.items()
	hubSize := 0
	for _, e := range hub {
		hubSize += len(e.frame)
	}
	for len(hub) > 0 && hubSize > hydrateBudget/4 {
		hubSize -= len(hub[0].frame)
		hub = hub[1:]
	}
	lines := r.newestLines(budget - hubSize)
	// As the protocol says: the conversation was capped, by the window or
	// by the budget. Transcript lines and hub events are windows anyway.
	truncated := r.convoTotal > len(convo)

	size := hydrateOverhead + convoSize + hubSize
	for _, e := range lines {
		size += len(e.frame)
	}
	b := make([]byte, 0, size)
	b = append(b, `{"type":"hydrate","conversation":[`...)
	for i, e := range convo {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, e.json...)
	}
	b = append(b, `],"transcripts":[`...)
	for i, e := range lines {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '{')
		b = append(b, trimNL(e.frame[len(transcriptPrefix):])...)
	}
	b = append(b, `],"hub":[`...)
	for i, e := range hub {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, trimNL(e.frame)...)
	}
	b = append(b, `],"truncated":`...)
	b = strconv.AppendBool(b, truncated)
	return append(b, "}\n"...)
}

// newestLines returns the newest transcript lines across agents that fit in
// budget bytes (as hydrate entries), oldest first. Each agent's ring is in
// arrival order, so a merge from the newest ends takes only what is kept:
// no sort of the whole window.
func (r *replayCache) newestLines(budget int) []rawEntry {
	cur := make(cursorHeap, 0, len(r.transcripts))
	for _, al := range r.transcripts {
		if al.lines.len() > 0 {
			cur = append(cur, cursor{lines: &al.lines})
		}
	}
	heap.Init(&cur)
	var out []rawEntry
	for len(cur) > 0 {
		c := &cur[0]
		e := c.lines.fromNewest(c.i)
		size := len(e.frame) - len(transcriptPrefix) + 1
		if size > budget {
			break
		}
		budget -= size
		out = append(out, e)
		c.i++
		if c.i == c.lines.len() {
			heap.Pop(&cur)
		} else {
			heap.Fix(&cur, 0)
		}
	}
	slices.Reverse(out)
	return out
}

// cursor walks one agent's lines from the newest.
type cursor struct {
	lines *ring[rawEntry]
	i     int // entries already taken
}

// cursorHeap orders cursors newest entry first.
type cursorHeap []cursor

func (h cursorHeap) Len() int { return len(h) }
func (h cursorHeap) Less(i, j int) bool {
	return h[i].lines.fromNewest(h[i].i).seq > h[j].lines.fromNewest(h[j].i).seq
}
func (h cursorHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *cursorHeap) Push(x any)   { *h = append(*h, x.(cursor)) }
func (h *cursorHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func trimNL(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		return b[:n-1]
	}
	return b
}

// writeTo queues the replay for c in the documented order: set-once
// snapshots, hydrate, unresolved requests in creation order, last fleetState.
// Server.mu must be held.
func (r *replayCache) writeTo(c *client) {
	for _, t := range snapshotOrder {
		if f := r.snapshots[t]; f != nil {
			c.enqueue(f)
		}
	}
	if frame := r.hydrateFrame(); frame != nil {
		c.enqueue(frame)
	}
	for _, p := range r.pending {
		c.enqueue(p.frame)
	}
	if r.fleet != nil {
		c.enqueue(r.fleet)
	}
}

// ring is a fixed-capacity FIFO that overwrites its oldest entry.
type ring[T any] struct {
	buf   []T
	start int
}

func newRing[T any](capacity int) ring[T] { return ring[T]{buf: make([]T, 0, capacity)} }

func (r *ring[T]) push(v T) {
	if len(r.buf) < cap(r.buf) {
		r.buf = append(r.buf, v)
		return
	}
	r.buf[r.start] = v
	r.start = (r.start + 1) % len(r.buf)
}

func (r *ring[T]) len() int { return len(r.buf) }

// next returns the entry the next push overwrites, if the ring is full.
func (r *ring[T]) next() (T, bool) {
	if len(r.buf) < cap(r.buf) {
		var zero T
		return zero, false
	}
	return r.buf[r.start], true
}

// fromNewest returns the entry j places before the newest (0 = newest).
func (r *ring[T]) fromNewest(j int) T {
	n := len(r.buf)
	return r.buf[(r.start+n-1-j)%n]
}

// items returns the entries oldest first, in a fresh slice.
func (r *ring[T]) items() []T {
	out := make([]T, 0, len(r.buf))
	out = append(out, r.buf[r.start:]...)
	return append(out, r.buf[:r.start]...)
}

func nowMs() int64 { return time.Now().UnixMilli() }
