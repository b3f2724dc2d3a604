package tui

import (
	"slices"
	"strings"

	"github.com/agents-fleet/fleet/client"
	"github.com/agents-fleet/fleet/console"
	"github.com/agents-fleet/fleet/protocol"
)

// The bottom line: the operator's prompt to the fleet, or a field a tab
// opened (search, filter, answer). While one of them has the keyboard,
// every key goes to it.

// input says which text line has the keyboard.
type input int

const (
	inputNone   input = iota
	inputPrompt       // the prompt: Model.prompt
	inputField        // a tab's field: Model.field, its text in Model.line
)

// prompt is the operator's prompt line and its history.
type prompt struct {
	lineEditor
	history []string
	histIdx int
	draft   string // the line being typed while the history is walked
}

// field is a text line a tab opens on the bottom line (the transcript
// search, the feed filter, an ask's answer): the text is typed in
// Model.line, the tab says what it means.
type field struct {
	label, hint string
	// edited, when set, hears the text after every key (a filter applies
	// as typed).
	edited func(text string)
	// submit takes the text on enter; done gives the keys back.
	submit func(text string) (acts []Action, done bool)
	// cancel, when set, runs on esc.
	cancel func()
}

// openField gives the keyboard to a tab's field, its line set to text.
func (m *Model) openField(fd field, text string) {
	m.focus, m.field = inputField, fd
	m.line.set(text)
}

// unfocus gives the keys back to the views.
func (m *Model) unfocus() { m.focus, m.field = inputNone, field{} }

// focusPrompt gives the keyboard to the prompt, prefilled when prefill is
// not empty.
func (m *Model) focusPrompt(prefill string) {
	m.focus = inputPrompt
	if prefill != "" {
		m.prompt.set(prefill)
	}
	m.prompt.histIdx = len(m.prompt.history)
}

// editor is the text line that has the keyboard, or nil.
func (m *Model) editor() *lineEditor {
	switch m.focus {
	case inputNone:
		return nil
	case inputPrompt:
		return &m.prompt.lineEditor
	}
	return &m.line
}

// inputKey edits the text line that has the keyboard; enter and esc end it.
func (m *Model) inputKey(name, text string) []Action {
	ed := m.editor()
	switch name {
	case "esc":
		if m.focus == inputField && m.field.cancel != nil {
			m.field.cancel()
		}
		m.unfocus()
		return nil
	case "enter":
		return m.submit()
	case "backspace":
		ed.backspace()
	case "delete", "ctrl+d":
		ed.del()
	case "left", "ctrl+b":
		ed.move(-1)
	case "right", "ctrl+f":
		ed.move(1)
	case "home", "ctrl+a":
		ed.cur = 0
	case "end", "ctrl+e":
		ed.cur = len(ed.r)
	case "ctrl+u":
		ed.clear()
	case "ctrl+w":
		ed.deleteWord()
	case "up", "down":
		if m.focus == inputPrompt {
			m.prompt.recall(name == "up")
		}
	case "tab":
		if m.focus == inputPrompt {
			m.complete()
		}
	default:
		if text != "" {
			ed.insert(text)
		}
	}
	if m.focus == inputField && m.field.edited != nil {
		m.field.edited(ed.String())
	}
	return nil
}

// submit sends the prompt, or hands a field its text.
func (m *Model) submit() []Action {
	if m.focus == inputField {
		acts, done := m.field.submit(m.line.String())
		if done {
			m.unfocus()
		}
		return acts
	}
	text := m.prompt.String()
	if strings.TrimSpace(text) == "" {
		return nil
	}
	acts := m.sendPrompt(text)
	if acts == nil {
		return nil // not sent: keep the text
	}
	m.prompt.remember(text)
	m.prompt.clear()
	m.focus = inputNone // sent: the keys are the views' again (: for another prompt)
	return acts
}

// remember adds a sent prompt to the history, bounded.
func (p *prompt) remember(text string) {
	if len(p.history) == 0 || p.history[len(p.history)-1] != text {
		p.history = append(p.history, text)
		if len(p.history) > maxHistory {
			p.history = p.history[len(p.history)-maxHistory:]
		}
	}
	p.histIdx, p.draft = len(p.history), ""
}

// recall walks the prompt history; the line being typed is kept as draft.
func (p *prompt) recall(older bool) {
	if len(p.history) == 0 {
		return
	}
	if p.histIdx == len(p.history) {
		p.draft = p.String()
	}
	if older {
		p.histIdx = max(p.histIdx-1, 0)
	} else {
		p.histIdx = min(p.histIdx+1, len(p.history))
	}
	if p.histIdx == len(p.history) {
		p.set(p.draft)
	} else {
		p.set(p.history[p.histIdx])
	}
}

// complete completes a slash command from the fleet's catalog: the only
// match, else the common prefix with the candidates listed.
func (m *Model) complete() {
	text := m.prompt.String()
	if !strings.HasPrefix(text, "/") || strings.ContainsAny(text, " ") || m.prompt.cur != len(m.prompt.r) {
		return
	}
	var names []string
	if f := m.cur(); f != nil && f.fold.Catalog != nil {
		for _, c := range f.fold.Catalog.Commands {
			if strings.HasPrefix(c.Name, text) && !slices.Contains(names, c.Name) {
				names = append(names, c.Name)
			}
		}
	}
	slices.Sort(names)
	switch len(names) {
	case 0:
		m.flash = "no command starts with " + oneLine(text)
	case 1:
		m.prompt.set(names[0] + " ")
	default:
		p := names[0]
		for _, n := range names[1:] {
			for !strings.HasPrefix(n, p) {
				p = p[:len(p)-1]
			}
		}
		m.prompt.set(p)
		for i := range names {
			names[i] = oneLine(names[i])
		}
		m.candidates = names
	}
}

// sendPrompt sends text as a prompt with a fresh requestId, remembered so
// its echo shows as ours.
func (m *Model) sendPrompt(text string) []Action {
	f := m.cur()
	if !m.canSend(f) {
		return nil
	}
	id := client.NewRequestID()
	f.own.add(id)
	m.flash = "sent: " + clipRunes(oneLine(text), 60)
	return []Action{Send{Fleet: f.ref.ID, Msg: &protocol.Prompt{Text: text, RequestID: id}}}
}

// promptLine draws the bottom line: the text line with the keyboard, else
// the prompt left unsent, else how to open it.
func (m *Model) promptLine(w int) string {
	st := m.st
	switch m.focus {
	case inputPrompt:
		return m.editorLine(st.paint(st.bold, "› "), &m.prompt.lineEditor, w)
	case inputField:
		return m.editorLine(st.paint(st.bold, m.field.label), &m.line, w)
	}
	if m.prompt.len() > 0 {
		return st.paint(st.dim, "› "+console.Sanitize(m.prompt.String()))
	}
	return st.paint(st.dim, "› press : to type a prompt, ? for help")
}
