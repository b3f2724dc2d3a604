package web

import (
	"encoding/json"
	"sync"

	"github.com/agents-fleet/fleet/protocol"
)

// A mirror keeps what the server has seen of one fleet's control-socket
// stream, so that every page that opens (or reopens) gets the replay the
// protocol would give a new connection, without one: the welcome, the
// newest snapshot of each kind, the history (hydrate, then the saved frames
// since, bounded), the open requests in creation order, the newest
// dashboards and fleetState. What a frame is comes from protocol.ClassOf,
// as everywhere else.
type mirror struct {
	mu        sync.Mutex
	gen       int    // bumped by reset: a new connection, a new replay
	welcome   []byte // the welcome frame of the current connection
	snapshots map[string][]byte
	hydrate   []byte
	history   ring // saved frames since hydrate
	requests  []request
	dash      map[string][]byte // status, fleetAnalytics, fleetState
	subs      map[*sub]struct{}
}

// request is an open confirmRequest or askRequest.
type request struct {
	id    string
	frame []byte
}

// maxHistory bounds the saved frames a mirror keeps after hydrate; a page
// that opens later is told how many it missed.
const maxHistory = 5000

// subQueue bounds the frames a page's stream holds that it has not sent
// yet, beyond room for its replay. A page that falls that far behind is
// dropped; its EventSource reconnects and gets a fresh replay, so it
// misses nothing for long.
const subQueue = 4096

// sub is one page's stream: frames to send, in order, until closed.
type sub struct {
	ch   chan event
	gone chan struct{} // closed when the mirror dropped it
}

// event is what a page's stream carries: a frame, or a word from the
// server (kind names it: "reset", "replayEnd", "conn").
type event struct {
	kind string
	data []byte
}

func newMirror() *mirror {
	return &mirror{snapshots: map[string][]byte{}, dash: map[string][]byte{}, subs: map[*sub]struct{}{},
		history: ring{max: maxHistory}}
}

// reset starts over for a new connection whose welcome is welcome: every
// page is told to clear what it shows, then gets the new replay as the
// connection's frames arrive.
func (m *mirror) reset(welcome []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gen++
	m.welcome = welcome
	clear(m.snapshots)
	clear(m.dash)
	m.hydrate = nil
	m.history = ring{max: maxHistory}
	m.requests = nil
	m.sendLocked(event{kind: "reset"})
	m.sendLocked(event{kind: "frame", data: welcome})
}

// add takes one frame of the connection, raw as it came, and hands it to
// every page.
func (m *mirror) add(msg protocol.Message, raw []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	typ := msg.MessageType()
	switch c := protocol.ClassOf(msg); {
	case c == protocol.ClassSnapshot:
		m.snapshots[typ] = raw
	case c == protocol.ClassBackfill:
		m.hydrate = raw
		m.history = ring{max: maxHistory}
	case c.Saved():
		m.history.push(raw)
	case c == protocol.ClassDashboard || c == protocol.ClassFleetState:
		m.dash[typ] = raw
	case c == protocol.ClassRequest:
		switch r := msg.(type) {
		case *protocol.ConfirmRequest:
			m.requests = append(m.requests, request{r.ID, raw})
		case *protocol.AskRequest:
			m.requests = append(m.requests, request{r.ID, raw})
		case *protocol.ConfirmResolved:
			for i, q := range m.requests {
				if q.id == r.ID {
					m.requests = append(m.requests[:i:i], m.requests[i+1:]...)
					break
				}
			}
		}
	}
	m.sendLocked(event{kind: "frame", data: raw})
}

// replayEnd tells the pages the connection's replay is over.
func (m *mirror) replayEnd() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sendLocked(event{kind: "replayEnd"})
}

// conn tells the pages how the connection to the fleet stands.
func (m *mirror) conn(state connState) {
	data, _ := json.Marshal(state)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sendLocked(event{kind: "conn", data: data})
}

// sendLocked queues e for every page, dropping a page whose queue is full.
func (m *mirror) sendLocked(e event) {
	for s := range m.subs {
		select {
		case s.ch <- e:
		default:
			delete(m.subs, s)
			close(s.gone)
		}
	}
}

// subscribe returns a new page's stream, its replay already queued: reset,
// then what a new connection would be replayed, in the protocol's order
// (welcome, snapshots, hydrate and the history since, open requests,
// dashboards and fleetState, replayEnd when there is a connection), and a
// conn event with state. missed is how many saved frames the history no
// longer holds.
func (m *mirror) subscribe(state connState) *sub {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := &sub{ch: make(chan event, subQueue+maxHistory+64), gone: make(chan struct{})}
	s.ch <- event{kind: "reset"}
	if m.welcome != nil {
		s.ch <- event{kind: "frame", data: m.welcome}
		for _, typ := range protocol.SnapshotTypes() {
			if f := m.snapshots[typ]; f != nil {
				s.ch <- event{kind: "frame", data: f}
			}
		}
		if m.hydrate != nil {
			s.ch <- event{kind: "frame", data: m.hydrate}
		}
		if n := m.history.dropped; n > 0 {
			data, _ := json.Marshal(map[string]int{"missed": n})
			s.ch <- event{kind: "missed", data: data}
		}
		m.history.each(func(f []byte) { s.ch <- event{kind: "frame", data: f} })
		for _, r := range m.requests {
			s.ch <- event{kind: "frame", data: r.frame}
		}
		for _, typ := range []string{protocol.TypeStatus, protocol.TypeFleetAnalytics, protocol.TypeFleetState} {
			if f := m.dash[typ]; f != nil {
				s.ch <- event{kind: "frame", data: f}
			}
		}
		s.ch <- event{kind: "replayEnd"}
	}
	data, _ := json.Marshal(state)
	s.ch <- event{kind: "conn", data: data}
	m.subs[s] = struct{}{}
	return s
}

// unsubscribe drops s; it is safe after the mirror dropped it.
func (m *mirror) unsubscribe(s *sub) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.subs[s]; ok {
		delete(m.subs, s)
		close(s.gone)
	}
}

// ring is a bounded FIFO of frames that counts what it dropped.
type ring struct {
	max     int
	buf     [][]byte
	start   int
	dropped int
}

func (r *ring) push(f []byte) {
	if len(r.buf) < r.max {
		r.buf = append(r.buf, f)
		return
	}
	r.buf[r.start] = f
	r.start = (r.start + 1) % r.max
	r.dropped++
}

func (r *ring) each(fn func([]byte)) {
	for i := range r.buf {
		fn(r.buf[(r.start+i)%len(r.buf)])
	}
}
