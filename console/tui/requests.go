package tui

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/agents-fleet/fleet/protocol"
)

// The Requests view (5): the confirms and asks waiting for the operator,
// oldest first, each in full, and the last few dismissed elsewhere. y n
// answer a confirm; a digit, ←→ enter or a typed answer (i) an ask.

// requestsTab is the Requests view's state.
type requestsTab struct {
	sel    string // selected request id
	choice int    // highlighted choice of the selected ask, -1 for none
	scroll int    // lines scrolled within the view
}

func (t *requestsTab) reset() { t.sel, t.choice, t.scroll = "", -1, 0 }

// opened starts each visit at the selected request's head.
func (t *requestsTab) opened() { t.scroll = 0 }

func (t *requestsTab) hint(m *Model) string {
	r, _ := t.selected(m.cur())
	switch {
	case r == nil:
	case r.confirm != nil:
		return "y approve · n deny · ↑↓ choose request · pgup pgdn scroll"
	case len(r.choices()) > 0 && r.freeform():
		return "1-9 pick · ←→ enter · i type an answer · ↑↓ choose request"
	case len(r.choices()) > 0:
		return "1-9 pick · ←→ enter · ↑↓ choose request"
	default:
		return "i type an answer · ↑↓ choose request"
	}
	return ""
}

// selected is f's selected request and its index, nil when none waits.
func (t *requestsTab) selected(f *fleet) (*request, int) {
	if f == nil || len(f.pending) == 0 {
		return nil, -1
	}
	for i, r := range f.pending {
		if r.id == t.sel {
			return r, i
		}
	}
	return f.pending[0], 0
}

func (t *requestsTab) key(m *Model, f *fleet, name, text string) ([]Action, bool) {
	r, i := t.selected(f)
	if r == nil {
		return nil, false
	}
	switch name {
	case "up", "down":
		i = min(max(i+step(name), 0), len(f.pending)-1)
		t.sel, t.choice, t.scroll = f.pending[i].id, -1, 0
		return nil, true
	case "pgdown":
		t.scroll += max(m.bodyHeight()-2, 1)
		return nil, true
	case "pgup":
		t.scroll = max(t.scroll-max(m.bodyHeight()-2, 1), 0)
		return nil, true
	case "left", "right":
		if n := len(r.choices()); n > 0 {
			if name == "left" {
				t.choice = max(t.choice-1, 0)
			} else {
				t.choice = min(t.choice+1, n-1)
			}
		}
		return nil, true
	case "enter":
		if c := r.choices(); t.choice >= 0 && t.choice < len(c) {
			return m.answerAsk(f, r, c[t.choice].Value, oneLine(choiceLabel(c[t.choice]))), true
		}
		if r.ask != nil {
			m.flash = "pick a choice first (1-9 or ←/→)"
		}
		return nil, true
	}
	if r.answering != "" && (text == "y" || text == "n" || text == "i" || isDigit(text)) {
		m.flash = "already answered: waiting for the fleet"
		return nil, true
	}
	switch {
	case r.confirm != nil && (text == "y" || text == "n"):
		approve := text == "y"
		word := "deny"
		if approve {
			word = "approve"
		}
		if !m.canSend(f) {
			return nil, true
		}
		r.answering = word
		f.answered.add(r.id)
		return []Action{Send{Fleet: f.ref.ID, Msg: &protocol.ConfirmResponse{ID: r.id, Approve: approve}}}, true
	case r.ask != nil && len(r.choices()) > 0 && isDigit(text):
		n := int(text[0] - '0')
		c := r.choices()
		if n < 1 || n > len(c) || n > 9 {
			m.flash = "no choice " + text
			return nil, true
		}
		return m.answerAsk(f, r, c[n-1].Value, oneLine(choiceLabel(c[n-1]))), true
	case r.ask != nil && text == "i":
		if !r.freeform() {
			m.flash = "this question takes one of its choices"
			return nil, true
		}
		id := r.id
		m.openField(field{
			label:  "answer " + clipRunes(oneLine(id), 16) + ": ",
			hint:   "enter send answer · esc cancel",
			submit: func(text string) ([]Action, bool) { return m.typedAnswer(id, text) },
		}, "")
		return nil, true
	}
	return nil, false
}

// typedAnswer sends text as the answer to the ask id; a blank line is not
// an answer, and the line stays open.
func (m *Model) typedAnswer(id, text string) (acts []Action, done bool) {
	if strings.TrimSpace(text) == "" {
		return nil, false
	}
	f := m.cur()
	for _, r := range f.pendingList() {
		if r.id == id {
			return m.answerAsk(f, r, text, clipRunes(oneLine(text), 40)), true
		}
	}
	m.flash = "that question is no longer pending"
	return nil, true
}

