package tui

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/charmbracelet/x/ansi"

	"github.com/agents-fleet/fleet/protocol"
)

// The worker transcript, opened from the Workers table with enter: it
// follows new lines until scrolled, and / searches it (n N move between
// the matches).

// transcriptPane is the state of the open transcript.
type transcriptPane struct {
	open   bool
	follow bool   // keep the newest line in view
	top    int64  // sequence number of the first line shown, when not following
	search string // the search, "" for none
	match  int64  // sequence number of the current match, -1 for none
}

// transcriptKey handles the transcript's own keys; the worker keys fall
// through to the table's.
func (t *workersTab) transcriptKey(m *Model, f *fleet, name, text string) bool {
	p := &t.transcript
	lg := t.log(f)
	page := max(m.bodyHeight()-2, 1)
	switch {
	case name == "esc":
		p.open = false
	case name == "up":
		p.scroll(m, lg, -1)
	case name == "down":
		p.scroll(m, lg, 1)
	case name == "pgup":
		p.scroll(m, lg, -page)
	case name == "pgdown":
		p.scroll(m, lg, page)
	case name == "home":
		p.follow = false
		if lg != nil {
			p.top = lg.lines.firstSeq()
		}
	case name == "end" || text == "f":
		p.follow = true
	case text == "/":
		m.openField(field{
			label: "search: ",
			hint:  "enter find · esc cancel",
			submit: func(q string) ([]Action, bool) {
				p.search, p.match = q, -1
				p.jump(m, t.log(m.cur()), 1)
				return nil, true
			},
			cancel: func() { p.search, p.match = "", -1 },
		}, p.search)
	case text == "n":
		p.jump(m, lg, 1)
	case text == "N":
		p.jump(m, lg, -1)
	default:
		return false
	}
	return true
}

// log is the transcript of the selected worker of f.
func (t *workersTab) log(f *fleet) *workerLog {
	w, _, ok := t.selected(f)
	if !ok {
		return nil
	}
	return f.log(w.name, w.id)
}

// scroll moves the transcript by delta lines; scrolling leaves follow.
func (p *transcriptPane) scroll(m *Model, lg *workerLog, delta int) {
	if lg == nil {
		return
	}
	first := lg.lines.firstSeq()
	lastTop := max(lg.lines.total-int64(m.transcriptRows()), first)
	p.top = min(max(p.screenTop(m, lg)+int64(delta), first), lastTop)
	p.follow = false
}

// jump moves to the next (dir 1) or previous (dir -1) search match,
// wrapping around.
func (p *transcriptPane) jump(m *Model, lg *workerLog, dir int) {
	if lg == nil || p.search == "" {
		return
	}
	matches := searchLines(lg, p.search)
	if len(matches) == 0 {
		p.match = -1
		m.flash = "no match for " + oneLine(p.search)
		return
	}
	from := p.match
	if from < 0 {
		from = p.screenTop(m, lg)
		if dir > 0 {
			from-- // a match on the top line counts
		}
	}
	next := int64(-1)
	if dir > 0 {
		if i := slices.IndexFunc(matches, func(s int64) bool { return s > from }); i >= 0 {
			next = matches[i]
		} else {
			next = matches[0]
		}
	} else {
		next = matches[len(matches)-1]
		for i := len(matches) - 1; i >= 0; i-- {
			if matches[i] < from {
				next = matches[i]
				break
			}
		}
	}
	p.match, p.follow = next, false
	p.top = max(next-int64(m.transcriptRows()/2), lg.lines.firstSeq())
}

// searchLines returns the sequence numbers of the lines containing q,
// ignoring case.
func searchLines(lg *workerLog, q string) []int64 {
	q = strings.ToLower(q)
	var out []int64
	for i := 0; i < lg.lines.len(); i++ {
		if strings.Contains(strings.ToLower(lg.lines.at(i).text), q) {
			out = append(out, lg.lines.firstSeq()+int64(i))
		}
	}
	return out
}

// screenTop is the sequence number of the first transcript line shown.
func (p *transcriptPane) screenTop(m *Model, lg *workerLog) int64 {
	first := lg.lines.firstSeq()
	lastTop := max(lg.lines.total-int64(m.transcriptRows()), first)
	if p.follow {
		return lastTop
	}
	return min(max(p.top, first), lastTop)
}

