package tui

import (
	"fmt"
	"strings"
	"testing"

	"github.com/agents-fleet/fleet/protocol"
)

func TestFeedKeys(t *testing.T) {
	m, _ := loaded(false)
	m.Resize(100, 30)
	press(m, "3")
	kinds := []struct {
		kind string
		has  []string
		not  []string
	}{
		{"tools", []string{"▶ router Bash", "✓ router Bash 1.8s"}, []string{"✎", "•", "! error"}},
		{"files", []string{"✎ router edited"}, []string{"▶", "•"}},
		{"hub", []string{"• coordinator spawned", "• docs completed"}, []string{"▶", "✎"}},
		{"errors", []string{"! error budget", "✗ router Bash"}, []string{"▶", "✓ router", "✎"}},
		{"all", []string{"▶", "✎", "•", "! error"}, nil},
	}
	for _, k := range kinds {
		press(m, "k")
		s := m.View()
		mustContain(t, s, append(k.has, "kind: "+k.kind)...)
		mustNotContain(t, s, k.not...)
	}
	press(m, "/")
	typeText(m, "HANDLERS")
	s := m.View() // the filter applies as typed
	mustContain(t, s, "filter: “HANDLERS”", "1 entry", "✎ router edited internal/router/handlers.go")
	press(m, "enter")
	mustContain(t, m.View(), "filter: “HANDLERS”")
	press(m, "/", "esc")
	mustContain(t, m.View(), "7 entries")

	for i := range 50 {
		m.Apply("f1", &protocol.HubEvent{From: "w", Kind: "message", Text: fmt.Sprintf("msg %02d", i)}, false)
	}
	mustContain(t, m.View(), "msg 49")
	press(m, "pgup")
	s = m.View()
	mustNotContain(t, s, "msg 49")
	mustContain(t, s, "newer below")
	press(m, "end")
	mustContain(t, m.View(), "msg 49")
}

// TestSkippedEntriesAreNoted: the client left malformed hydrate entries
// out (client.Conn.Skipped); the rest is folded as usual and the feed says
// how many were skipped, among the errors.
func TestSkippedEntriesAreNoted(t *testing.T) {
	m, _ := newModel(false)
	m.SetFleets([]FleetRef{{ID: "f1", Name: "api"}})
	m.Connected("f1", welcome())
	m.Apply("f1", &protocol.Hydrate{Conversation: []protocol.HydrateConversationEntry{{Role: protocol.RoleUser, Text: "add a greeting", Ts: 1}}}, true)
	m.Skipped("f1", protocol.TypeHydrate, 2)
	m.Skipped("f1", protocol.TypeFleetState, 1)
	f := m.fleetFor("f1")
	var got []string
	for i := range f.feed.len() {
		if e := f.feed.at(i); e.kind == feedErrors {
			got = append(got, e.what)
		}
	}
	if strings.Join(got, "|") != "2 history entries skipped (malformed)|1 malformed fleetState entry skipped" || f.conv.len() != 1 {
		t.Fatalf("feed %q, %d conversation entries", got, f.conv.len())
	}
}
