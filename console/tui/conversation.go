package tui

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/x/ansi"
)

// The Conversation view (6): the prompts and the fleet's replies, newest
// at the bottom.

// convTab is the Conversation view's state.
type convTab struct {
	back int // display lines scrolled back from the newest
}

func (t *convTab) reset() { t.back = 0 }

func (t *convTab) hint(*Model) string {
	return "↑↓ pgup pgdn scroll · end newest · : prompt · ? help"
}

func (t *convTab) key(m *Model, _ *fleet, name, _ string) ([]Action, bool) {
	return m.scrollKey(&t.back, name)
}

func (t *convTab) body(m *Model, f *fleet, w, h int) []string {
	st := m.st
	if f.conv.len() == 0 {
		return []string{"", "  no conversation yet: press : to prompt the coordinator"}
	}
	need := h + t.back
	var lines []string // newest entries last, built from the end
	for i := f.conv.len() - 1; i >= 0 && len(lines) < need; i-- {
		lines = append(m.convLines(f.conv.at(i), w), lines...)
	}
	t.back = min(t.back, max(len(lines)-h, 0))
	end := len(lines) - t.back
	out := lines[max(end-h, 0):end]
	if t.back > 0 && len(out) > 0 {
		out[len(out)-1] = st.paint(st.warn, fmt.Sprintf("↓ %d newer lines (end)", t.back))
	}
	return out
}

func (m *Model) convLines(e convEntry, w int) []string {
	st := m.st
	label := e.who + ":"
	var paint func(string) string
	switch {
	case e.mine:
		paint = func(s string) string { return st.paint(st.good, s) }
	case e.who == "fleet":
		paint = func(s string) string { return st.paint(st.info, s) }
	default:
		paint = func(s string) string { return st.paint(st.bold, s) }
	}
	indent := ansi.StringWidth(label) + 1
	if indent > w/3 {
		indent = 2
	}
	var out []string
	for i, l := range e.lines {
		for j, wl := range strings.Split(ansi.Wrap(l, max(w-indent, 4), ""), "\n") {
			if i == 0 && j == 0 {
				if indent == 2 && ansi.StringWidth(label)+1 > 2 {
					out = append(out, paint(label))
					out = append(out, "  "+wl)
					continue
				}
				out = append(out, paint(label)+" "+wl)
				continue
			}
			out = append(out, strings.Repeat(" ", indent)+wl)
		}
	}
	return out
}
