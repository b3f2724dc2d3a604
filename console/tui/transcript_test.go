package tui

import (
	"fmt"
	"strings"
	"testing"

	"github.com/agents-fleet/fleet/protocol"
)

func TestTranscriptFold(t *testing.T) {
	m, _ := connected(false)
	m.Apply("f1", fleetState(), false)
	m.Apply("f1", &protocol.Transcript{Agent: "router", Role: protocol.RoleAssistant, Text: "one\ntwo\n"}, false)
	m.Apply("f1", &protocol.Transcript{Agent: "router", Role: protocol.RoleTool, Stream: protocol.StreamStderr, Text: "boom"}, false)
	lg := m.cur().log("router")
	if lg == nil || lg.lines.len() != 3 {
		t.Fatalf("router log: %+v", lg)
	}
	press(m, "enter")
	mustContain(t, screen(m, viewWorkers, 80, 24), "  one", "  two", "! boom", "3 lines", "following")
}

func TestTranscriptFollowAndSearch(t *testing.T) {
	m, _ := loaded(false)
	m.Resize(80, 24)
	f := m.cur()
	for i := range 100 {
		m.Apply("f1", &protocol.Transcript{Agent: "router", Role: protocol.RoleAssistant, Text: fmt.Sprintf("step %03d", i)}, false)
	}
	press(m, "enter")
	s := m.View()
	mustContain(t, s, "step 099", "following")
	mustNotContain(t, s, "step 080")

	// New lines scroll while following.
	m.Apply("f1", &protocol.Transcript{Agent: "router", Text: "step 100"}, false)
	mustContain(t, m.View(), "step 100")

	// up leaves follow mode: the screen holds still as lines arrive.
	press(m, "up")
	held := m.View()
	mustContain(t, held, "paused (f follows)", "step 099")
	mustNotContain(t, held, "step 100")
	m.Apply("f1", &protocol.Transcript{Agent: "router", Text: "step 101"}, false)
	body := func(s string) string { return strings.Join(lines(s)[4:21], "\n") }
	if got := m.View(); body(got) != body(held) {
		t.Errorf("paused transcript moved:\n%s", got)
	}
	press(m, "pgup", "pgup")
	mustNotContain(t, m.View(), "step 099")
	press(m, "f")
	mustContain(t, m.View(), "step 101", "following")
	press(m, "pgup", "end")
	mustContain(t, m.View(), "step 101", "following")
	press(m, "home")
	mustContain(t, m.View(), "Reading the current router.")

	// Search: type, enter jumps to the next match, the count shows k/n.
	press(m, "end", "/")
	typeText(m, "STEP 05")
	mustContain(t, m.View(), "search: STEP 05█")
	press(m, "enter")
	s = m.View()
	mustContain(t, s, "“STEP 05” 1/10", ">  step 050")
	press(m, "n", "n")
	mustContain(t, m.View(), "3/10", ">  step 052")
	press(m, "N")
	mustContain(t, m.View(), "2/10", ">  step 051")
	press(m, "N", "N") // wraps to the last match
	mustContain(t, m.View(), "10/10", ">  step 059")
	press(m, "n")
	mustContain(t, m.View(), "1/10")
	press(m, "/", "ctrl+u")
	typeText(m, "nothing like this")
	press(m, "enter")
	mustContain(t, m.View(), "no match for nothing like this")
	press(m, "/", "esc")
	mustNotContain(t, m.View(), "“")

	// esc goes back to the table.
	press(m, "esc")
	mustContain(t, m.View(), "NAME", "▸ router")
	if f.log("router").lines.len() != 108 { // 6 from the fixture, 102 here
		t.Errorf("log has %d lines", f.log("router").lines.len())
	}
}
