package controlsock

import (
	"slices"
	"time"

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
var snapshotOrder = []string{
	protocol.TypeCommandCatalog,
	protocol.TypeFleetIntel,
	protocol.TypeFleetEvolution,
	protocol.TypeFleetStore,
	protocol.TypeFleetExperiment,
}

// replayCache is what a late-attaching client is sent before replayEnd. It
// holds the same encoded bytes that were broadcast, so replay costs no
// encoding except for hydrate. Guarded by Server.mu.
type replayCache struct {
	limits    HistoryLimits
	snapshots map[string][]byte
	pending   []pendingRequest // unresolved confirm/ask, creation order
	fleet     []byte           // last fleetState

	conversation ring[protocol.HydrateConversationEntry]
	convoTotal   int // entries ever seen, to tell whether the window truncates
	transcripts  map[string]*agentLines
	tick         uint64 // recency clock for transcripts
	hub          ring[protocol.HubEvent]
}

type pendingRequest struct {
	id    string
	frame []byte
}

type agentLines struct {
	lines ring[protocol.HydrateTranscriptEntry]
	last  uint64
}

func newReplayCache(l HistoryLimits) replayCache {
	return replayCache{
		limits:       l,
		snapshots:    make(map[string][]byte),
		conversation: newRing[protocol.HydrateConversationEntry](l.Conversation),
		transcripts:  make(map[string]*agentLines),
		hub:          newRing[protocol.HubEvent](l.Hub),
	}
}

// observe records what a broadcast frame means for later attaches.
func (r *replayCache) observe(m protocol.Message, frame []byte) {
	switch m := m.(type) {
	case *protocol.Transcript:
		r.addTranscript(m)
	case *protocol.UserMessage:
		r.convoTotal++
		r.conversation.push(protocol.HydrateConversationEntry{Role: "user", Text: m.Text, Ts: nowMs()})
	case *protocol.Reply:
		ts := m.Ts
		if ts == 0 {
			ts = nowMs()
		}
		r.convoTotal++
		r.conversation.push(protocol.HydrateConversationEntry{Role: "assistant", Text: m.Text, Ts: ts})
	case *protocol.HubEvent:
		r.hub.push(*m)
	case *protocol.FleetState:
		r.fleet = frame
	case *protocol.ConfirmRequest:
		r.pending = append(r.pending, pendingRequest{id: m.ID, frame: frame})
	case *protocol.AskRequest:
		r.pending = append(r.pending, pendingRequest{id: m.ID, frame: frame})
	case *protocol.ConfirmResolved:
		for i, p := range r.pending {
			if p.id == m.ID {
				r.pending = append(r.pending[:i], r.pending[i+1:]...)
				break
			}
		}
	case *protocol.CommandCatalog, *protocol.FleetIntel, *protocol.FleetEvolution,
		*protocol.FleetStore, *protocol.FleetExperiment:
		r.snapshots[m.MessageType()] = frame
	}
}

func (r *replayCache) addTranscript(m *protocol.Transcript) {
	agent := m.Agent
	if agent == "" {
		agent = "coordinator"
	}
	r.tick++
	al := r.transcripts[agent]
	if al == nil {
		if len(r.transcripts) >= r.limits.TranscriptAgents {
			r.dropQuietestAgent()
		}
		al = &agentLines{lines: newRing[protocol.HydrateTranscriptEntry](r.limits.TranscriptPerAgent)}
		r.transcripts[agent] = al
	}
	al.last = r.tick
	ts := m.Ts
	if ts == 0 {
		ts = nowMs()
	}
	al.lines.push(protocol.HydrateTranscriptEntry{Agent: agent, Role: m.Role, Text: m.Text, Ts: ts})
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
	for _, c := range h.Conversation {
		r.conversation.push(c)
	}
	r.convoTotal = max(total, len(h.Conversation))
	for _, l := range h.Transcripts {
		r.addTranscript(&protocol.Transcript{Role: l.Role, Text: l.Text, Agent: l.Agent, Ts: l.Ts})
	}
	for _, ev := range h.Hub {
		r.hub.push(ev)
	}
}

// hydrate builds the history batch for one attach.
func (r *replayCache) hydrate() *protocol.Hydrate {
	h := &protocol.Hydrate{
		Conversation: r.conversation.items(),
		Hub:          r.hub.items(),
		Truncated:    r.convoTotal > r.conversation.len(),
	}
	// Merge agents' lines by time so a console can render them in order.
	n := 0
	for _, al := range r.transcripts {
		n += al.lines.len()
	}
	h.Transcripts = make([]protocol.HydrateTranscriptEntry, 0, n)
	for _, al := range r.transcripts {
		h.Transcripts = append(h.Transcripts, al.lines.items()...)
	}
	sortTranscripts(h.Transcripts)
	return h
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
	if frame, err := protocol.Encode(r.hydrate()); err == nil {
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

// items returns the entries oldest first, in a fresh slice.
func (r *ring[T]) items() []T {
	out := make([]T, 0, len(r.buf))
	out = append(out, r.buf[r.start:]...)
	return append(out, r.buf[:r.start]...)
}

func sortTranscripts(lines []protocol.HydrateTranscriptEntry) {
	slices.SortStableFunc(lines, func(a, b protocol.HydrateTranscriptEntry) int {
		switch {
		case a.Ts < b.Ts:
			return -1
		case a.Ts > b.Ts:
			return 1
		}
		return 0
	})
}

func nowMs() int64 { return time.Now().UnixMilli() }
