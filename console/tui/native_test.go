package tui

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/protocol"
)

func nativeReq(t *testing.T, msg protocol.Message) (*protocol.NativeRoot, protocol.NativeRequest) {
	t.Helper()
	nr, ok := msg.(*protocol.NativeRoot)
	if !ok {
		t.Fatalf("sent %#v, want a NativeRoot", msg)
	}
	req, err := protocol.ParseNativeRequest(nr.Request)
	if err != nil {
		t.Fatalf("request %s: %v", nr.Request, err)
	}
	if err := req.Validate(); err != nil {
		t.Fatalf("request %s: %v", nr.Request, err)
	}
	if nr.ID == "" {
		t.Error("native frame without a transport id")
	}
	return nr, *req
}

func TestNativeKeys(t *testing.T) {
	t.Run("refresh lists first", func(t *testing.T) {
		m, _ := connected(false)
		press(m, "7")
		nr, req := nativeReq(t, sentOnly(t, press(m, "r")))
		if req.Action != protocol.NativeList {
			t.Fatalf("first refresh sent %+v", req)
		}
		m.Apply("f1", &protocol.NativeRootResult{ID: protocol.String(nr.ID), Result: protocol.NativeResult{Kind: protocol.NativeKindRoots,
			Roots: []protocol.NativeRootInfo{{ID: "root-old", Revision: 3}, {ID: "root-new", Revision: 1, PreviousRootID: "root-old"}}}}, false)
		mustContain(t, m.View(), "▸ root-new rev 1")
		_, req = nativeReq(t, sentOnly(t, press(m, "r")))
		if req.Action != protocol.NativeStatus || req.RootID != "root-new" {
			t.Errorf("second refresh sent %+v", req)
		}
		press(m, "up")
		if _, req = nativeReq(t, sentOnly(t, press(m, "r"))); req.RootID != "root-old" {
			t.Errorf("after up, status of %q", req.RootID)
		}
	})
	t.Run("not native", func(t *testing.T) {
		m, _ := connected(false)
		press(m, "7")
		nr, _ := nativeReq(t, sentOnly(t, press(m, "r")))
		m.Apply("f1", &protocol.NativeRootResult{ID: protocol.String(nr.ID), Result: protocol.NativeResult{Kind: protocol.NativeKindError,
			Code: "native_mode_required", Message: "legacy session"}}, false)
		mustContain(t, m.View(), "not a native session")
	})
	t.Run("mutations", func(t *testing.T) {
		for _, c := range []struct{ key, action string }{{"p", "pause"}, {"u", "resume"}, {"s", "stop"}} {
			m, _ := loaded(false)
			m.Resize(100, 30)
			press(m, "7")
			if acts := press(m, c.key); len(acts) != 0 {
				t.Fatalf("%s sent without confirmation", c.key)
			}
			mustContain(t, m.View(), c.action+" root root-7a1 at revision 12? y/n")
			_, req := nativeReq(t, sentOnly(t, press(m, "y")))
			if req.Action != c.action || req.RootID != "root-7a1" || req.ExpectedRevision == nil || *req.ExpectedRevision != 12 ||
				!strings.HasPrefix(req.OperationID, "console-op-") {
				t.Errorf("%s sent %+v", c.key, req)
			}
		}
	})
	t.Run("receipt and conflict", func(t *testing.T) {
		m, _ := loaded(false)
		m.Resize(100, 30)
		press(m, "7", "p")
		nr, _ := nativeReq(t, sentOnly(t, press(m, "y")))
		mustContain(t, m.View(), "pending: pause root root-7a1 at revision 12", "waiting for the result")
		m.Apply("f1", &protocol.NativeRootResult{ID: protocol.String(nr.ID), Result: protocol.NativeResult{Kind: protocol.NativeKindReceipt,
			Receipt:            &protocol.NativeReceipt{OperationID: "console-op-x", Action: "pause", RootID: "root-7a1", Revision: 13, Status: "persisted"},
			AcknowledgmentOnly: protocol.Bool(true)}}, false)
		s := m.View()
		mustContain(t, s, "last: receipt: pause root root-7a1 → revision 13, persisted")
		mustNotContain(t, s, "pending: pause")
		if acts := press(m, "R"); len(acts) != 0 {
			t.Errorf("R retried an answered mutation: %v", acts)
		}
		press(m, "s")
		nr, _ = nativeReq(t, sentOnly(t, press(m, "y")))
		m.Apply("f1", &protocol.NativeRootResult{ID: protocol.String(nr.ID), Result: protocol.NativeResult{Kind: protocol.NativeKindError,
			Code: "revision_conflict", Message: "expected revision 12, root is at 13"}}, false)
		mustContain(t, m.View(), "conflict: the root changed since you looked (you saw revision 12)", "expected revision 12, root is at 13")
	})
	t.Run("retry uncertain with the same operation id", func(t *testing.T) {
		m, _ := loaded(false)
		m.Resize(100, 30)
		press(m, "7", "p")
		first, req1 := nativeReq(t, sentOnly(t, press(m, "y")))
		if acts := press(m, "R"); len(acts) != 0 {
			t.Errorf("R retried a mutation still in flight: %v", acts)
		}
		m.Disconnected("f1", errors.New("EOF"), time.Second)
		m.Connected("f1", welcome())
		mustContain(t, m.View(), "uncertain", "R retries it")
		second, req2 := nativeReq(t, sentOnly(t, press(m, "R")))
		if !reflect.DeepEqual(req1, req2) {
			t.Errorf("retry sent %+v, want the same body %+v", req2, req1)
		}
		if string(first.Request) != string(second.Request) || first.ID == second.ID {
			t.Errorf("retry frame %s id %s, first %s id %s", second.Request, second.ID, first.Request, first.ID)
		}
		// A late answer to the retry settles it.
		m.Apply("f1", &protocol.NativeRootResult{ID: protocol.String(second.ID), Result: protocol.NativeResult{Kind: protocol.NativeKindReceipt,
			Receipt: &protocol.NativeReceipt{Action: "pause", RootID: "root-7a1", Revision: 13, Status: "persisted"}}}, false)
		mustNotContain(t, m.View(), "uncertain")
	})
	t.Run("no status yet", func(t *testing.T) {
		m, _ := connected(false)
		press(m, "7")
		if acts := press(m, "p"); len(acts) != 0 || m.confirm != nil {
			t.Errorf("pause without a status: %v", acts)
		}
		mustContain(t, m.View(), "no root status yet: press r first")
	})
}

