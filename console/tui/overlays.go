package tui

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"
)

// The overlays drawn over the current tab: the key help (?) and the fleet
// picker (F). Each takes the keys while it is open.

func (m *Model) helpKey(name, text string) []Action {
	switch {
	case text == "?" || name == "esc":
		m.help = false
	case text == "q":
		return []Action{Quit{}}
	case name == "down" || name == "pgdown":
		m.helpTop++
	case name == "up" || name == "pgup":
		m.helpTop = max(m.helpTop-1, 0)
	}
	return nil
}

func (m *Model) pickerKey(name, text string) []Action {
	switch {
	case text == "F" || name == "esc":
		m.picker = false
	case text == "q":
		return []Action{Quit{}}
	case name == "up":
		m.pickerSel = max(m.pickerSel-1, 0)
	case name == "down":
		m.pickerSel = min(m.pickerSel+1, max(len(m.refs)-1, 0))
	case name == "enter":
		m.picker = false
		if m.pickerSel < len(m.refs) {
			id := m.refs[m.pickerSel].ID
			m.Select(id)
			return []Action{SwitchFleet{ID: id}}
		}
	}
	return nil
}

// helpEntries lists every key, by screen; two columns of 18 rows fit the
// body of an 80×24 screen.
var helpEntries = [][2]string{
	{"", "Everywhere"},
	{"1-8 tab", "views (shift+tab: back)"},
	{"r", "jump to Requests"},
	{": i /", "prompt (/ for a command)"},
	{"F ] [", "fleets: pick, next, prev"},
	{"?", "this help (esc closes)"},
	{"q ctrl+c", "quit"},
	{"", "Workers"},
	{"↑ ↓ enter", "select, open transcript"},
	{"d t", "diff pane, /tell worker"},
	{"m a p x", "merge, apply, PR, cancel"},
	{"", "Transcript"},
	{"↑↓ pgup/dn", "scroll (stops following)"},
	{"f end home", "follow; home: oldest"},
	{"/ n N", "search, next, previous"},
	{"esc", "back to the table"},
	{"", "Feed"},
	{"/ k", "filter text, entry kind"},
	{"", "Requests"},
	{"↑↓ pgup/dn", "choose request, scroll"},
	{"y n", "approve, deny a confirm"},
	{"1-9", "pick a choice of an ask"},
	{"←→ enter", "highlight, send a choice"},
	{"i", "type a freeform answer"},
	{"", "Native"},
	{"r ↑ ↓", "refresh status, pick root"},
	{"p u s", "pause, resume, stop (y/n)"},
	{"R", "retry uncertain mutation"},
	{"", "Prompt line"},
	{"enter esc", "send (keys return), leave"},
	{"↑ ↓ tab", "history, complete /cmd"},
	{"←→ home end", "move the cursor"},
	{"bksp ctrl+w", "delete a char, a word"},
	{"ctrl+u", "clear the line"},
	{"ctrl+c", "clear line; again: quit"},
}

func (m *Model) helpBody(w, h int) []string {
	st := m.st
	const keyW = 11
	render := func(e [2]string, cw int) string {
		if e[0] == "" {
			return st.paint(st.bold, ansi.Truncate(e[1], cw, "…"))
		}
		return cell(" "+e[0], keyW+1, false) + " " + ansi.Truncate(e[1], max(cw-keyW-2, 1), "…")
	}
	cols, colW := 1, w
	if w >= 76 && len(helpEntries) > h {
		cols, colW = 2, (w-2)/2
	}
	perCol := (len(helpEntries) + cols - 1) / cols
	lines := make([]string, perCol)
	for i, e := range helpEntries {
		c, r := i/perCol, i%perCol
		s := render(e, colW)
		if c == 0 {
			lines[r] = cell(s, colW, false)
		} else {
			lines[r] += "  " + s
		}
	}
	for i := range lines {
		lines[i] = strings.TrimRight(lines[i], " ")
	}
	m.helpTop = min(m.helpTop, max(len(lines)-h, 0))
	out := slices.Clone(lines[m.helpTop:min(m.helpTop+h, len(lines))])
	if m.helpTop+h < len(lines) && len(out) > 0 {
		out[len(out)-1] = st.paint(st.dim, "↓ more (down)")
	}
	return out
}

func (m *Model) pickerBody(w, h int) []string {
	st := m.st
	out := []string{st.paint(st.title, "fleets") + st.paint(st.dim, " · enter switches, esc closes")}
	if len(m.refs) == 0 {
		return append(out, "", "  no fleets found in the registry")
	}
	now := m.now()
	for i, r := range m.refs {
		f := m.fleets[r.ID]
		state := "not attached"
		if f != nil {
			switch f.conn {
			case connUp:
				state = st.paint(st.good, "connected")
			case connDown:
				left := f.retryIn - now.Sub(f.downAt)
				state = st.paint(st.warn, "reconnecting")
				if left >= time.Second {
					state = st.paint(st.warn, "reconnecting in "+fmtDur(left.Round(time.Second)))
				}
			}
		}
		name := oneLine(cmp.Or(r.Name, r.ID))
		if f != nil {
			name = f.name()
		}
		mark := "  "
		if i == m.pickerSel {
			mark = "▸ "
		}
		cur := ""
		if r.ID == m.sel {
			cur = st.paint(st.dim, " (current)")
		}
		line := fmt.Sprintf("%s%d %s%s · %s", mark, i+1, name, cur, state)
		if f != nil && len(f.pending()) > 0 {
			line += " · " + st.paint(st.warn, "⚠ "+plural(len(f.pending()), "request")+" waiting")
		}
		out = append(out, line)
		if r.Cwd != "" {
			out = append(out, st.paint(st.dim, "    "+oneLine(r.Cwd)))
		}
	}
	return out
}
