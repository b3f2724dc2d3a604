package client

import (
	"reflect"
	"slices"
	"testing"

	"github.com/agents-fleet/fleet/protocol"
)

// TestStateKeepsEveryDashboardAndSnapshot walks every registered type: the
// newest frame of each dashboard and snapshot is kept in a field of its
// own, and nothing else is, so a new snapshot type fails here until State
// keeps it.
func TestStateKeepsEveryDashboardAndSnapshot(t *testing.T) {
	for _, typ := range protocol.Types() {
		m := protocol.New(typ)
		var s State
		s.Apply(m)
		var held []string
		v := reflect.ValueOf(s)
		for i := range v.NumField() {
			f := v.Field(i)
			if v.Type().Field(i).IsExported() && f.Kind() == reflect.Pointer && !f.IsNil() {
				held = append(held, v.Type().Field(i).Name)
				if f.Interface() != m {
					t.Errorf("%s: State.%s holds another frame", typ, v.Type().Field(i).Name)
				}
			}
		}
		switch c := protocol.ClassOf(m); {
		case c == protocol.ClassDashboard, c == protocol.ClassFleetState, c == protocol.ClassSnapshot,
			typ == protocol.TypeWelcome:
			if len(held) != 1 {
				t.Errorf("%s (class %d) is kept in %v, want one field", typ, c, held)
			}
		case len(held) > 0:
			t.Errorf("%s (class %d) is kept in %v", typ, c, held)
		}
		if typ := m.MessageType(); len(s.Pending()) > 0 != (typ == protocol.TypeConfirmRequest || typ == protocol.TypeAskRequest) {
			t.Errorf("%s: pending %v", typ, s.Pending())
		}
	}
	// The newest replaces the one before.
	var s State
	s.Apply(&protocol.Status{Model: "a"})
	b := &protocol.Status{Model: "b"}
	s.Apply(b)
	if s.Status != b {
		t.Errorf("status %+v, want the newest", s.Status)
	}
}

func ids(rs []Request) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.ID()
	}
	return out
}

func TestStatePendingRequests(t *testing.T) {
	s := State{MaxPending: 3}
	if ch := s.Apply(&protocol.ConfirmRequest{ID: "c1", Summary: "ok?", Ts: 1}); ch.Asked == nil || ch.Asked.ID() != "c1" || ch.Again || ch.Overflow {
		t.Fatalf("first ask: %+v", ch)
	}
	s.Apply(&protocol.AskRequest{ID: "a1", Question: "which?", Kind: "choice"})
	s.Apply(&protocol.ConfirmRequest{ID: "c2", Summary: "and this?"})
	// A re-sent request replaces its copy in place.
	again := &protocol.ConfirmRequest{ID: "c1", Summary: "ok now?", Ts: 1}
	if ch := s.Apply(again); ch.Asked == nil || !ch.Again {
		t.Fatalf("re-sent: %+v", ch)
	}
	if got := ids(s.Pending()); !slices.Equal(got, []string{"c1", "a1", "c2"}) || s.Pending()[0].Confirm != again {
		t.Fatalf("pending %v", got)
	}
	// Past MaxPending a request is counted, not kept.
	if ch := s.Apply(&protocol.AskRequest{ID: "a2", Question: "more?"}); !ch.Overflow || ch.Asked.ID() != "a2" {
		t.Fatalf("over the bound: %+v", ch)
	}
	if s.Overflow() != 1 || len(s.Pending()) != 3 {
		t.Fatalf("overflow %d, pending %v", s.Overflow(), ids(s.Pending()))
	}
	ch := s.Apply(&protocol.ConfirmResolved{ID: "a1", Approved: true, Kind: protocol.KindAsk})
	if ch.Resolved == nil || ch.Resolved.ID() != "a1" || ch.Resolved.Kind() != protocol.KindAsk {
		t.Fatalf("resolved: %+v", ch)
	}
	if ch := s.Apply(&protocol.ConfirmResolved{ID: "a1"}); ch.Resolved != nil {
		t.Fatalf("resolved twice: %+v", ch)
	}
	if got := ids(s.Pending()); !slices.Equal(got, []string{"c1", "c2"}) {
		t.Fatalf("pending %v", got)
	}
}

