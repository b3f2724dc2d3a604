package tui

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/protocol"
)

func TestSetFleetsKeepsStateByID(t *testing.T) {
	m, _ := loaded(false)
	m.SetFleets([]FleetRef{{ID: "f0", Name: "new"}, {ID: "f1", Name: "api"}})
	if m.Selected() != "f1" || len(m.cur().fold.Pending()) != 2 {
		t.Errorf("selected %q, pending %d", m.Selected(), len(m.cur().fold.Pending()))
	}
	// The selected fleet left the registry (it stopped): it stays selected,
	// shown as stopped, rather than the console jumping to a fleet it is
	// not attached to; a fleet that is neither listed nor selected goes.
	m.SetFleets([]FleetRef{{ID: "f0", Name: "new"}})
	m.Disconnected("f1", errStopped, 0)
	if m.Selected() != "f1" || m.fleets["f2"] != nil {
		t.Errorf("after f1 stopped: selected %q, f2 kept %v", m.Selected(), m.fleets["f2"] != nil)
	}
	s := screen(m, viewWorkers, 100, 24)
	mustContain(t, s, "fleet api-overhaul", "RECONNECTING…: the fleet stopped; waiting for it to start again")
	mustNotContain(t, s, "fleet new", "CONNECTING ")
	// Following it to its successor drops the stopped one.
	m.Select("f0")
	if m.fleets["f1"] != nil {
		t.Error("the stopped fleet is kept after the console moved on")
	}
	mustContain(t, screen(m, viewWorkers, 100, 24), "fleet new", "CONNECTING", "connecting to new…")
	// Frames the old connection still delivers do not bring it back (its
	// requests would count as waiting in another fleet).
	m.Apply("f1", askReq(), false)
	if m.fleets["f1"] != nil {
		t.Error("a frame of the stopped fleet brought it back")
	}
	mustNotContain(t, screen(m, viewWorkers, 100, 24), "waiting in other fleets")
}

func TestAlerts(t *testing.T) {
	t.Run("unfocused", func(t *testing.T) {
		m, _ := connected(false)
		m.view = viewRequests
		m.Focused(false)
		m.Apply("f1", confirmReq(), false)
		// The summary's line break becomes a space; the text is cut to 120 runes.
		full := "fleet api-overhaul: needs input: Run a shell command in worker router: go test ./internal/router/... -race -count=1 && go vet ./internal/router/..."
		want := []string{"\a", "\x1b]9;" + string([]rune(full)[:maxAlertRunes-1]) + "…\x07"}
		if got := m.Alerts(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("alerts %q, want %q", got, want)
		}
		if got := m.Alerts(); len(got) != 0 {
			t.Errorf("alerts not cleared: %q", got)
		}
		m.Apply("f1", confirmReq(), false) // the same request again
		if got := m.Alerts(); len(got) != 0 {
			t.Errorf("second alert for one request: %q", got)
		}
	})
	t.Run("focused on requests", func(t *testing.T) {
		m, _ := connected(false)
		m.view = viewRequests
		m.Apply("f1", askReq(), false)
		if got := m.Alerts(); len(got) != 0 {
			t.Errorf("alert while watching the queue: %q", got)
		}
	})
	t.Run("other view", func(t *testing.T) {
		m, _ := connected(false)
		m.Apply("f1", askReq(), false)
		if got := m.Alerts(); len(got) != 2 || !strings.Contains(got[1], "needs input: Which database") {
			t.Errorf("alerts %q", got)
		}
	})
	t.Run("other fleet", func(t *testing.T) {
		m, _ := connected(false)
		m.SetFleets([]FleetRef{{ID: "f1"}, {ID: "f2", Name: "web"}})
		m.view = viewRequests
		m.Apply("f2", askReq(), false)
		if got := m.Alerts(); len(got) != 2 || !strings.Contains(got[1], "fleet web: needs input") {
			t.Errorf("alerts %q", got)
		}
	})
	t.Run("replay", func(t *testing.T) {
		m, _ := connected(false)
		m.Focused(false)
		m.Apply("f1", askReq(), true)
		if got := m.Alerts(); len(got) != 0 {
			t.Errorf("replay alerted: %q", got)
		}
	})
	modes := []struct {
		mode NotifyMode
		want string
	}{
		{NotifyBell, `["\a"]`},
		{NotifyOSC777, `["\x1b]777;notify;fleet console;fleet api-overhaul: needs input: Which database should the migration target?\a"]`},
		{NotifyBell | NotifyOSC9 | NotifyOSC777, `["\a" "\x1b]9;fleet api-overhaul: needs input: Which database should the migration target?\a" "\x1b]777;notify;fleet console;fleet api-overhaul: needs input: Which database should the migration target?\a"]`},
		{NotifyOff | NotifyBell, `[]`},
	}
	for _, c := range modes {
		m := New(Options{Now: func() time.Time { return t0 }, NoColor: true, Notify: c.mode})
		m.Connected("f1", welcome())
		m.Apply("f1", askReq(), false)
		if got := fmt.Sprintf("%q", m.Alerts()); got != c.want {
			t.Errorf("mode %b: %s, want %s", c.mode, got, c.want)
		}
	}
}

func TestAlertTextClipped(t *testing.T) {
	m, _ := connected(false)
	m.Apply("f1", &protocol.ConfirmRequest{ID: "c", Summary: strings.Repeat("é", 500) + hostile}, false)
	a := m.Alerts()
	if len(a) != 2 {
		t.Fatalf("alerts %q", a)
	}
	body := strings.TrimSuffix(strings.TrimPrefix(a[1], "\x1b]9;"), "\x07")
	if n := len([]rune(body)); n != maxAlertRunes || !strings.HasSuffix(body, "…") {
		t.Errorf("alert text is %d runes: %q", n, body)
	}
}