func (m *Model) answerAsk(f *fleet, r *request, value, shown string) []Action {
	if r.answering != "" {
		m.flash = "already answered: waiting for the fleet"
		return nil
	}
	if !m.canSend(f) {
		return nil
	}
	r.answering = shown
	f.answered.add(r.id)
	return []Action{Send{Fleet: f.ref.ID, Msg: &protocol.AskResponse{ID: r.id, Text: value}}}
}

func choiceLabel(c protocol.AskChoiceOption) string {
	if c.Label != "" {
		return c.Label
	}
	return c.Value
}

func (t *requestsTab) body(m *Model, f *fleet, w, h int) []string {
	st := m.st
	var all []string
	selStart, selEnd := 0, 0
	sel, _ := t.selected(f)
	now := m.now()
	if len(f.pending) == 0 {
		all = append(all, "no requests waiting")
	} else {
		all = append(all, st.paint(st.bold, plural(len(f.pending), "request")+" waiting")+st.paint(st.dim, ", oldest first"))
	}
	if f.overflow > 0 {
		all = append(all, st.paint(st.warn, fmt.Sprintf("+%d more not shown (queue full)", f.overflow)))
	}
	if f.conn != connUp && len(f.pending) > 0 {
		all = append(all, st.paint(st.warn, "disconnected: answers can't be sent until the fleet is back"))
	}
	wrapW := max(w-4, 8)
	for i, r := range f.pending {
		all = append(all, "")
		if r == sel {
			selStart = len(all)
		}
		kind := "confirm"
		if r.ask != nil {
			kind = "ask"
			if r.ask.Kind != "" {
				kind += " (" + oneLine(r.ask.Kind) + ")"
			}
		}
		head := fmt.Sprintf("[%d/%d] %s %s", i+1, len(f.pending), kind, oneLine(r.id))
		if r.ts > 0 {
			head += " · " + fmtDur(now.Sub(time.UnixMilli(r.ts)).Truncate(time.Second)) + " ago"
		}
		if r == sel {
			if st.on {
				all = append(all, st.paint(st.sel, "▸ "+head))
			} else {
				all = append(all, "▸ "+head)
			}
		} else {
			all = append(all, "  "+st.paint(st.dim, head))
		}
		for _, l := range r.lines {
			for _, wl := range strings.Split(ansi.Wrap(l, wrapW, ""), "\n") {
				all = append(all, "    "+wl)
			}
		}
		for j, c := range r.choices() {
			num := "   "
			if j < 9 {
				num = strconv.Itoa(j+1) + ") "
			}
			label := num + oneLine(choiceLabel(c))
			if c.Description != "" {
				label += " — " + oneLine(c.Description)
			}
			hl := r == sel && j == t.choice
			mark := "    "
			if hl {
				mark = "  ▸ "
			}
			for k, wl := range strings.Split(ansi.Wrap(label, max(wrapW-3, 8), ""), "\n") {
				if k > 0 {
					mark, wl = "    ", "   "+wl
				}
				if hl {
					wl = st.paint(st.bold, wl)
				}
				all = append(all, mark+wl)
			}
		}
		if r.ask != nil && len(r.choices()) > 0 && r.freeform() {
			all = append(all, st.paint(st.dim, "    or type an answer (i)"))
		}
		switch {
		case r.answering != "":
			all = append(all, "    "+st.paint(st.info, "answering… ("+r.answering+")"))
		case r == sel && r.confirm != nil:
			all = append(all, "    "+st.paint(st.question, "y approve · n deny"))
		case r == sel && len(r.choices()) > 0:
			all = append(all, "    "+st.paint(st.question, "1-"+strconv.Itoa(min(len(r.choices()), 9))+" pick · ←→ enter"))
		case r == sel:
			all = append(all, "    "+st.paint(st.question, "i type an answer"))
		}
		if r == sel {
			selEnd = len(all)
		}
	}
	if f.dismissed.len() > 0 {
		all = append(all, "")
		for i := f.dismissed.len() - 1; i >= 0; i-- {
			d := f.dismissed.at(i)
			all = append(all, st.paint(st.dim, "dismissed: "+d.reason+" ("+d.id+") — "+d.text))
		}
	}
	// Show the selected request from its start when it would not fit below
	// the ones before it; pgup/pgdn scroll from there.
	base := 0
	if selEnd > h {
		base = selStart
	}
	start := min(base+t.scroll, max(len(all)-h, base))
	t.scroll = start - base
	out := all[start:]
	if len(out) > h && h > 1 {
		out = append(out[:h-1:h-1], st.paint(st.dim, fmt.Sprintf("↓ %d more lines (pgdn)", len(out)-h+1)))
	}
	return out
}