// transcriptRows is how many transcript lines the pane shows.
func (m *Model) transcriptRows() int { return max(m.bodyHeight()-1, 1) }

func (t *workersTab) transcriptBody(m *Model, f *fleet, w, h int) []string {
	st := m.st
	p := &t.transcript
	r, _, ok := t.selected(f)
	if !ok {
		return t.tableBody(m, f, w, h)
	}
	lg := f.log(r.name, r.id)
	title := []part{{st.paint(st.bold, oneLine(r.ref())), 9}, {st.status(r.status, oneLine(r.status)), 8}}
	if r.w != nil && r.w.Git != nil {
		title = append(title, part{gitCell(r.w.Git), 5})
	}
	right := ""
	if lg != nil {
		title = append(title, part{plural(lg.lines.len(), "line"), 6})
		if p.follow {
			right = st.paint(st.good, "following")
		} else {
			right = st.paint(st.warn, "paused (f follows)")
		}
		if p.search != "" {
			matches := searchLines(lg, p.search)
			pos := "0"
			if i := slices.Index(matches, p.match); i >= 0 {
				pos = strconv.Itoa(i + 1)
			}
			right = fmt.Sprintf("“%s” %s/%d · ", clipRunes(oneLine(p.search), 20), pos, len(matches)) + right
		}
	}
	out := []string{spread(joinParts(title, " · ", w-ansi.StringWidth(right)-1), right, w)}
	if lg == nil || lg.lines.len() == 0 {
		return append(out, "", "  no transcript lines from this worker yet")
	}
	top := p.screenTop(m, lg)
	rows := h - 1
	for i := 0; i < rows; i++ {
		seq := top + int64(i)
		idx := int(seq - lg.lines.firstSeq())
		if idx >= lg.lines.len() {
			break
		}
		l := lg.lines.at(idx)
		switch {
		case p.search == "":
			out = append(out, m.transcriptLine(l, w, ""))
		case seq == p.match:
			line := m.transcriptLine(l, w-1, p.search)
			if st.on {
				line = st.paint(st.curMatch, "▶") + line
			} else {
				line = ">" + line
			}
			out = append(out, line)
		default:
			out = append(out, " "+m.transcriptLine(l, w-1, p.search))
		}
	}
	return out
}

// transcriptLine draws one transcript line in w cells; q is highlighted.
func (m *Model) transcriptLine(t tline, w int, q string) string {
	st := m.st
	mark, paint := "  ", func(s string) string { return s }
	switch {
	case t.stream == protocol.StreamStderr:
		mark, paint = "! ", func(s string) string { return st.paint(st.bad, s) }
	case t.kind == protocol.TranscriptReasoning:
		mark, paint = "~ ", func(s string) string { return st.paint(st.italic, s) }
	case t.role == protocol.RoleTool:
		mark, paint = "⚙ ", func(s string) string { return st.paint(st.dim, s) }
	case t.role == protocol.RoleSystem:
		mark, paint = "· ", func(s string) string { return st.paint(st.dim, s) }
	case t.role == protocol.RoleUser:
		mark, paint = "› ", func(s string) string { return st.paint(st.info, s) }
	}
	text := ansi.Truncate(t.text, max(w-2, 1), "…")
	if q != "" && st.on {
		return mark + m.highlight(text, q, paint)
	}
	return mark + paint(text)
}

// highlight paints the occurrences of q in text (ignoring case) as matches.
func (m *Model) highlight(text, q string, paint func(string) string) string {
	lower, lq := strings.ToLower(text), strings.ToLower(q)
	if len(lower) != len(text) || lq == "" {
		return paint(text)
	}
	var b strings.Builder
	for {
		i := strings.Index(lower, lq)
		if i < 0 {
			b.WriteString(paint(text))
			return b.String()
		}
		b.WriteString(paint(text[:i]))
		b.WriteString(m.st.paint(m.st.match, text[i:i+len(lq)]))
		text, lower = text[i+len(lq):], lower[i+len(lq):]
	}
}
