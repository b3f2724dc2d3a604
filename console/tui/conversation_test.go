package tui

import (
	"fmt"
	"strings"
	"testing"

	"github.com/agents-fleet/fleet/protocol"
)

func TestConversationKeys(t *testing.T) {
	m, _ := loaded(false)
	m.Resize(80, 24)
	for i := range 40 {
		m.Apply("f1", &protocol.Reply{Text: fmt.Sprintf("answer %02d", i)}, false)
	}
	press(m, "6")
	mustContain(t, m.View(), "answer 39")
	press(m, "pgup")
	s := m.View()
	mustNotContain(t, s, "answer 39")
	mustContain(t, s, "newer lines (end)")
	press(m, "end")
	mustContain(t, m.View(), "answer 39")
	press(m, "home")
	mustContain(t, m.View(), "user: Split the router")
}

func TestOwnPromptEchoShownOnceAsOurs(t *testing.T) {
	m, _ := connected(false)
	press(m, ":")
	m.Key(Key{Text: "run the tests"})
	acts := press(m, "enter")
	p := sentPrompt(t, acts)
	if p.Text != "run the tests" || !strings.HasPrefix(p.RequestID, "req-") {
		t.Fatalf("prompt %+v", p)
	}
	m.Apply("f1", &protocol.UserMessage{Source: "fleet-console", Text: "run the tests", RequestID: p.RequestID}, false)
	m.Apply("f1", &protocol.UserMessage{Source: "telegram", Text: "and lint", RequestID: "req-other"}, false)
	s := screen(m, viewConversation, 80, 24)
	if body := strings.Join(lines(s)[3:21], "\n"); strings.Count(body, "run the tests") != 1 {
		t.Errorf("own prompt not shown exactly once:\n%s", s)
	}
	mustContain(t, s, "you: run the tests", "telegram: and lint")
	mustNotContain(t, s, "fleet-console:")
}
