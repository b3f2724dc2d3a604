package tui

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/protocol"
)

func TestRequestKeys(t *testing.T) {
	t.Run("confirm", func(t *testing.T) {
		for _, c := range []struct {
			key     string
			approve bool
		}{{"y", true}, {"n", false}} {
			m, _ := loaded(false)
			press(m, "5")
			msg := sentOnly(t, press(m, c.key))
			want := &protocol.ConfirmResponse{ID: "c-17", Approve: c.approve}
			if !reflect.DeepEqual(msg, want) {
				t.Errorf("%s sent %#v, want %#v", c.key, msg, want)
			}
			mustContain(t, m.View(), "answering…")
			if acts := press(m, "y"); len(acts) != 0 {
				t.Errorf("answered twice: %v", acts)
			}
		}
	})
	ask := func(keys ...string) (*Model, []Action) {
		m, _ := loaded(false)
		m.Resize(80, 24)
		press(m, "5", "down")
		return m, press(m, keys...)
	}
	t.Run("choice by number", func(t *testing.T) {
		m, acts := ask("2")
		if msg := sentOnly(t, acts); !reflect.DeepEqual(msg, &protocol.AskResponse{ID: "a-4", Text: "sqlite"}) {
			t.Errorf("sent %#v", msg)
		}
		mustContain(t, m.View(), "answering… (SQLite)")
		m.Apply("f1", &protocol.ConfirmResolved{ID: "a-4", Approved: true, Kind: protocol.KindAsk, Reason: protocol.ReasonAnswered}, false)
		mustNotContain(t, m.View(), "a-4", "dismissed")
	})
	t.Run("choice highlighted", func(t *testing.T) {
		m, acts := ask("right", "right", "left")
		if len(acts) != 0 {
			t.Fatalf("moving sent %v", acts)
		}
		mustContain(t, m.View(), "  ▸ 1) Postgres")
		if msg := sentOnly(t, press(m, "enter")); !reflect.DeepEqual(msg, &protocol.AskResponse{ID: "a-4", Text: "pg"}) {
			t.Errorf("sent %#v", msg)
		}
	})
	t.Run("enter with nothing highlighted", func(t *testing.T) {
		m, acts := ask("enter")
		if len(acts) != 0 {
			t.Errorf("sent %v", acts)
		}
		mustContain(t, m.View(), "pick a choice first")
	})
	t.Run("no such choice", func(t *testing.T) {
		m, acts := ask("7")
		if len(acts) != 0 || m.view != viewRequests {
			t.Errorf("7 on a 2-choice ask: %v, view %d", acts, m.view)
		}
	})
	t.Run("freeform", func(t *testing.T) {
		m, acts := ask("i")
		if len(acts) != 0 {
			t.Fatal(acts)
		}
		typeText(m, "MySQL, 8.4")
		mustContain(t, m.View(), "answer a-4: MySQL, 8.4█")
		if msg := sentOnly(t, press(m, "enter")); !reflect.DeepEqual(msg, &protocol.AskResponse{ID: "a-4", Text: "MySQL, 8.4"}) {
			t.Errorf("sent %#v", msg)
		}
	})
	t.Run("freeform refused", func(t *testing.T) {
		m, _ := connected(false)
		a := askReq()
		a.AllowFreeform = nil
		m.Apply("f1", a, false)
		press(m, "5", "i")
		if m.focus != inputNone {
			t.Error("i opened an answer line for a choice-only ask")
		}
		mustContain(t, m.View(), "takes one of its choices")
	})
	t.Run("freeform only", func(t *testing.T) {
		m, _ := connected(false)
		m.Apply("f1", &protocol.AskRequest{ID: "q", Question: "Name the release?", Kind: "freeform"}, false)
		press(m, "5", "i")
		typeText(m, "v2")
		if msg := sentOnly(t, press(m, "enter")); !reflect.DeepEqual(msg, &protocol.AskResponse{ID: "q", Text: "v2"}) {
			t.Errorf("sent %#v", msg)
		}
	})
	t.Run("digits switch views on a confirm", func(t *testing.T) {
		m, _ := loaded(false)
		press(m, "5", "3")
		if m.view != viewFeed {
			t.Errorf("view %d", m.view)
		}
	})
	t.Run("disconnected", func(t *testing.T) {
		m, _ := loaded(false)
		m.Disconnected("f1", errors.New("EOF"), time.Second)
		press(m, "5")
		if acts := press(m, "y"); len(acts) != 0 {
			t.Errorf("sent while disconnected: %v", acts)
		}
		mustContain(t, m.View(), "not connected to api-overhaul")
	})
}

func TestRequestShownInFull(t *testing.T) {
	m, _ := connected(false)
	long := strings.Repeat("rm -rf ./build/artifacts/cache ", 12) + "END"
	m.Apply("f1", &protocol.ConfirmRequest{ID: "c-1", Summary: "Approve this command?\n" + long}, false)
	m.Resize(60, 24)
	press(m, "5")
	s := m.View()
	flat := strings.Join(strings.Fields(s), " ")
	mustContain(t, flat, strings.TrimSpace(strings.Join(strings.Fields(long), " ")))

	// Taller than the screen: pgdn reaches the rest.
	m.Apply("f1", &protocol.ConfirmRequest{ID: "c-2", Summary: strings.Repeat("line\n", 40) + "LAST LINE"}, false)
	press(m, "down")
	s = m.View()
	mustContain(t, s, "▸ [2/2] confirm c-2", "more lines (pgdn)")
	mustNotContain(t, s, "LAST LINE")
	press(m, "pgdown", "pgdown", "pgdown")
	mustContain(t, m.View(), "LAST LINE", "y approve · n deny")
}

