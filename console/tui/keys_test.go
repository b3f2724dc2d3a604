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

func TestGlobalKeys(t *testing.T) {
	m, _ := loaded(false)
	if acts := press(m, "q"); !reflect.DeepEqual(acts, []Action{Quit{}}) {
		t.Errorf("q: %v", acts)
	}
	if acts := m.Key(Key{Name: "q"}); !reflect.DeepEqual(acts, []Action{Quit{}}) {
		t.Errorf("q as a name: %v", acts)
	}
	if acts := press(m, "ctrl+c"); !reflect.DeepEqual(acts, []Action{Quit{}}) {
		t.Errorf("ctrl+c: %v", acts)
	}
	if acts := m.Key(Key{Text: "quit"}); len(acts) != 0 {
		t.Errorf("a paste outside the prompt acted: %v", acts)
	}
	for i := 1; i <= 8; i++ {
		press(m, fmt.Sprint(i))
		if m.view != view(i) {
			t.Errorf("%d went to view %d", i, m.view)
		}
	}
	press(m, "tab")
	if m.view != viewWorkers {
		t.Errorf("tab from the last view: %d", m.view)
	}
	press(m, "shift+tab")
	if m.view != viewIntel {
		t.Errorf("shift+tab from the first view: %d", m.view)
	}
	press(m, "tab", "tab")
	if m.view != viewTasks {
		t.Errorf("tab tab: %d", m.view)
	}
	press(m, "?")
	mustContain(t, m.View(), "jump to Requests", "retry uncertain mutation")
	press(m, "3") // ignored while help is open
	if m.view != viewTasks || !m.help {
		t.Errorf("help let 3 through")
	}
	press(m, "esc")
	press(m, "?", "?")
	if m.help {
		t.Error("? did not close the help")
	}
}

func TestHelpListsEveryKey(t *testing.T) {
	m, _ := loaded(false)
	m.Resize(200, 60)
	press(m, "?")
	s := m.View()
	for _, k := range []string{"1-8 tab", " r ", ": i /", "F ] [", "q ctrl+c", "↑ ↓ enter", "d t", "m a p x",
		"f end home", "/ n N", "/ k", "y n", "1-9", "←→ enter", " i ", "r ↑ ↓", "p u s", " R ", "↑ ↓ tab", "ctrl+u", "ctrl+c"} {
		if !strings.Contains(s, k) {
			t.Errorf("help lacks %q", k)
		}
	}
	// At 80×24 it fits without scrolling.
	m.Resize(80, 24)
	mustNotContain(t, m.View(), "↓ more")
}

func TestFleetSwitching(t *testing.T) {
	m, _ := loaded(false)
	if acts := press(m, "]"); !reflect.DeepEqual(acts, []Action{SwitchFleet{ID: "f2"}}) || m.Selected() != "f2" {
		t.Errorf("]: %v, selected %q", acts, m.Selected())
	}
	mustContain(t, m.View(), "fleet web", "fleet 2/2", "⚠ 2 waiting in other fleets")
	if acts := press(m, "]"); !reflect.DeepEqual(acts, []Action{SwitchFleet{ID: "f1"}}) {
		t.Errorf("] wraps: %v", acts)
	}
	if acts := press(m, "["); !reflect.DeepEqual(acts, []Action{SwitchFleet{ID: "f2"}}) {
		t.Errorf("[: %v", acts)
	}
	press(m, "F")
	mustContain(t, m.View(), "▸ 2 web (current)", "1 api-overhaul · connected · ⚠ 2 requests waiting")
	if acts := press(m, "up", "enter"); !reflect.DeepEqual(acts, []Action{SwitchFleet{ID: "f1"}}) || m.Selected() != "f1" || m.picker {
		t.Errorf("picker enter: %v, selected %q", acts, m.Selected())
	}
	press(m, "F", "esc")
	if m.picker {
		t.Error("esc did not close the picker")
	}

	one, _ := connected(false)
	if acts := press(one, "]"); len(acts) != 0 {
		t.Errorf("] with one fleet: %v", acts)
	}
	// The current fleet stopped (no longer listed): ] and [ reach the others.
	gone, _ := loaded(false)
	gone.SetFleets([]FleetRef{{ID: "f2", Name: "web"}, {ID: "f3", Name: "docs"}})
	if acts := press(gone, "["); !reflect.DeepEqual(acts, []Action{SwitchFleet{ID: "f3"}}) {
		t.Errorf("[ from a stopped fleet: %v", acts)
	}
	gone.SetFleets([]FleetRef{{ID: "f2", Name: "web"}})
	gone.Select("f1")
	if acts := press(gone, "]"); !reflect.DeepEqual(acts, []Action{SwitchFleet{ID: "f2"}}) {
		t.Errorf("] from a stopped fleet to the only live one: %v", acts)
	}
}

// TestRandomKeysNeverBreakTheScreen drives random keys and frames, on a
// loaded model and on one with no fleet, checking the View contract.
func TestRandomKeysNeverBreakTheScreen(t *testing.T) {
	names := []string{"enter", "esc", "tab", "shift+tab", "up", "down", "left", "right", "pgup", "pgdown",
		"home", "end", "backspace", "delete", "ctrl+u", "ctrl+w", "ctrl+l", "f1", "space"}
	texts := []string{"1", "2", "3", "4", "5", "6", "7", "8", "9", "?", "r", "F", "]", "[", ":", "i", "/",
		"d", "m", "p", "x", "t", "f", "n", "N", "k", "y", "u", "s", "R", "a", "é", "日本", "paste\nme"}
	for seed := range 20 {
		var m *Model
		if seed%4 == 0 {
			m, _ = newModel(seed%8 == 0)
		} else {
			m, _ = loaded(seed%2 == 0)
		}
		rng := uint64(seed)*2654435761 + 1
		next := func(n int) int {
			rng ^= rng << 13
			rng ^= rng >> 7
			rng ^= rng << 17
			return int(rng % uint64(n))
		}
		for i := range 400 {
			if next(3) == 0 {
				m.Key(Key{Name: names[next(len(names))]})
			} else {
				m.Key(Key{Text: texts[next(len(texts))]})
			}
			switch next(40) {
			case 0:
				m.Disconnected("f1", errors.New("EOF"), time.Second)
			case 1:
				attach(m, "f1")
			case 2:
				m.Apply("f1", &protocol.ConfirmResolved{ID: "c-17"}, false)
			case 3:
				m.Apply("f1", askReq(), false)
			}
			w, h := 20+next(120), 3+next(40)
			m.Resize(w, h)
			checkScreen(t, m.View(), w, h)
			if t.Failed() {
				t.Fatalf("seed %d step %d", seed, i)
			}
		}
	}
}
