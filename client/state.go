package client

import (
	"slices"

	"github.com/agents-fleet/fleet/protocol"
)

// DefaultMaxPending is State's bound on pending requests when MaxPending
// is 0: the engine's own bound, so a fleet that keeps to it never
// overflows a console.
const DefaultMaxPending = 256

// State is what a console keeps of one fleet from its frames: the newest of
// each dashboard and snapshot, and the confirm and ask requests the fleet
// is waiting on, oldest first (protocol.ClassDashboard, ClassFleetState,
// ClassSnapshot, ClassRequest). Fold every frame into it with Apply,
// replay included, and call Attached when a connection (re)starts. What a
// console shows for a request (its posts, the answer it sent) it keeps by
// id, from the Change that Apply returns.
//
// The fields are set by Apply and Attached; a console reads them. The
// frames are the ones it was given, not copies. A State is not safe for
// concurrent use.
type State struct {
	Welcome *protocol.Welcome
	// The dashboards (protocol.ClassDashboard, ClassFleetState).
	Status    *protocol.Status
	Fleet     *protocol.FleetState
	Analytics *protocol.FleetAnalytics
	// The set-once snapshots (protocol.ClassSnapshot).
	Catalog    *protocol.CommandCatalog
	Intel      *protocol.FleetIntel
	Evolution  *protocol.FleetEvolution
	Store      *protocol.FleetStore
	Experiment *protocol.FleetExperiment

	// MaxPending bounds the pending requests kept; 0 means
	// DefaultMaxPending. A request past it is counted (Overflow), not kept.
	MaxPending int

	pending  []Request
	overflow int
	// away holds the ids of the requests pending when the connection
	// (re)started that its replay has not re-sent yet; nil outside a
	// replay.
	away map[string]struct{}
}

// Request is a confirm or ask the fleet is waiting on: exactly one of
// Confirm and Ask is set.
type Request struct {
	Confirm *protocol.ConfirmRequest
	Ask     *protocol.AskRequest
}

// ID returns the request's id.
func (r Request) ID() string {
	if r.Confirm != nil {
		return r.Confirm.ID
	}
	return r.Ask.ID
}

// Kind returns protocol.KindConfirm or protocol.KindAsk.
func (r Request) Kind() protocol.ResolvedKind {
	if r.Confirm != nil {
		return protocol.KindConfirm
	}
	return protocol.KindAsk
}

// Text returns a confirm's summary or an ask's question, raw.
func (r Request) Text() string {
	if r.Confirm != nil {
		return r.Confirm.Summary
	}
	return r.Ask.Question
}

// Ts returns when the fleet asked, epoch-ms (0 when it did not say).
func (r Request) Ts() int64 {
	if r.Confirm != nil {
		return r.Confirm.Ts
	}
	return r.Ask.Ts
}

// Freeform reports whether a typed answer is taken: an ask without
// choices, or one that allows its own answer; never a confirm.
func (r Request) Freeform() bool {
	if r.Ask == nil {
		return false
	}
	return len(r.Ask.Choices) == 0 || (r.Ask.AllowFreeform != nil && *r.Ask.AllowFreeform)
}

// Message returns the request's frame.
func (r Request) Message() protocol.Message {
	if r.Confirm != nil {
		return r.Confirm
	}
	return r.Ask
}

// Change is what one frame did to the pending requests (State.Apply), so
// that a console can alert, post or say why a request went away.
type Change struct {
	// Asked is the request the frame asked (confirmRequest, askRequest).
	Asked *Request
	// Again: Asked was pending already (re-sent, or replayed after a
	// re-attach) and replaced the old copy in place; a console has shown
	// it.
	Again bool
	// Overflow: Asked was not kept, MaxPending requests being pending.
	Overflow bool
	// Resolved is the pending request a confirmResolved ended; nil when
	// that request was not pending.
	Resolved *Request
	// Gone, at replayEnd, are the requests that were pending before
	// Attached and that the replay did not re-send: resolved while the
	// console was away.
	Gone []Request
}

// Pending returns the requests the fleet is waiting on, oldest first. The
// slice is the State's own until the next Apply or Attached: read it, do
// not keep or modify it.
func (s *State) Pending() []Request { return s.pending }

// Overflow returns how many requests were not kept since the connection
// started, MaxPending being pending.
func (s *State) Overflow() int { return s.overflow }

// Attached records that a connection to the fleet (re)started with
// welcome w; its replay follows. A welcome of another session (the fleet
// restarted) drops everything of the old one. The requests pending so far
// stay until replayEnd: the replay re-sends each unresolved one, and
// Apply(replayEnd) reports the others as Gone.
func (s *State) Attached(w *protocol.Welcome) {
	if s.Welcome != nil && w != nil && s.Welcome.SessionID != w.SessionID {
		*s = State{MaxPending: s.MaxPending}
	}
	s.Welcome = w
	s.overflow = 0
	s.away = nil
	if len(s.pending) > 0 {
		s.away = make(map[string]struct{}, len(s.pending))
		for _, r := range s.pending {
			s.away[r.ID()] = struct{}{}
		}
	}
}

// Apply folds one frame (as Conn.Next returns it: a pointer) into s and
// reports what it did to the pending requests. Frames it does not keep
// change nothing.
func (s *State) Apply(m protocol.Message) Change {
	switch m := m.(type) {
	case *protocol.Welcome:
		s.Welcome = m
	case *protocol.Status:
		s.Status = m
	case *protocol.FleetState:
		s.Fleet = m
	case *protocol.FleetAnalytics:
		s.Analytics = m
	case *protocol.CommandCatalog:
		s.Catalog = m
	case *protocol.FleetIntel:
		s.Intel = m
	case *protocol.FleetEvolution:
		s.Evolution = m
	case *protocol.FleetStore:
		s.Store = m
	case *protocol.FleetExperiment:
		s.Experiment = m
	case *protocol.ConfirmRequest:
		return s.ask(Request{Confirm: m})
	case *protocol.AskRequest:
		return s.ask(Request{Ask: m})
	case *protocol.ConfirmResolved:
		return s.resolve(m.ID)
	case *protocol.ReplayEnd:
		return Change{Gone: s.dropAway()}
	}
	return Change{}
}

func (s *State) ask(r Request) Change {
	id := r.ID()
	delete(s.away, id)
	if i := s.find(id); i >= 0 {
		s.pending[i] = r
		return Change{Asked: &r, Again: true}
	}
	limit := s.MaxPending
	if limit <= 0 {
		limit = DefaultMaxPending
	}
	if len(s.pending) >= limit {
		s.overflow++
		return Change{Asked: &r, Overflow: true}
	}
	s.pending = append(s.pending, r)
	return Change{Asked: &r}
}

func (s *State) resolve(id string) Change {
	delete(s.away, id)
	i := s.find(id)
	if i < 0 {
		return Change{}
	}
	r := s.pending[i]
	s.pending = slices.Delete(s.pending, i, i+1)
	return Change{Resolved: &r}
}

// dropAway ends a replay: the requests it did not re-send are dropped and
// returned, oldest first.
func (s *State) dropAway() []Request {
	if len(s.away) == 0 {
		s.away = nil
		return nil
	}
	var gone []Request
	s.pending = slices.DeleteFunc(s.pending, func(r Request) bool {
		_, away := s.away[r.ID()]
		if away {
			gone = append(gone, r)
		}
		return away
	})
	s.away = nil
	return gone
}

func (s *State) find(id string) int {
	return slices.IndexFunc(s.pending, func(r Request) bool { return r.ID() == id })
}
