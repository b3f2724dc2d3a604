package tui

import (
	"slices"
	"unicode"
	"unicode/utf8"
)

// Keys: Key routes a key press to the confirmation line, a text line, an
// overlay or the current tab, and handles what is left the same in every
// view (switching views and fleets, the prompt, help, quit).

// Key is a key press as the app decodes it: Name for special keys ("enter",
// "esc", "tab", "shift+tab", "up", "down", "left", "right", "pgup",
// "pgdown", "home", "end", "backspace", "delete", "ctrl+c", "ctrl+u", …),
// Text for printable input (one or more runes; a paste too).
type Key struct{ Name, Text string }

// text is the printable input of k: Text, or a one-rune Name.
func (k Key) text() string {
	if k.Text != "" {
		return k.Text
	}
	if k.Name == "space" {
		return " "
	}
	if r, n := utf8.DecodeRuneInString(k.Name); n == len(k.Name) && n > 0 && unicode.IsPrint(r) {
		return k.Name
	}
	return ""
}

// Key handles one key press and returns what the app must do.
func (m *Model) Key(k Key) []Action {
	m.flash, m.candidates = "", nil
	name, text := k.Name, k.text()
	if name == "ctrl+c" {
		ed := m.editor()
		if ed != nil && ed.len() > 0 {
			ed.clear() // the first ctrl+c clears the line, the second quits
			return nil
		}
		return []Action{Quit{}}
	}
	if c := m.confirm; c != nil {
		m.confirm = nil
		if text == "y" || text == "Y" {
			return c.yes()
		}
		m.flash = "cancelled"
		return nil
	}
	if m.focus != inputNone {
		return m.inputKey(name, text)
	}
	if utf8.RuneCountInString(text) > 1 {
		return nil // a paste outside a text line is not a string of commands
	}
	if m.help {
		return m.helpKey(name, text)
	}
	if m.picker {
		return m.pickerKey(name, text)
	}
	if acts, ok := m.tab().key(m, m.cur(), name, text); ok {
		return acts
	}
	switch {
	case text == "q":
		return []Action{Quit{}}
	case text == "?":
		m.help, m.helpTop = true, 0
	case len(text) == 1 && text[0] >= '1' && text[0] <= '8':
		m.setView(view(text[0] - '0'))
	case name == "tab":
		m.setView(view(int(m.view)%numViews + 1))
	case name == "shift+tab":
		m.setView(view((int(m.view)+numViews-2)%numViews + 1))
	case text == "r":
		m.setView(viewRequests)
	case text == "F":
		m.picker = true
		m.pickerSel = max(slices.IndexFunc(m.refs, func(r FleetRef) bool { return r.ID == m.sel }), 0)
	case text == "]":
		return m.cycleFleet(1)
	case text == "[":
		return m.cycleFleet(-1)
	case text == ":" || text == "i":
		m.focusPrompt("")
	case text == "/":
		m.focusPrompt("/")
	}
	return nil
}

// resetFleetUI forgets what the screen held of the previous fleet.
func (m *Model) resetFleetUI() {
	for _, t := range m.tabs.all() {
		t.reset()
	}
	m.confirm = nil
	if m.focus == inputField {
		m.unfocus()
	}
}

func (m *Model) cycleFleet(step int) []Action {
	i := slices.IndexFunc(m.refs, func(r FleetRef) bool { return r.ID == m.sel })
	if len(m.refs) == 0 || len(m.refs) == 1 && i == 0 {
		m.flash = "only one fleet"
		return nil
	}
	if i < 0 { // the current fleet stopped: ] goes to the first, [ to the last
		i = -1
		if step < 0 {
			i = len(m.refs)
		}
	}
	i = (i + step + len(m.refs)) % len(m.refs)
	id := m.refs[i].ID
	m.Select(id)
	return []Action{SwitchFleet{ID: id}}
}

// scrollKey scrolls a bottom-anchored view (*back lines from the end).
func (m *Model) scrollKey(back *int, name string) ([]Action, bool) {
	page := max(m.bodyHeight()-1, 1)
	switch name {
	case "up":
		*back++
	case "down":
		*back = max(*back-1, 0)
	case "pgup":
		*back += page
	case "pgdown":
		*back = max(*back-page, 0)
	case "end":
		*back = 0
	case "home":
		*back = 1 << 30 // clamped when drawn
	default:
		return nil, false
	}
	return nil, true
}

// step is -1 for up, 1 for down.
func step(name string) int {
	if name == "up" {
		return -1
	}
	return 1
}

func isDigit(s string) bool { return len(s) == 1 && s[0] >= '0' && s[0] <= '9' }

// confirmation is a pending "…? y/n" question; yes runs on y.
type confirmation struct {
	question string
	yes      func() []Action
}

// askYesNo opens the confirmation line.
func (m *Model) askYesNo(question string, yes func() []Action) {
	m.confirm = &confirmation{question: question, yes: yes}
}

// canSend says whether frames can go to f now, flashing why not.
func (m *Model) canSend(f *fleet) bool {
	if f == nil {
		m.flash = "no fleet selected"
		return false
	}
	if f.conn != connUp {
		m.flash = "not connected to " + f.name() + ": try again once it reconnects"
		return false
	}
	return true
}
