package tui

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/protocol"
)

func TestPromptLine(t *testing.T) {
	m, _ := loaded(false)
	m.Resize(80, 24)
	if acts := press(m, ":", "enter"); len(acts) != 0 {
		t.Errorf("empty prompt sent %v", acts)
	}
	typeText(m, "hello")
	press(m, "left", "left", "backspace")
	typeText(m, "L")
	press(m, "home")
	typeText(m, ">")
	press(m, "end")
	typeText(m, "!")
	if got := m.prompt.String(); got != ">heLlo!" {
		t.Fatalf("edited line %q", got)
	}
	// Keys go to the line while it has focus.
	press(m, "q", "1", "?", "r")
	if got := m.prompt.String(); got != ">heLlo!q1?r" || m.view != viewWorkers || m.help {
		t.Fatalf("line %q, view %d, help %v", got, m.view, m.help)
	}
	mustContain(t, m.View(), "keys go to the prompt · enter send · esc leave")
	press(m, "ctrl+u")
	typeText(m, "first")
	sentPrompt(t, press(m, "enter"))
	// Sent: the line gives the keys back and says so.
	if m.focus != inputNone || m.prompt.len() != 0 {
		t.Fatalf("after enter: focus %d, line %q", m.focus, m.prompt.String())
	}
	s := m.View()
	mustContain(t, s, "sent: first", "› press : to type a prompt")
	mustNotContain(t, s, "keys go to the prompt")
	press(m, "6")
	if m.view != viewConversation || m.prompt.len() != 0 {
		t.Fatalf("6 after sending: view %d, line %q", m.view, m.prompt.String())
	}
	press(m, "1", ":")
	typeText(m, "second\nline")
	if p := sentPrompt(t, press(m, "enter")); p.Text != "second line" {
		t.Errorf("pasted line sent as %q", p.Text)
	}
	press(m, ":")
	typeText(m, "draft")
	press(m, "up")
	if got := m.prompt.String(); got != "second line" {
		t.Errorf("up recalled %q", got)
	}
	press(m, "up", "up")
	if got := m.prompt.String(); got != "first" {
		t.Errorf("up up recalled %q", got)
	}
	press(m, "down", "down")
	if got := m.prompt.String(); got != "draft" {
		t.Errorf("down back to the draft: %q", got)
	}
	// ctrl+c clears a line with text, then quits.
	if acts := press(m, "ctrl+c"); len(acts) != 0 || m.prompt.len() != 0 {
		t.Errorf("first ctrl+c: %v, line %q", acts, m.prompt.String())
	}
	if acts := press(m, "ctrl+c"); !reflect.DeepEqual(acts, []Action{Quit{}}) {
		t.Errorf("second ctrl+c: %v", acts)
	}
	typeText(m, "kept")
	press(m, "esc")
	if m.focus != inputNone {
		t.Error("esc kept the focus")
	}
	mustContain(t, m.View(), "› kept")
	press(m, "/")
	if got := m.prompt.String(); got != "/" || m.focus != inputPrompt {
		t.Errorf("/ opened %q", got)
	}
}

func TestPromptHistoryBounded(t *testing.T) {
	m, _ := connected(false)
	for i := range 150 {
		press(m, "i")
		typeText(m, fmt.Sprint("p", i))
		press(m, "enter")
	}
	if len(m.prompt.history) != maxHistory || m.prompt.history[0] != "p50" {
		t.Errorf("history %d, oldest %q", len(m.prompt.history), m.prompt.history[0])
	}
}

func TestPromptNotSentWhileDisconnected(t *testing.T) {
	m, _ := loaded(false)
	m.Disconnected("f1", errors.New("EOF"), time.Second)
	press(m, ":")
	typeText(m, "are you there")
	if acts := press(m, "enter"); len(acts) != 0 {
		t.Errorf("sent %v", acts)
	}
	if m.prompt.String() != "are you there" {
		t.Error("the unsent line was lost")
	}
}

func TestTabCompletion(t *testing.T) {
	m, _ := loaded(false)
	m.Resize(80, 24)
	press(m, ":")
	typeText(m, "/h")
	press(m, "tab")
	if got := m.prompt.String(); got != "/h" {
		t.Errorf("ambiguous completion gave %q", got)
	}
	mustContain(t, m.View(), "/help  /history  /hub")
	typeText(m, "i")
	press(m, "tab")
	if got := m.prompt.String(); got != "/history " {
		t.Errorf("unique completion gave %q", got)
	}
	press(m, "ctrl+u")
	typeText(m, "/me")
	press(m, "tab")
	if got := m.prompt.String(); got != "/merge " {
		t.Errorf("completion gave %q", got)
	}
	press(m, "ctrl+u")
	typeText(m, "/zz")
	press(m, "tab")
	mustContain(t, m.View(), "no command starts with /zz")
	m.Apply("f1", &protocol.CommandCatalog{Commands: []protocol.CommandCatalogEntry{{Name: "/help"}, {Name: "/helpful"}}}, false)
	press(m, "ctrl+u")
	typeText(m, "/h")
	press(m, "tab")
	if got := m.prompt.String(); got != "/help" {
		t.Errorf("common prefix %q", got)
	}
}