// TestStateReattach: the replay after a re-attach re-sends what is still
// pending; replayEnd reports the rest as gone.
func TestStateReattach(t *testing.T) {
	var s State
	s.Attached(&protocol.Welcome{SessionID: "s1"})
	s.Apply(&protocol.ConfirmRequest{ID: "c1"})
	s.Apply(&protocol.ConfirmRequest{ID: "c2"})
	s.Apply(&protocol.AskRequest{ID: "a1"})
	s.Apply(&protocol.Status{Model: "m"})
	if ch := s.Apply(&protocol.ReplayEnd{}); ch.Gone != nil {
		t.Fatalf("gone on the first attach: %+v", ch)
	}

	w := &protocol.Welcome{SessionID: "s1"}
	s.Attached(w)
	if s.Welcome != w || s.Status == nil || len(s.Pending()) != 3 {
		t.Fatalf("a re-attach to the same session dropped state: %+v", s)
	}
	if ch := s.Apply(&protocol.ConfirmRequest{ID: "c2"}); !ch.Again {
		t.Fatalf("replayed request: %+v", ch)
	}
	s.Apply(&protocol.ConfirmRequest{ID: "c3"})
	ch := s.Apply(&protocol.ReplayEnd{})
	if got := ids(ch.Gone); !slices.Equal(got, []string{"c1", "a1"}) {
		t.Fatalf("gone %v, want c1 a1", got)
	}
	if got := ids(s.Pending()); !slices.Equal(got, []string{"c2", "c3"}) {
		t.Fatalf("pending %v", got)
	}
	// A request resolved during the next replay is not gone twice.
	s.Attached(w)
	s.Apply(&protocol.ConfirmResolved{ID: "c2"})
	if ch := s.Apply(&protocol.ReplayEnd{}); !slices.Equal(ids(ch.Gone), []string{"c3"}) {
		t.Fatalf("gone %v, want c3", ids(ch.Gone))
	}

	// Another session: nothing of the old one stays.
	s.MaxPending = 7
	s.Apply(&protocol.ConfirmRequest{ID: "old"})
	s.Attached(&protocol.Welcome{SessionID: "s2"})
	if s.Status != nil || len(s.Pending()) != 0 || s.Welcome.SessionID != "s2" || s.MaxPending != 7 {
		t.Fatalf("a new session kept the old one's state: %+v", s)
	}
	if ch := s.Apply(&protocol.ReplayEnd{}); ch.Gone != nil {
		t.Fatalf("gone after a new session: %+v", ch)
	}
}

func TestRequestAccessors(t *testing.T) {
	c := Request{Confirm: &protocol.ConfirmRequest{ID: "c", Summary: "ok?", Ts: 7}}
	if c.ID() != "c" || c.Kind() != protocol.KindConfirm || c.Text() != "ok?" || c.Ts() != 7 || c.Freeform() || c.Message() != c.Confirm {
		t.Errorf("confirm accessors: %+v", c)
	}
	free := Request{Ask: &protocol.AskRequest{ID: "a", Question: "why?", Ts: 8}}
	if free.ID() != "a" || free.Kind() != protocol.KindAsk || free.Text() != "why?" || free.Ts() != 8 || !free.Freeform() || free.Message() != free.Ask {
		t.Errorf("ask accessors: %+v", free)
	}
	choice := Request{Ask: &protocol.AskRequest{ID: "b", Choices: []protocol.AskChoiceOption{{Label: "x", Value: "x"}}}}
	if choice.Freeform() {
		t.Error("a choice ask without allowFreeform takes free text")
	}
	choice.Ask.AllowFreeform = protocol.Bool(true)
	if !choice.Freeform() {
		t.Error("a choice ask with allowFreeform does not take free text")
	}
}
