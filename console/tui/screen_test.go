package tui

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/agents-fleet/fleet/protocol"
)

func TestGoldenViews(t *testing.T) {
	cases := []struct {
		name string
		w, h int
		keys []string
	}{
		{"workers_80x24", 80, 24, nil},
		{"workers_120x40", 120, 40, nil},
		{"worker_detail_80x24", 80, 24, []string{"enter"}},
		{"tasks_80x24", 80, 24, []string{"2"}},
		{"feed_80x24", 80, 24, []string{"3"}},
		{"timeline_80x24", 80, 24, []string{"4"}},
		{"requests_80x24", 80, 24, []string{"5"}},
		{"conversation_80x24", 80, 24, []string{"6"}},
		{"native_80x24", 80, 24, []string{"7"}},
		{"intel_80x24", 80, 24, []string{"8"}},
		{"help_80x24", 80, 24, []string{"?"}},
		{"picker_80x24", 80, 24, []string{"F"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, _ := loaded(false)
			m.Resize(c.w, c.h)
			press(m, c.keys...)
			golden(t, c.name, m, c.w, c.h)
		})
	}
}

// screens lists every screen: the eight views, the transcript, the help
// and the fleet picker, and the prompt, search, filter and answer lines.
var screens = [][]string{
	{"1"}, {"2"}, {"3"}, {"4"}, {"5"}, {"6"}, {"7"}, {"8"},
	{"enter"}, {"?"}, {"F"}, {":"}, {"enter", "/"}, {"3", "/"}, {"5", "down", "i"}, {"m"},
}

func TestColorViewHasStylesNoColorHasNone(t *testing.T) {
	for _, keys := range screens {
		mc, _ := loaded(true)
		mn, _ := loaded(false)
		mc.Resize(80, 24)
		mn.Resize(80, 24)
		press(mc, keys...)
		press(mn, keys...)
		color, plain := mc.View(), mn.View()
		if !strings.Contains(color, "\x1b[") {
			t.Errorf("%v: colour view has no styles", keys)
		}
		if strings.Contains(plain, "\x1b") {
			t.Errorf("%v: NoColor view has an escape: %q", keys, plain)
		}
		// Same text either way (but for the active tab's brackets, badge
		// padding and the NoColor cursor), and every styled line ends reset.
		norm := func(s string) string {
			return strings.Join(strings.Fields(strings.NewReplacer("[", " ", "]", " ", "█", " ").Replace(s)), " ")
		}
		for i, l := range lines(color) {
			if norm(ansi.Strip(l)) != norm(lines(plain)[i]) {
				t.Errorf("%v line %d: colour %q, plain %q", keys, i, ansi.Strip(l), lines(plain)[i])
			}
			if j := strings.LastIndex(l, "\x1b["); j >= 0 && !strings.HasPrefix(l[j:], "\x1b[m") && !strings.HasPrefix(l[j:], "\x1b[0m") {
				t.Errorf("%v line %d leaks a style: %q", keys, i, l)
			}
		}
		checkScreen(t, color, 80, 24)
	}
}

func TestEverySizeFits(t *testing.T) {
	sizes := [][2]int{{80, 24}, {20, 5}, {10, 3}, {1, 1}, {0, 0}, {5, 40}, {40, 10}, {200, 60}, {33, 8}}
	for _, color := range []bool{false, true} {
		for _, keys := range screens {
			m, _ := loaded(color)
			press(m, keys...)
			for _, sz := range sizes {
				m.Resize(sz[0], sz[1])
				s := m.View()
				if sz[1] == 0 {
					if s != "" {
						t.Errorf("%v at %v: %q", keys, sz, s)
					}
					continue
				}
				checkScreen(t, s, sz[0], sz[1])
			}
		}
	}
}

func TestTinyScreenKeepsTheEssentials(t *testing.T) {
	m, _ := loaded(false)
	m.Resize(20, 5)
	s := m.View()
	mustContain(t, s, "⚠ 2 requests", "›")
	m.Resize(30, 3)
	mustContain(t, m.View(), "⚠ 2 requests waiting")
}

func TestResizeReflows(t *testing.T) {
	m, _ := loaded(false)
	press(m, "5")
	m.Resize(120, 30)
	wide := m.View()
	m.Resize(40, 30)
	narrow := m.View()
	checkScreen(t, narrow, 40, 30)
	// The command is wrapped, not cut: every word is still there.
	for _, word := range strings.Fields("go test ./internal/router/... -race -count=1 && go vet ./internal/router/...") {
		if !strings.Contains(narrow, word) {
			t.Errorf("narrow requests view lost %q:\n%s", word, narrow)
		}
	}
	if len(strings.Fields(wide)) == 0 || wide == narrow {
		t.Error("resize changed nothing")
	}
}

func TestConnectionStateInHeader(t *testing.T) {
	m, c := loaded(false)
	m.Disconnected("f1", errors.New("dial unix /run/f1.sock: connection refused"), 5*time.Second)
	c.t = c.t.Add(2 * time.Second)
	s := screen(m, viewWorkers, 120, 40)
	mustContain(t, s, "RECONNECTING in 3s: dial unix /run/f1.sock: connection refused")
	m.Connected("f1", welcome())
	mustNotContain(t, screen(m, viewWorkers, 120, 40), "RECONNECTING")

	n, _ := newModel(false)
	n.SetFleets([]FleetRef{{ID: "f1", Name: "api"}})
	mustContain(t, screen(n, viewWorkers, 80, 24), "fleet api", "CONNECTING", "connecting to api…")
}

func TestStaleness(t *testing.T) {
	m, c := loaded(false)
	st := fleetState()
	st.Coordinator.StaleMs = protocol.Int(12_000)
	m.Apply("f1", st, false)
	mustContain(t, screen(m, viewWorkers, 120, 40), "stale 12s")
	mustNotContain(t, screen(m, viewWorkers, 120, 40), "no frames")
	c.t = c.t.Add(45 * time.Second)
	mustContain(t, screen(m, viewWorkers, 160, 40), "no frames for 45s", "up 25m45s")
	m.Apply("f1", &protocol.Pong{}, false)
	mustNotContain(t, screen(m, viewWorkers, 120, 40), "no frames")
}

// The header shows how much of the session's token budget is used.
func TestHeaderBudget(t *testing.T) {
	m, _ := connected(false)
	fs := fleetState()
	fs.Budget = &protocol.FleetBudget{SessionTokens: 10000, SessionUsed: 8500}
	m.Apply("f1", fs, false)
	mustContain(t, screen(m, viewWorkers, 120, 24), "budget 8.5k/10.0k (85%)")
	fs.Budget = &protocol.FleetBudget{WorkerTokens: 500}
	m.Apply("f1", fs, false)
	mustContain(t, screen(m, viewWorkers, 120, 24), "budget 500/worker")
}
