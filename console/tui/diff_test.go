package tui

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/protocol"
)

// longDiff is a /diff answer of n added lines.
func longDiff(n int) string {
	var b strings.Builder
	b.WriteString("diff --git a/internal/router/routes.go b/internal/router/routes.go\nnew file mode 100644\n" +
		"--- /dev/null\n+++ b/internal/router/routes.go\n@@ -0,0 +1," + fmt.Sprint(n) + " @@\n")
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "+\troute %d\n", i)
	}
	return strings.TrimRight(b.String(), "\n")
}

// askDiff presses d on the selected worker and returns the /diff prompt.
func askDiff(t *testing.T, m *Model, keys ...string) *protocol.Prompt {
	t.Helper()
	p := sentPrompt(t, press(m, append(keys, "d")...))
	if !strings.HasPrefix(p.Text, "/diff ") {
		t.Fatalf("d sent %q", p.Text)
	}
	return p
}

func TestDiffPaneShowsTheAnswer(t *testing.T) {
	m, _ := loaded(false)
	m.Resize(80, 24)
	p := askDiff(t, m)
	mustContain(t, m.View(), "router · diff", "asking the fleet for router's diff…", "↑↓ pgup pgdn home end scroll · esc back · d again")
	// What comes between the prompt and the answer is not the answer: a
	// reply before the echo, frames after it, a reply that is neither.
	m.Apply("f1", &protocol.Reply{Text: "earlier reply"}, false)
	m.Apply("f1", &protocol.UserMessage{Source: "console", Text: p.Text, RequestID: p.RequestID}, false)
	m.Apply("f1", fleetState(), false)
	m.Apply("f1", &protocol.Reply{Text: "router: 3 of 5 resources split."}, false)
	mustContain(t, m.View(), "asking the fleet for router's diff…")
	m.Apply("f1", &protocol.Reply{Text: longDiff(100)}, false)

	s := m.View()
	mustContain(t, s, "router · diff", "lines 1–17 of 105", "diff --git a/internal/router/routes.go", "@@ -0,0 +1,100 @@",
		"+    route 1", "+    route 12")
	mustNotContain(t, s, "NAME", "route 13")
	// The reply is in the conversation too, once.
	if conv := screen(m, viewConversation, 80, 200); strings.Count(conv, "diff --git") != 1 {
		t.Errorf("the conversation has the diff %d times", strings.Count(conv, "diff --git"))
	}
	m.view = viewWorkers
	m.Resize(80, 24)

	press(m, "down", "down")
	mustContain(t, m.View(), "lines 3–19 of 105", "+    route 14", "↑↓ pgup pgdn home end scroll · esc back · d again")
	press(m, "pgdown")
	mustContain(t, m.View(), "lines 19–35 of 105")
	press(m, "end", "down")
	mustContain(t, m.View(), "lines 89–105 of 105", "+    route 100")
	press(m, "home", "up")
	mustContain(t, m.View(), "lines 1–17 of 105")
	// The worker keys act on the pane's worker; esc goes back to the table.
	press(m, "m")
	mustContain(t, m.View(), "merge router? y/n")
	press(m, "n", "esc")
	s = m.View()
	mustContain(t, s, "NAME", "▸ router")
	mustNotContain(t, s, "· diff")
}

func TestDiffPaneTakesARefusal(t *testing.T) {
	m, _ := loaded(false)
	m.Resize(80, 24)
	p := askDiff(t, m, "down")
	// A refused /diff is answered right after the echo, whatever it says.
	m.Apply("f1", &protocol.UserMessage{Source: "console", Text: p.Text, RequestID: p.RequestID}, false)
	m.Apply("f1", &protocol.Reply{Text: "docs is being merged."}, false)
	mustContain(t, m.View(), "docs · diff", "docs is being merged.", "1 line")

	// d again asks again; the answers /diff gives after looking are known
	// by their text wherever they fall.
	p = askDiff(t, m)
	m.Apply("f1", &protocol.UserMessage{Source: "console", Text: p.Text, RequestID: p.RequestID}, false)
	m.Apply("f1", &protocol.Transcript{Agent: "docs", Role: protocol.RoleAssistant, Text: "between"}, false)
	m.Apply("f1", &protocol.Reply{Text: "docs has no changes against its base."}, false)
	mustContain(t, m.View(), "docs has no changes against its base.")
	mustNotContain(t, m.View(), "being merged")
}

func TestDiffPaneFromTheTranscriptAndBounds(t *testing.T) {
	m, _ := loaded(false)
	m.Resize(80, 24)
	p := askDiff(t, m, "enter")
	m.Apply("f1", &protocol.UserMessage{Source: "console", Text: p.Text, RequestID: p.RequestID}, false)
	// Replayed frames (a re-attach) are history, not the answer.
	m.Apply("f1", &protocol.Reply{Text: "diff --git a/old b/old"}, true)
	mustContain(t, m.View(), "asking the fleet")
	m.Apply("f1", &protocol.Reply{Text: longDiff(3000) + "\n\x1b]0;pwned\x07\x1b[31mred"}, false)
	d := m.tabs.workers.diff
	if len(d.lines) != maxEntryLines+1 || !strings.HasPrefix(d.lines[maxEntryLines], "… 1006 more lines") {
		t.Fatalf("pane keeps %d lines, last %q", len(d.lines), d.lines[len(d.lines)-1])
	}
	checkEscapes(t, "diff pane", m.View(), false)
	press(m, "end")
	checkEscapes(t, "diff pane end", m.View(), false)
	// esc returns to the transcript it was opened from.
	press(m, "esc")
	mustContain(t, m.View(), "following")

	// Colours: added green, removed red, hunks in the info colour.
	c, _ := loaded(true)
	c.Resize(80, 24)
	p = askDiff(t, c)
	c.Apply("f1", &protocol.UserMessage{Source: "console", Text: p.Text, RequestID: p.RequestID}, false)
	c.Apply("f1", &protocol.Reply{Text: "diff --git a/x b/x\n@@ -1 +1 @@\n-old\n+new"}, false)
	s := c.View()
	for _, l := range []string{"+new", "-old", "@@ -1 +1 @@"} {
		if !strings.Contains(s, "m"+l) {
			t.Errorf("%q is not styled:\n%q", l, s)
		}
	}
	checkEscapes(t, "colour diff pane", s, true)
}

func TestDiffPaneClosesWithTheFleet(t *testing.T) {
	m, _ := loaded(false)
	m.Resize(80, 24)
	askDiff(t, m)
	press(m, "]")
	if m.tabs.workers.diff != nil {
		t.Error("the pane stayed open on another fleet")
	}
	// Not connected: nothing is sent and no pane opens.
	n, _ := loaded(false)
	n.Disconnected("f1", errors.New("EOF"), time.Second)
	if acts := press(n, "d"); len(acts) != 0 || n.tabs.workers.diff != nil {
		t.Errorf("d while disconnected: %v, pane %v", acts, n.tabs.workers.diff != nil)
	}
}
