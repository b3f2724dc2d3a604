package tui

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/agents-fleet/fleet/client"
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
	r, i := t.selected(m.cur())
	switch {
	case i < 0:
	case r.Confirm != nil:
		return "y approve · n deny · ↑↓ choose request · pgup pgdn scroll"
	case len(choices(r)) > 0 && r.Freeform():
		return "1-9 pick · ←→ enter · i type an answer · ↑↓ choose request"
	case len(choices(r)) > 0:
		return "1-9 pick · ←→ enter · ↑↓ choose request"
	default:
		return "i type an answer · ↑↓ choose request"
	}
	return ""
}

// selected is f's selected request and its index; the index is -1 when
// none waits.
func (t *requestsTab) selected(f *fleet) (client.Request, int) {
	p := f.pending()
	if len(p) == 0 {
		return client.Request{}, -1
	}
	for i, r := range p {
		if r.ID() == t.sel {
			return r, i
		}
	}
	return p[0], 0
}

// choices returns an ask's choices, nil for a confirm.
func choices(r client.Request) []protocol.AskChoiceOption {
	if r.Ask == nil {
		return nil
	}
	return r.Ask.Choices
}

func (t *requestsTab) key(m *Model, f *fleet, name, text string) ([]Action, bool) {
	r, i := t.selected(f)
	if i < 0 {
		return nil, false
	}
	switch name {
	case "up", "down":
		p := f.pending()
		i = min(max(i+step(name), 0), len(p)-1)
		t.sel, t.choice, t.scroll = p[i].ID(), -1, 0
		return nil, true
	case "pgdown":
		t.scroll += max(m.bodyHeight()-2, 1)
		return nil, true
	case "pgup":
		t.scroll = max(t.scroll-max(m.bodyHeight()-2, 1), 0)
		return nil, true
	case "left", "right":
		if n := len(choices(r)); n > 0 {
			if name == "left" {
				t.choice = max(t.choice-1, 0)
			} else {
				t.choice = min(t.choice+1, n-1)
			}
		}
		return nil, true
	case "enter":
		if c := choices(r); t.choice >= 0 && t.choice < len(c) {
			return m.answerAsk(f, r, c[t.choice].Value, oneLine(choiceLabel(c[t.choice]))), true
		}
		if r.Ask != nil {
			m.flash = "pick a choice first (1-9 or ←/→)"
		}
		return nil, true
	}
	if f.answering[r.ID()] != "" && (text == "y" || text == "n" || text == "i" || isDigit(text)) {
		m.flash = "already answered: waiting for the fleet"
		return nil, true
	}
	switch {
	case r.Confirm != nil && (text == "y" || text == "n"):
		approve := text == "y"
		word := "deny"
		if approve {
			word = "approve"
		}
		if !m.canSend(f) {
			return nil, true
		}
		f.answering[r.ID()] = word
		f.answered.add(r.ID())
		return []Action{Send{Fleet: f.ref.ID, Msg: &protocol.ConfirmResponse{ID: r.ID(), Approve: approve}}}, true
	case r.Ask != nil && len(choices(r)) > 0 && isDigit(text):
		n := int(text[0] - '0')
		c := choices(r)
		if n < 1 || n > len(c) || n > 9 {
			m.flash = "no choice " + text
			return nil, true
		}
		return m.answerAsk(f, r, c[n-1].Value, oneLine(choiceLabel(c[n-1]))), true
	case r.Ask != nil && text == "i":
		if !r.Freeform() {
			m.flash = "this question takes one of its choices"
			return nil, true
		}
		id := r.ID()
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
	for _, r := range f.pending() {
		if r.ID() == id {
			return m.answerAsk(f, r, text, clipRunes(oneLine(text), 40)), true
		}
	}
	m.flash = "that question is no longer pending"
	return nil, true
}

func (m *Model) answerAsk(f *fleet, r client.Request, value, shown string) []Action {
	if f.answering[r.ID()] != "" {
		m.flash = "already answered: waiting for the fleet"
		return nil
	}
	if !m.canSend(f) {
		return nil
	}
	f.answering[r.ID()] = shown
	f.answered.add(r.ID())
	return []Action{Send{Fleet: f.ref.ID, Msg: &protocol.AskResponse{ID: r.ID(), Text: value}}}
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
	_, sel := t.selected(f)
	now := m.now()
	pending := f.pending()
	if len(pending) == 0 {
		all = append(all, "no requests waiting")
	} else {
		all = append(all, st.paint(st.bold, plural(len(pending), "request")+" waiting")+st.paint(st.dim, ", oldest first"))
	}
	if n := f.fold.Overflow(); n > 0 {
		all = append(all, st.paint(st.warn, fmt.Sprintf("+%d more not shown (queue full)", n)))
	}
	if f.conn != connUp && len(pending) > 0 {
		all = append(all, st.paint(st.warn, "disconnected: answers can't be sent until the fleet is back"))
	}
	wrapW := max(w-4, 8)
	for i, r := range pending {
		all = append(all, "")
		if i == sel {
			selStart = len(all)
		}
		kind := "confirm"
		if r.Ask != nil {
			kind = "ask"
			if r.Ask.Kind != "" {
				kind += " (" + oneLine(r.Ask.Kind) + ")"
			}
		}
		head := fmt.Sprintf("[%d/%d] %s %s", i+1, len(pending), kind, oneLine(r.ID()))
		if ts := r.Ts(); ts > 0 {
			head += " · " + fmtDur(now.Sub(time.UnixMilli(ts)).Truncate(time.Second)) + " ago"
		}
		if i == sel {
			if st.on {
				all = append(all, st.paint(st.sel, "▸ "+head))
			} else {
				all = append(all, "▸ "+head)
			}
		} else {
			all = append(all, "  "+st.paint(st.dim, head))
		}
		for _, l := range textLines(r.Text()) {
			for _, wl := range strings.Split(ansi.Wrap(l, wrapW, ""), "\n") {
				all = append(all, "    "+wl)
			}
		}
		for j, c := range choices(r) {
			num := "   "
			if j < 9 {
				num = strconv.Itoa(j+1) + ") "
			}
			label := num + oneLine(choiceLabel(c))
			if c.Description != "" {
				label += " — " + oneLine(c.Description)
			}
			hl := i == sel && j == t.choice
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
		if r.Ask != nil && len(choices(r)) > 0 && r.Freeform() {
			all = append(all, st.paint(st.dim, "    or type an answer (i)"))
		}
		switch answering := f.answering[r.ID()]; {
		case answering != "":
			all = append(all, "    "+st.paint(st.info, "answering… ("+answering+")"))
		case i == sel && r.Confirm != nil:
			all = append(all, "    "+st.paint(st.question, "y approve · n deny"))
		case i == sel && len(choices(r)) > 0:
			all = append(all, "    "+st.paint(st.question, "1-"+strconv.Itoa(min(len(choices(r)), 9))+" pick · ←→ enter"))
		case i == sel:
			all = append(all, "    "+st.paint(st.question, "i type an answer"))
		}
		if i == sel {
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