func TestBannerAndJump(t *testing.T) {
	m, _ := loaded(false)
	m.Resize(80, 24)
	for _, v := range []string{"1", "2", "3", "4", "6", "8"} {
		press(m, v)
		mustContain(t, m.View(), "⚠ 2 requests waiting — press 5 (or r): Run a shell command")
	}
	press(m, "7")
	mustContain(t, m.View(), "⚠ 2 requests waiting — press 5: ")
	press(m, "2", "r")
	if m.view != viewRequests {
		t.Fatalf("r went to view %d", m.view)
	}
	mustNotContain(t, m.View(), "⚠ 2 requests")
	mustContain(t, m.View(), "[5 Requests(2)]")
	press(m, "y", "down", "1")
	m.Apply("f1", &protocol.ConfirmResolved{ID: "c-17", Approved: true}, false)
	m.Apply("f1", &protocol.ConfirmResolved{ID: "a-4", Approved: true}, false)
	press(m, "1")
	mustNotContain(t, m.View(), "⚠")
}

func TestConfirmResolved(t *testing.T) {
	reasons := []struct {
		reason protocol.ResolvedReason
		notice string
	}{
		{protocol.ReasonSuperseded, "dismissed: answered elsewhere"},
		{protocol.ReasonAnswered, "dismissed: answered elsewhere"},
		{"", "dismissed: answered elsewhere"},
		{protocol.ReasonExpired, "dismissed: expired"},
		{protocol.ReasonCancelled, "dismissed: cancelled"},
	}
	for _, r := range reasons {
		t.Run(string(r.reason), func(t *testing.T) {
			m, _ := loaded(false)
			m.Apply("f1", &protocol.ConfirmResolved{ID: "c-17", Kind: protocol.KindConfirm, Reason: r.reason}, false)
			if p := m.cur().fold.Pending(); len(p) != 1 || p[0].ID() != "a-4" {
				t.Fatalf("pending after resolve: %d", len(p))
			}
			s := screen(m, viewRequests, 100, 30)
			mustContain(t, s, r.notice+" (c-17) — Run a shell command in worker router: go test", "1 request waiting")
			mustNotContain(t, s, "confirm c-17")
		})
	}
	t.Run("ours", func(t *testing.T) {
		m, _ := loaded(false)
		m.view = viewRequests
		acts := press(m, "y")
		if len(acts) != 1 {
			t.Fatalf("y: %v", acts)
		}
		mustContain(t, screen(m, viewRequests, 100, 30), "answering… (approve)")
		// The fleet reports our own answer as superseded to the others.
		m.Apply("f1", &protocol.ConfirmResolved{ID: "c-17", Approved: true, Reason: protocol.ReasonSuperseded}, false)
		mustNotContain(t, screen(m, viewRequests, 100, 30), "dismissed", "c-17")
	})
	t.Run("replay", func(t *testing.T) {
		m, _ := loaded(false)
		m.Apply("f1", &protocol.ConfirmResolved{ID: "c-17", Reason: protocol.ReasonExpired}, true)
		mustNotContain(t, screen(m, viewRequests, 100, 30), "dismissed", "c-17")
	})
	t.Run("last five", func(t *testing.T) {
		m, _ := connected(false)
		for i := range 8 {
			id := fmt.Sprintf("c-%d", i)
			m.Apply("f1", &protocol.ConfirmRequest{ID: id, Summary: "job " + id}, false)
			m.Apply("f1", &protocol.ConfirmResolved{ID: id, Reason: protocol.ReasonExpired}, false)
		}
		s := screen(m, viewRequests, 100, 30)
		if n := strings.Count(s, "dismissed: expired"); n != maxDismissed {
			t.Errorf("%d notices, want %d:\n%s", n, maxDismissed, s)
		}
		mustContain(t, s, "job c-7", "job c-3")
		mustNotContain(t, s, "job c-2")
	})
}

func TestRequestResolvedWhileAwayGoesOnReattach(t *testing.T) {
	m, _ := loaded(false)
	m.Disconnected("f1", errors.New("EOF"), time.Second)
	// The confirm was answered on the fleet's terminal meanwhile: the
	// replay re-sends only the ask.
	m.Connected("f1", welcome())
	for _, f := range replayFrames() {
		if _, ok := f.(*protocol.ConfirmRequest); !ok {
			m.Apply("f1", f, true)
		}
	}
	if p := m.cur().fold.Pending(); len(p) != 1 || p[0].ID() != "a-4" {
		t.Fatalf("pending after re-attach: %d", len(p))
	}
	mustNotContain(t, screen(m, viewRequests, 100, 30), "c-17")
	if a := m.Alerts(); len(a) != 0 {
		t.Errorf("the replay alerted for a request already shown: %q", a)
	}
}