// After an accepted mutation the model asks for the root's status again, so
// the view shows the new revision rather than the one acted on.
func TestNativeRefreshAfterReceipt(t *testing.T) {
	m, _ := connected(false)
	m.Apply("f1", &protocol.NativeRootResult{ID: new("x"), Result: protocol.NativeResult{Kind: protocol.NativeKindRoots, Roots: []protocol.NativeRootInfo{{ID: "root-1", Revision: 1, Intent: "run", Phase: "running"}}}}, false)
	if acts := m.Pending(); len(acts) != 0 {
		t.Fatalf("nothing accepted yet, but Pending = %+v", acts)
	}
	m.Apply("f1", &protocol.NativeRootResult{ID: new("y"), Result: protocol.NativeResult{Kind: protocol.NativeKindReceipt, Receipt: &protocol.NativeReceipt{OperationID: "op", RootID: "root-1", Action: "pause", Revision: 2, Status: "persisted"}}}, false)
	acts := m.Pending()
	if len(acts) != 1 {
		t.Fatalf("after a receipt Pending = %+v, want one status request", acts)
	}
	_, req := nativeReq(t, acts[0].(Send).Msg)
	if req.Action != protocol.NativeStatus || req.RootID != "root-1" {
		t.Errorf("refresh request %+v", req)
	}
	if acts := m.Pending(); len(acts) != 0 {
		t.Errorf("the refresh was asked twice: %+v", acts)
	}
}
