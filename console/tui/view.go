package tui

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"

	"github.com/agents-fleet/fleet/console"
	"github.com/agents-fleet/fleet/protocol"
)

// View returns the whole screen: exactly height lines, none wider than
// width cells, every style reset at the end of its line.
func (m *Model) View() string {
	w, h := m.width, m.height
	if h <= 0 {
		return ""
	}
	l := m.layout()
	out := make([]string, 0, h)
	if l.header1 {
		out = append(out, m.header1(w))
	}
	if l.header2 {
		out = append(out, m.header2(w))
	}
	if l.tabs {
		out = append(out, m.tabs(w))
	}
	body := m.body(w, l.body)
	if len(body) > l.body {
		body = body[:l.body]
	}
	out = append(out, body...)
	for range l.body - len(body) {
		out = append(out, "")
	}
	if l.banner {
		out = append(out, m.banner(w))
	}
	if l.message {
		out = append(out, m.message(w))
	}
	out = append(out, m.promptLine(w))
	for i := range out {
		out[i] = fit(out[i], w)
	}
	return strings.Join(out[:h], "\n")
}

// fit cuts a line to w cells and closes any style left open.
func fit(s string, w int) string {
	if w <= 0 {
		return ""
	}
	if ansi.StringWidth(s) > w {
		s = ansi.Truncate(s, w, "…")
	}
	if i := strings.LastIndex(s, "\x1b["); i >= 0 && !strings.HasPrefix(s[i:], "\x1b[m") && !strings.HasPrefix(s[i:], "\x1b[0m") {
		s += "\x1b[m"
	}
	return s
}

// layout says which screen parts are drawn; small screens drop the least
// needed first (the waiting-requests banner and the prompt go last).
type layout struct {
	header1, header2, tabs, banner, message bool
	body                                    int
}

func (m *Model) layout() layout {
	l := layout{header1: true, header2: true, tabs: true, message: true, banner: m.bannerShown()}
	drops := []*bool{&l.header2, &l.tabs, &l.message, &l.header1, &l.banner}
	fixed := func() int {
		n := 1 // the prompt line
		for _, b := range []bool{l.header1, l.header2, l.tabs, l.banner, l.message} {
			if b {
				n++
			}
		}
		return n
	}
	want := 3 // body lines worth dropping chrome for
	if m.height < 10 {
		want = 1
	}
	for _, d := range drops {
		if m.height-fixed() >= want {
			break
		}
		*d = false
	}
	l.body = max(m.height-fixed(), 0)
	return l
}

func (m *Model) bodyHeight() int { return m.layout().body }

// transcriptRows is how many transcript lines the worker detail shows.
func (m *Model) transcriptRows() int { return max(m.bodyHeight()-1, 1) }

func (m *Model) bannerShown() bool {
	f := m.cur()
	return f != nil && len(f.pending) > 0 && (m.view != viewRequests || m.help || m.picker)
}

// Header.

// part is one piece of a header line; low keep values go first when the
// line is too narrow.
type part struct {
	text string
	keep int
}

// joinParts joins parts with sep, dropping the least kept until they fit.
func joinParts(parts []part, sep string, w int) string {
	for {
		var texts []string
		for _, p := range parts {
			if p.text != "" {
				texts = append(texts, p.text)
			}
		}
		s := strings.Join(texts, sep)
		if ansi.StringWidth(s) <= w || len(texts) <= 1 {
			return s
		}
		low := -1
		for i, p := range parts {
			if p.text != "" && (low < 0 || p.keep < parts[low].keep) {
				low = i
			}
		}
		parts = slices.Delete(slices.Clone(parts), low, low+1)
	}
}

func (m *Model) header1(w int) string {
	f := m.cur()
	st := m.st
	if f == nil {
		return st.paint(st.title, "fleet console") + " · no fleet"
	}
	now := m.now()
	parts := []part{{st.paint(st.title, "fleet "+f.name()), 10}}
	sid := ""
	if f.welcome != nil {
		sid = f.welcome.SessionID
	}
	if sid == "" && f.state != nil {
		sid = f.state.Coordinator.SessionID
	}
	if sid != "" {
		parts = append(parts, part{"session " + prefix(oneLine(sid), 8), 3})
	}
	if pm := f.providerModel(); pm != "" {
		parts = append(parts, part{pm, 5})
	}
	if s := f.state; s != nil && s.Session != nil && s.Session.Uptime != nil {
		up := time.Duration(*s.Session.Uptime)*time.Millisecond + now.Sub(f.stateAt)
		parts = append(parts, part{"up " + fmtDur(up), 2})
	}
	processing := false
	if f.state != nil {
		processing = f.state.Coordinator.IsProcessing
	} else if f.status != nil {
		processing = f.status.Processing
	}
	if processing {
		parts = append(parts, part{st.paint(st.good, "● working"), 8})
	} else if f.state != nil || f.status != nil {
		parts = append(parts, part{st.paint(st.dim, "○ idle"), 8})
	}
	if s := f.state; s != nil && s.Coordinator.StaleMs != nil && *s.Coordinator.StaleMs >= 1000 {
		parts = append(parts, part{st.paint(st.warn, "stale "+fmtDur(time.Duration(*s.Coordinator.StaleMs)*time.Millisecond)), 9})
	}
	if f.conn == connUp && !f.lastFrame.IsZero() && now.Sub(f.lastFrame) >= staleAfter {
		parts = append(parts, part{st.paint(st.warn, "no frames for "+fmtDur(now.Sub(f.lastFrame).Truncate(time.Second))), 9})
	}
	right := ""
	if i := slices.IndexFunc(m.refs, func(r FleetRef) bool { return r.ID == m.sel }); len(m.refs) > 1 && i >= 0 {
		right = fmt.Sprintf("fleet %d/%d", i+1, len(m.refs))
	}
	left := joinParts(parts, " · ", w-ansi.StringWidth(right)-1)
	return spread(left, right, w)
}

// spread puts right at the right edge of a w-cell line after left.
func spread(left, right string, w int) string {
	if right == "" {
		return left
	}
	gap := w - ansi.StringWidth(left) - ansi.StringWidth(right)
	if gap < 1 {
		return left
	}
	return left + strings.Repeat(" ", gap) + right
}

func (f *fleet) providerModel() string {
	var prov, model string
	if f.status != nil {
		prov, model = f.status.Provider, f.status.Model
	}
	if s := f.state; s != nil && s.Session != nil {
		prov, model = cmp.Or(prov, s.Session.Provider), cmp.Or(model, s.Session.Model)
	}
	if f.welcome != nil {
		model = cmp.Or(model, f.welcome.Model)
	}
	switch {
	case prov != "" && model != "":
		return oneLine(prov) + "/" + oneLine(model)
	case model != "":
		return oneLine(model)
	}
	return oneLine(prov)
}

func (m *Model) header2(w int) string {
	f := m.cur()
	st := m.st
	if f == nil {
		return ""
	}
	now := m.now()
	badge := func(s lipgloss.Style, text string) string {
		if !st.on {
			return text
		}
		return st.paint(s, " "+text+" ")
	}
	var parts []part
	switch f.conn {
	case connNever:
		parts = append(parts, part{badge(st.badgeWarn, "CONNECTING"), 10})
	case connDown:
		left := f.retryIn - now.Sub(f.downAt)
		s := "RECONNECTING"
		if left >= time.Second {
			s += " in " + fmtDur(left.Round(time.Second))
		} else {
			s += "…"
		}
		if f.connErr != "" {
			s += ": " + clipRunes(f.connErr, 60)
		}
		parts = append(parts, part{badge(st.badgeBad, s), 10})
	}
	if s := f.state; s != nil {
		if s.Coordinator.DispatchPaused {
			parts = append(parts, part{badge(st.badgeWarn, "DISPATCH PAUSED"), 9})
		}
		if s.Coordinator.PlanMode {
			parts = append(parts, part{badge(st.badge, "PLAN MODE"), 8})
		}
	}
	if n := m.waitingElsewhere(); n > 0 {
		parts = append(parts, part{st.paint(st.warn, "⚠ "+strconv.Itoa(n)+" waiting in other fleets"), 7})
	}
	if s := f.state; s != nil {
		parts = append(parts, part{fmt.Sprintf("workers %d/%d", s.WorkerActive, s.WorkerTotal), 2})
		if s.Tasks.Total > 0 {
			parts = append(parts, part{fmt.Sprintf("tasks %d/%d", s.Tasks.Done, s.Tasks.Total), 1})
		}
		if tk := s.Tokens; tk != nil {
			if tk.TotalTokens != nil {
				parts = append(parts, part{"tokens " + fmtTokens(*tk.TotalTokens), 4})
			}
			if tk.ContextPercent != nil {
				parts = append(parts, part{"ctx " + m.gauge(*tk.ContextPercent, 10), 5})
			}
		}
		if b := s.Budget; b != nil && b.SessionTokens > 0 {
			used := float64(b.SessionUsed) / float64(b.SessionTokens) * 100
			text := fmt.Sprintf("budget %s/%s (%.0f%%)", fmtTokens(b.SessionUsed), fmtTokens(b.SessionTokens), used)
			if used >= 80 {
				text = st.paint(st.warn, text)
			}
			parts = append(parts, part{text, 6})
		} else if b != nil && b.WorkerTokens > 0 {
			parts = append(parts, part{"budget " + fmtTokens(b.WorkerTokens) + "/worker", 6})
		}
	} else if s := f.status; s != nil && s.ActiveWorkerCount != nil && s.TotalWorkerCount != nil {
		parts = append(parts, part{fmt.Sprintf("workers %d/%d", *s.ActiveWorkerCount, *s.TotalWorkerCount), 2})
	}
	return joinParts(parts, "  ", w)
}

// gauge draws pct (0-100) as a bar of n cells and the percentage.
func (m *Model) gauge(pct float64, n int) string {
	if math.IsNaN(pct) {
		pct = 0
	}
	pct = min(max(pct, 0), 100)
	full := int(math.Round(pct / 100 * float64(n)))
	bar := m.st.paint(m.st.gauge, strings.Repeat("█", full)) + m.st.paint(m.st.barOff, strings.Repeat("░", n-full))
	return bar + " " + strconv.Itoa(int(math.Round(pct))) + "%"
}

func (m *Model) waitingElsewhere() int {
	n := 0
	for id, f := range m.fleets {
		if id != m.sel {
			n += len(f.pending)
		}
	}
	return n
}

var (
	tabLong  = [...]string{"Workers", "Tasks", "Feed", "Timeline", "Requests", "Conversation", "Native", "Intel"}
	tabMid   = [...]string{"Workers", "Tasks", "Feed", "Timeline", "Requests", "Conv", "Native", "Intel"}
	tabShort = [...]string{"Work", "Tasks", "Feed", "Time", "Req", "Conv", "Nat", "Intel"}
)

// tabs draws the view tabs with the longest labels that fit.
func (m *Model) tabs(w int) string {
	f := m.cur()
	waiting := 0
	if f != nil {
		waiting = len(f.pending)
	}
	last := ""
	for _, names := range [][8]string{tabLong, tabMid, tabShort, {}} {
		cells := make([]string, len(names))
		plain := len(names) + 1 // separators, and the active tab's two extra cells
		for i, n := range names {
			v := view(i + 1)
			label := strconv.Itoa(i + 1)
			if n != "" {
				label += " " + n
			}
			if v == viewRequests && waiting > 0 {
				label += "(" + strconv.Itoa(waiting) + ")"
			}
			plain += ansi.StringWidth(label)
			switch {
			case v == m.view && m.st.on:
				cells[i] = m.st.paint(m.st.tabOn, " "+label+" ")
			case v == m.view:
				cells[i] = "[" + label + "]"
			case v == viewRequests && waiting > 0:
				cells[i] = m.st.paint(m.st.warn, label)
			default:
				cells[i] = m.st.paint(m.st.tabOff, label)
			}
		}
		if last = strings.Join(cells, " "); plain <= w {
			break
		}
	}
	return last
}

// Footer.

func (m *Model) banner(w int) string {
	f := m.cur()
	n := len(f.pending)
	noun := "requests"
	if n == 1 {
		noun = "request"
	}
	key := "press 5 (or r)"
	if m.view == viewNative && !m.help && !m.picker {
		key = "press 5" // r refreshes the native root here
	}
	s := fmt.Sprintf("⚠ %d %s waiting — %s: %s", n, noun, key, oneLine(f.pending[0].text))
	s = ansi.Truncate(s, w, "…")
	if m.st.on {
		s = m.st.paint(m.st.banner, s+strings.Repeat(" ", max(w-ansi.StringWidth(s), 0)))
	}
	return s
}

func (m *Model) message(w int) string {
	st := m.st
	switch {
	case m.confirm != nil:
		return st.paint(st.question, m.confirm.question)
	case len(m.candidates) > 0:
		return st.paint(st.info, strings.Join(m.candidates, "  "))
	case m.flash != "":
		return m.flash
	}
	return st.paint(st.dim, m.hint())
}

// hint is the key reminder of the current screen.
func (m *Model) hint() string {
	switch {
	case m.focus == inputPrompt:
		return "keys go to the prompt · enter send · esc leave · ↑↓ history · tab complete /cmd"
	case m.focus == inputSearch:
		return "enter find · esc cancel"
	case m.focus == inputFilter:
		return "enter keep filter · esc clear"
	case m.focus == inputAnswer:
		return "enter send answer · esc cancel"
	case m.help:
		return "keys · ? or esc closes · ↑↓ scroll"
	case m.picker:
		return "↑↓ choose · enter switch · esc close"
	}
	switch m.view {
	case viewWorkers:
		if m.diff != nil {
			return "↑↓ pgup pgdn home end scroll · esc back · d again · m merge · a apply · p PR · t tell"
		}
		if m.detail {
			return "↑↓ pgup pgdn scroll · f follow · / search · n N next/prev · d diff · m merge · a apply · p PR · x cancel · t tell · esc back"
		}
		return "↑↓ select · enter transcript · d diff · m merge · a apply · p PR · x cancel · t tell · ? help"
	case viewFeed:
		return "/ filter · k kind (" + feedKindNames[m.feedKind] + ") · ↑↓ pgup pgdn scroll · end newest"
	case viewRequests:
		r, _ := m.selectedRequest()
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
	case viewConversation:
		return "↑↓ pgup pgdn scroll · end newest · : prompt · ? help"
	case viewNative:
		return "r refresh · p pause · u resume · s stop · R retry uncertain · ↑↓ root"
	case viewTasks:
		return "↑↓ scroll · ? help"
	}
	return "1-8 views · : prompt · ? help · q quit"
}

func (m *Model) promptLine(w int) string {
	st := m.st
	switch m.focus {
	case inputPrompt:
		return m.editorLine(st.paint(st.bold, "› "), &m.prompt, w)
	case inputSearch:
		return m.editorLine(st.paint(st.bold, "search: "), &m.line, w)
	case inputFilter:
		return m.editorLine(st.paint(st.bold, "filter: "), &m.line, w)
	case inputAnswer:
		return m.editorLine(st.paint(st.bold, "answer "+clipRunes(oneLine(m.answerFor), 16)+": "), &m.line, w)
	}
	if m.prompt.len() > 0 {
		return st.paint(st.dim, "› "+console.Sanitize(m.prompt.String()))
	}
	return st.paint(st.dim, "› press : to type a prompt, ? for help")
}

// editorLine draws a text field with its cursor, scrolled to keep the
// cursor in view.
func (m *Model) editorLine(label string, ed *lineEditor, w int) string {
	avail := max(w-ansi.StringWidth(label)-1, 1)
	r := []rune(console.Sanitize(ed.String()))
	cur := min(ed.cur, len(r))
	start := 0
	for start < cur && ansi.StringWidth(string(r[start:cur])) > avail {
		start++
	}
	before := string(r[start:cur])
	after := ansi.Truncate(string(r[cur:]), max(avail-ansi.StringWidth(before), 0)+1, "")
	if !m.st.on {
		return label + before + "█" + ansi.Truncate(after, max(avail-ansi.StringWidth(before), 0), "")
	}
	at, rest := " ", ""
	if ar := []rune(after); len(ar) > 0 {
		at, rest = string(ar[0]), string(ar[1:])
	}
	return label + before + m.st.paint(m.st.cursor, at) + rest
}

// Body.

func (m *Model) body(w, h int) []string {
	if h <= 0 {
		return nil
	}
	if m.help {
		return m.helpBody(w, h)
	}
	if m.picker {
		return m.pickerBody(w, h)
	}
	f := m.cur()
	if f == nil {
		return []string{"", "  no fleet: start one with its control socket on (fleet run --control-socket)"}
	}
	switch m.view {
	case viewWorkers:
		if m.diff != nil {
			return m.diffBody(w, h)
		}
		if m.detail {
			return m.detailBody(f, w, h)
		}
		return m.workersBody(f, w, h)
	case viewTasks:
		return m.tasksBody(f, w, h)
	case viewFeed:
		return m.feedBody(f, w, h)
	case viewTimeline:
		return m.timelineBody(f, w, h)
	case viewRequests:
		return m.requestsBody(f, w, h)
	case viewConversation:
		return m.convBody(f, w, h)
	case viewNative:
		return m.nativeBody(f, w, h)
	case viewIntel:
		return m.intelBody(f, w, h)
	}
	return nil
}

// Tables.

// column describes one table column.
type column struct {
	title    string
	min, max int
	drop     int  // 0: never dropped; otherwise lower numbers go first
	flex     bool // takes the width left over
	right    bool // right-aligned
}

// fitColumns returns each column's width, 0 for a dropped column.
func fitColumns(cols []column, cells [][]string, w int) []int {
	n := len(cols)
	nat := make([]int, n)
	for i, c := range cols {
		nat[i] = ansi.StringWidth(c.title)
		for _, row := range cells {
			nat[i] = max(nat[i], ansi.StringWidth(row[i]))
		}
		nat[i] = min(max(nat[i], c.min), c.max)
	}
	widths := slices.Clone(nat)
	total := func() int {
		t, k := 0, 0
		for _, x := range widths {
			if x > 0 {
				t += x
				k++
			}
		}
		return t + max(k-1, 0)
	}
	for i, c := range cols { // flex columns give way first
		if c.flex && total() > w {
			widths[i] = max(c.min, widths[i]-(total()-w))
		}
	}
	for total() > w {
		low := -1
		for i, c := range cols {
			if widths[i] > 0 && c.drop > 0 && (low < 0 || c.drop < cols[low].drop) {
				low = i
			}
		}
		if low < 0 {
			break
		}
		widths[low] = 0
	}
	for i, c := range cols { // then the others shrink to their minimum
		if widths[i] > 0 && !c.flex && total() > w {
			widths[i] = max(c.min, widths[i]-(total()-w))
		}
	}
	for i, c := range cols { // leftover width goes to the flex columns
		if widths[i] > 0 && c.flex && total() < w {
			widths[i] = min(nat[i], widths[i]+w-total())
		}
	}
	return widths
}

// cell clips and pads s to w cells.
func cell(s string, w int, right bool) string {
	s = ansi.Truncate(s, w, "…")
	pad := strings.Repeat(" ", max(w-ansi.StringWidth(s), 0))
	if right {
		return pad + s
	}
	return s + pad
}

// table draws a header and rows. paint styles a cell's padded text.
func (m *Model) table(cols []column, cells [][]string, w int, paint func(row, col int, s string) string) (header string, rows []string) {
	widths := fitColumns(cols, cells, w)
	var hb strings.Builder
	for i, c := range cols {
		if widths[i] == 0 {
			continue
		}
		if hb.Len() > 0 {
			hb.WriteByte(' ')
		}
		hb.WriteString(cell(c.title, widths[i], c.right))
	}
	header = m.st.paint(m.st.dim, strings.TrimRight(hb.String(), " "))
	for r, row := range cells {
		var b strings.Builder
		first := true
		for i, c := range cols {
			if widths[i] == 0 {
				continue
			}
			if !first {
				b.WriteByte(' ')
			}
			first = false
			s := cell(row[i], widths[i], c.right)
			if paint != nil {
				s = paint(r, i, s)
			}
			b.WriteString(s)
		}
		rows = append(rows, strings.TrimRight(b.String(), " "))
	}
	return header, rows
}

// window returns the first index of a view of n rows over total rows that
// keeps sel visible.
func window(sel, n, total int) int {
	if total <= n || sel < 0 {
		return 0
	}
	return min(max(sel-n/2, 0), total-n)
}

// Workers.

var workerCols = []column{
	{title: "NAME", min: 6, max: 20},
	{title: "STATUS", min: 6, max: 10},
	{title: "AGENT", min: 5, max: 10, drop: 1},
	{title: "TASK", min: 4, max: 12},
	{title: "GIT", min: 8, max: 30, drop: 5},
	{title: "TOOLS", min: 5, max: 6, drop: 3, right: true},
	{title: "TOKENS", min: 6, max: 7, drop: 2, right: true},
	{title: "ACTIVITY", min: 10, max: 60, drop: 4, flex: true},
	{title: "TIME", min: 5, max: 7, drop: 6, right: true},
}

func (m *Model) workersBody(f *fleet, w, h int) []string {
	rows := f.workerRows()
	st := m.st
	if len(rows) == 0 {
		if f.conn == connNever {
			return []string{"", "  connecting to " + f.name() + "…"}
		}
		return []string{"", "  no workers yet"}
	}
	now := m.now()
	cells := make([][]string, len(rows))
	for i, r := range rows {
		c := []string{oneLine(r.ref()), oneLine(r.status), "", "", "", "", "", "", ""}
		if s := r.w; s != nil {
			c[2] = oneLine(s.AgentType)
			c[3] = oneLine(s.TaskID)
			c[4] = gitCell(s.Git)
			c[5] = strconv.FormatInt(s.ToolUseCount, 10)
			c[6] = fmtTokens(s.TokenCount)
			c[7] = firstLine(s.RecentActivity)
			c[8] = workerDuration(s, now)
		}
		cells[i] = c
	}
	_, sel, _ := m.selectedWorker()
	header, lines := m.table(workerCols, cells, w-2, func(row, col int, s string) string {
		if col == 1 {
			return st.status(rows[row].status, s)
		}
		return s
	})
	tableRows := min(len(lines), max(h-1, 1))
	if len(rows) > 2 && h >= 12 {
		tableRows = min(len(lines), max(h/2-1, 3))
	}
	top := window(sel, tableRows, len(lines))
	out := []string{"  " + header}
	for i := top; i < top+tableRows && i < len(lines); i++ {
		if i == sel {
			if st.on {
				out = append(out, st.paint(st.sel, "▸ "+ansi.Strip(lines[i])))
			} else {
				out = append(out, "▸ "+lines[i])
			}
		} else {
			out = append(out, "  "+lines[i])
		}
	}
	if rest := h - len(out); rest >= 3 && sel >= 0 {
		out = append(out, "")
		out = append(out, m.workerPanel(f, rows[sel], w, rest-1)...)
	}
	return out
}

// workerPanel is the selected worker's details under the table.
func (m *Model) workerPanel(f *fleet, r workerRow, w, h int) []string {
	st := m.st
	now := m.now()
	title := "── " + oneLine(r.ref()) + " "
	out := []string{st.paint(st.bold, title) + st.paint(st.dim, strings.Repeat("─", max(w-ansi.StringWidth(title), 0)))}
	if s := r.w; s != nil {
		var p []string
		if s.AgentType != "" {
			p = append(p, oneLine(s.AgentType))
		}
		if s.TaskID != "" {
			p = append(p, "task "+oneLine(s.TaskID))
		}
		if d := workerDuration(s, now); d != "" {
			p = append(p, d)
		}
		p = append(p, "tools "+strconv.FormatInt(s.ToolUseCount, 10))
		tok := "tokens " + fmtTokens(s.TokenCount)
		if s.InputTokens != nil && s.OutputTokens != nil {
			tok += " (in " + fmtTokens(*s.InputTokens) + ", out " + fmtTokens(*s.OutputTokens) + ")"
		}
		p = append(p, tok)
		if len(s.TopTools) > 0 {
			tools := make([]string, 0, 3)
			for _, t := range s.TopTools[:min(len(s.TopTools), 3)] {
				tools = append(tools, oneLine(t))
			}
			p = append(p, "top "+strings.Join(tools, ", "))
		}
		out = append(out, strings.Join(p, " · "))
		if g := s.Git; g != nil {
			out = append(out, m.gitLines(g, w)...)
		}
	}
	lg := f.log(r.name, r.id)
	if lg != nil && lg.lines.len() > 0 && len(out) < h-1 {
		out = append(out, st.paint(st.dim, "recent (enter for the transcript):"))
		n := min(h-len(out), lg.lines.len())
		for i := lg.lines.len() - n; i < lg.lines.len(); i++ {
			out = append(out, "  "+m.transcriptLine(lg.lines.at(i), w-2, ""))
		}
	}
	if len(out) > h {
		out = out[:h]
	}
	return out
}

func (m *Model) gitLines(g *protocol.WorkerGit, w int) []string {
	st := m.st
	s := "git " + oneLine(g.Branch)
	if g.BaseBranch != "" {
		s += " → " + oneLine(g.BaseBranch)
	}
	s += fmt.Sprintf(" · ↑%d ↓%d", g.Ahead, g.Behind)
	switch {
	case g.Merged:
		s += " · " + st.paint(st.good, "merged")
		if g.MergedInto != "" {
			s += " into " + oneLine(g.MergedInto)
		}
	case g.Mergeable == nil:
		s += " · mergeable ?"
	case *g.Mergeable:
		s += " · mergeable " + st.paint(st.good, "✓")
	default:
		s += " · mergeable " + st.paint(st.bad, "✗")
	}
	s += " · " + plural(int(g.FilesChanged), "file") + fmt.Sprintf(" +%d −%d", g.LinesAdded, g.LinesRemoved)
	if g.Uncommitted > 0 {
		s += " · " + strconv.FormatInt(g.Uncommitted, 10) + " uncommitted"
	}
	if g.WorktreeMissing {
		s += " · " + st.paint(st.warn, "worktree missing")
	}
	out := []string{s}
	if len(g.Conflicts) > 0 {
		c := make([]string, len(g.Conflicts))
		for i, x := range g.Conflicts {
			c[i] = oneLine(x)
		}
		out = append(out, st.paint(st.bad, "  conflicts: ")+strings.Join(c, ", "))
	}
	for i, fl := range g.Files {
		if i == 3 {
			out = append(out, st.paint(st.dim, "  … "+plural(int(g.FilesChanged)-3, "more file")))
			break
		}
		mark := "?"
		if r := []rune(oneLine(fl.Status)); len(r) > 0 {
			mark = strings.ToUpper(string(r[0]))
		}
		line := fmt.Sprintf("  %s %s", mark, oneLine(fl.Path))
		if fl.Binary {
			line += " (binary)"
		} else {
			line += fmt.Sprintf(" +%d −%d", fl.Added, fl.Removed)
		}
		out = append(out, line)
	}
	return out
}

// gitCell is the Workers table's git column: branch, ahead/behind,
// mergeable and changed files.
func gitCell(g *protocol.WorkerGit) string {
	if g == nil {
		return ""
	}
	s := clipRunes(oneLine(g.Branch), 14) + fmt.Sprintf(" ↑%d↓%d", g.Ahead, g.Behind)
	switch {
	case g.Merged:
		s += " merged"
	case g.Mergeable == nil:
		s += " ?"
	case *g.Mergeable:
		s += " ✓"
	default:
		s += " ✗"
	}
	return s + " " + plural(int(g.FilesChanged), "file")
}

func workerDuration(s *protocol.FleetWorkerSummary, now time.Time) string {
	switch {
	case s.DurationMs != nil:
		return fmtDur(time.Duration(*s.DurationMs) * time.Millisecond)
	case s.StartedAt > 0 && s.CompletedAt >= s.StartedAt:
		return fmtDur(time.Duration(s.CompletedAt-s.StartedAt) * time.Millisecond)
	case s.StartedAt > 0:
		return fmtDur(now.Sub(time.UnixMilli(s.StartedAt)))
	}
	return ""
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

func (m *Model) detailBody(f *fleet, w, h int) []string {
	st := m.st
	r, _, ok := m.selectedWorker()
	if !ok {
		return m.workersBody(f, w, h)
	}
	lg := f.log(r.name, r.id)
	title := []part{{st.paint(st.bold, oneLine(r.ref())), 9}, {st.status(r.status, oneLine(r.status)), 8}}
	if r.w != nil && r.w.Git != nil {
		title = append(title, part{gitCell(r.w.Git), 5})
	}
	right := ""
	if lg != nil {
		title = append(title, part{plural(lg.lines.len(), "line"), 6})
		if m.follow {
			right = st.paint(st.good, "following")
		} else {
			right = st.paint(st.warn, "paused (f follows)")
		}
		if m.search != "" {
			matches := searchLines(lg, m.search)
			pos := "0"
			if i := slices.Index(matches, m.match); i >= 0 {
				pos = strconv.Itoa(i + 1)
			}
			right = fmt.Sprintf("“%s” %s/%d · ", clipRunes(oneLine(m.search), 20), pos, len(matches)) + right
		}
	}
	out := []string{spread(joinParts(title, " · ", w-ansi.StringWidth(right)-1), right, w)}
	if lg == nil || lg.lines.len() == 0 {
		return append(out, "", "  no transcript lines from this worker yet")
	}
	top := m.screenTop(lg)
	rows := h - 1
	for i := 0; i < rows; i++ {
		seq := top + int64(i)
		idx := int(seq - lg.lines.firstSeq())
		if idx >= lg.lines.len() {
			break
		}
		t := lg.lines.at(idx)
		switch {
		case m.search == "":
			out = append(out, m.transcriptLine(t, w, ""))
		case seq == m.match:
			line := m.transcriptLine(t, w-1, m.search)
			if st.on {
				line = st.paint(st.curMatch, "▶") + line
			} else {
				line = ">" + line
			}
			out = append(out, line)
		default:
			out = append(out, " "+m.transcriptLine(t, w-1, m.search))
		}
	}
	return out
}

// Tasks.

var taskCols = []column{
	{title: "ID", min: 4, max: 12},
	{title: "STATUS", min: 6, max: 11},
	{title: "OWNER", min: 5, max: 16, drop: 1},
	{title: "SUBJECT", min: 10, max: 200, flex: true},
}

func (m *Model) tasksBody(f *fleet, w, h int) []string {
	s := f.state
	if s == nil {
		return []string{"", "  no task state from this fleet yet"}
	}
	t := s.Tasks
	out := []string{fmt.Sprintf("%d tasks · %d done · %d running · %d pending · %d blocked", t.Total, t.Done, t.Running, t.Pending, t.Blocked)}
	if int64(len(t.Items)) < t.Total && len(t.Items) > 0 {
		out[0] += m.st.paint(m.st.dim, fmt.Sprintf(" (showing %d)", len(t.Items)))
	}
	if len(t.Items) == 0 {
		return append(out, "", "  no task items")
	}
	cells := make([][]string, len(t.Items))
	for i, it := range t.Items {
		cells[i] = []string{oneLine(it.ID), oneLine(it.Status), oneLine(it.Owner), oneLine(it.Subject)}
	}
	header, lines := m.table(taskCols, cells, w-2, func(row, col int, s string) string {
		if col == 1 {
			return m.st.status(t.Items[row].Status, s)
		}
		return s
	})
	out = append(out, "", "  "+header)
	n := max(h-len(out), 1)
	m.taskTop = min(m.taskTop, max(len(lines)-n, 0))
	for _, l := range lines[m.taskTop:min(m.taskTop+n, len(lines))] {
		out = append(out, "  "+l)
	}
	return out
}

// Feed.

func (m *Model) feedMatch(e feedEntry) bool {
	switch m.feedKind {
	case feedErrors:
		if !e.isErr && e.kind != feedErrors {
			return false
		}
	case feedAll:
	default:
		if e.kind != m.feedKind {
			return false
		}
	}
	if m.feedFilter == "" {
		return true
	}
	q := strings.ToLower(m.feedFilter)
	return strings.Contains(strings.ToLower(e.who+" "+e.what), q)
}

func (m *Model) feedBody(f *fleet, w, h int) []string {
	st := m.st
	var shown []feedEntry
	for i := 0; i < f.feed.len(); i++ {
		if e := f.feed.at(i); m.feedMatch(e) {
			shown = append(shown, e)
		}
	}
	title := fmt.Sprintf("feed · kind: %s", feedKindNames[m.feedKind])
	if m.feedFilter != "" {
		title += " · filter: “" + oneLine(m.feedFilter) + "”"
	}
	title += " · " + plural(len(shown), "entry")
	n := h - 1
	m.feedBack = min(m.feedBack, max(len(shown)-n, 0))
	if m.feedBack > 0 {
		title += st.paint(st.warn, fmt.Sprintf(" · %d newer below (end)", m.feedBack))
	}
	out := []string{st.paint(st.bold, title)}
	if len(shown) == 0 {
		return append(out, "", "  nothing in the feed yet")
	}
	end := len(shown) - m.feedBack
	loc := m.now().Location()
	for _, e := range shown[max(end-n, 0):end] {
		ts := "        "
		if e.ts > 0 {
			ts = time.UnixMilli(e.ts).In(loc).Format("15:04:05")
		}
		icon := e.icon
		switch {
		case e.isErr:
			icon = st.paint(st.bad, icon)
		case e.kind == feedTools:
			icon = st.paint(st.info, icon)
		case e.kind == feedFiles:
			icon = st.paint(st.warn, icon)
		default:
			icon = st.paint(st.dim, icon)
		}
		out = append(out, st.paint(st.dim, ts)+" "+icon+" "+st.paint(st.bold, e.who)+" "+e.what)
	}
	return out
}

// Timeline.

func (m *Model) timelineBody(f *fleet, w, h int) []string {
	st := m.st
	a := f.analytics
	if a == nil || (len(a.WorkerTimeline) == 0 && len(a.ToolUsage) == 0) {
		return []string{"", "  no analytics from this fleet yet"}
	}
	now := m.now().UnixMilli()
	var out []string
	if tl := a.WorkerTimeline; len(tl) > 0 {
		t0, t1 := tl[0].StartedAt, int64(0)
		for _, e := range tl {
			t0 = min(t0, e.StartedAt)
			t1 = max(t1, timelineEnd(e, now))
		}
		span := max(t1-t0, 1)
		nameW := 4
		for _, e := range tl {
			nameW = max(nameW, ansi.StringWidth(oneLine(cmp.Or(e.Name, e.ID))))
		}
		nameW = min(nameW, 16)
		statW := 9
		barW := w - nameW - statW - 2
		if barW < 4 {
			statW, barW = 0, max(w-nameW-1, 1)
		}
		loc := m.now().Location()
		out = append(out, st.paint(st.bold, "workers")+st.paint(st.dim, fmt.Sprintf(" · %s → %s (%s)",
			time.UnixMilli(t0).In(loc).Format("15:04:05"), time.UnixMilli(t1).In(loc).Format("15:04:05"),
			fmtDur(time.Duration(span)*time.Millisecond))))
		rows := len(tl)
		budget := h - 1
		if len(a.ToolUsage) > 0 {
			budget = max(h-min(len(a.ToolUsage), 5)-3, 1)
		}
		if rows > budget {
			rows = max(budget-1, 0)
		}
		for _, e := range tl[:rows] {
			s := int((e.StartedAt - t0) * int64(barW) / span)
			end := int((timelineEnd(e, now) - t0) * int64(barW) / span)
			s = min(max(s, 0), barW-1)
			end = min(max(end, s+1), barW)
			bar := st.paint(st.barOff, strings.Repeat("·", s))
			body := strings.Repeat("█", end-s)
			if e.Status == protocol.WorkerFailed {
				bar += st.paint(st.barFail, body)
			} else {
				bar += st.paint(st.barOn, body)
			}
			bar += st.paint(st.barOff, strings.Repeat("·", barW-end))
			line := cell(oneLine(cmp.Or(e.Name, e.ID)), nameW, false) + " " + bar
			if statW > 0 {
				line += " " + st.status(e.Status, ansi.Truncate(oneLine(e.Status), statW, "…"))
			}
			out = append(out, line)
		}
		if rows < len(tl) {
			out = append(out, st.paint(st.dim, "… "+plural(len(tl)-rows, "more worker")))
		}
	}
	if tu := a.ToolUsage; len(tu) > 0 && len(out) < h-1 {
		tools := slices.Clone(tu)
		slices.SortStableFunc(tools, func(x, y protocol.ToolUsageEntry) int { return cmp.Compare(y.Count, x.Count) })
		if len(out) > 0 {
			out = append(out, "")
		}
		out = append(out, st.paint(st.bold, "tool usage"))
		nameW := 4
		for _, t := range tools {
			nameW = max(nameW, ansi.StringWidth(oneLine(t.ToolName)))
		}
		nameW = min(nameW, 16)
		top := tools[0].Count
		countW := len(strconv.FormatInt(top, 10))
		barW := min(max(w-nameW-countW-2, 1), 50)
		n := min(len(tools), h-len(out))
		for _, t := range tools[:max(n, 0)] {
			cells := 0
			if top > 0 {
				cells = int(math.Round(float64(t.Count) / float64(top) * float64(barW)))
			}
			cells = max(cells, 1)
			out = append(out, cell(oneLine(t.ToolName), nameW, false)+" "+
				st.paint(st.info, strings.Repeat("▇", cells))+strings.Repeat(" ", barW-cells)+" "+
				cell(strconv.FormatInt(t.Count, 10), countW, true))
		}
	}
	return out
}

func timelineEnd(e protocol.WorkerTimelineEntry, now int64) int64 {
	if e.CompletedAt > 0 {
		return e.CompletedAt
	}
	return max(now, e.StartedAt)
}

// Requests.

func (m *Model) requestsBody(f *fleet, w, h int) []string {
	st := m.st
	var all []string
	selStart, selEnd := 0, 0
	sel, _ := m.selectedRequest()
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
			hl := r == sel && j == m.choiceSel
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
	start := min(base+m.reqScroll, max(len(all)-h, base))
	m.reqScroll = start - base
	out := all[start:]
	if len(out) > h && h > 1 {
		out = append(out[:h-1:h-1], st.paint(st.dim, fmt.Sprintf("↓ %d more lines (pgdn)", len(out)-h+1)))
	}
	return out
}

// Conversation.

func (m *Model) convBody(f *fleet, w, h int) []string {
	st := m.st
	if f.conv.len() == 0 {
		return []string{"", "  no conversation yet: press : to prompt the coordinator"}
	}
	need := h + m.convBack
	var lines []string // newest entries last, built from the end
	for i := f.conv.len() - 1; i >= 0 && len(lines) < need; i-- {
		lines = append(m.convLines(f.conv.at(i), w), lines...)
	}
	m.convBack = min(m.convBack, max(len(lines)-h, 0))
	end := len(lines) - m.convBack
	out := lines[max(end-h, 0):end]
	if m.convBack > 0 && len(out) > 0 {
		out[len(out)-1] = st.paint(st.warn, fmt.Sprintf("↓ %d newer lines (end)", m.convBack))
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

// Native.

func (m *Model) nativeBody(f *fleet, w, h int) []string {
	st := m.st
	n := &f.native
	var out []string
	if len(n.roots) > 1 {
		out = append(out, st.paint(st.bold, "roots"))
		for i, r := range n.roots {
			mark := "  "
			if i == n.rootSel {
				mark = "▸ "
			}
			out = append(out, fmt.Sprintf("%s%s rev %d · intent %s · phase %s", mark, oneLine(r.ID), r.Revision, oneLine(r.Intent), oneLine(r.Phase)))
		}
		out = append(out, "")
	}
	s := n.status
	switch {
	case s != nil:
		out = append(out, st.paint(st.bold, "root "+oneLine(s.ID))+fmt.Sprintf(" · revision %d", s.Revision))
		out = append(out, "intent "+oneLine(s.Intent)+" · phase "+oneLine(s.Phase))
		g := "grant: session " + clipRunes(oneLine(s.Grant.SessionID), 12) + " · policy " + oneLine(s.Grant.PolicyVersion)
		if s.PreviousRootID != "" {
			g += " · previous root " + oneLine(s.PreviousRootID)
		}
		out = append(out, st.paint(st.dim, g))
		counts := map[string]int{}
		for _, t := range s.Tasks {
			counts[oneLine(t.State)]++
		}
		keys := make([]string, 0, len(counts))
		for k := range counts {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var tc []string
		for _, k := range keys {
			tc = append(tc, fmt.Sprintf("%d %s", counts[k], k))
		}
		line := "tasks: " + strconv.Itoa(len(s.Tasks))
		if len(tc) > 0 {
			line += " (" + strings.Join(tc, ", ") + ")"
		}
		uncertain := 0
		for _, e := range s.Effects {
			if e.State == "uncertain" {
				uncertain++
			}
		}
		line += " · effects: " + strconv.Itoa(len(s.Effects))
		if uncertain > 0 {
			line += st.paint(st.warn, fmt.Sprintf(" (%d uncertain)", uncertain))
		}
		out = append(out, line)
		out = append(out, st.paint(st.bold, fmt.Sprintf("holds (%d)", len(s.Holds))))
		for _, hd := range s.Holds {
			l := "  " + clipRunes(oneLine(hd.HoldHash), 12) + " " + oneLine(hd.Reason)
			if hd.TaskID != "" {
				l += " · task " + oneLine(hd.TaskID)
			}
			out = append(out, l)
		}
		out = append(out, st.paint(st.bold, fmt.Sprintf("decisions (%d)", len(s.Decisions))))
		for _, d := range s.Decisions {
			l := fmt.Sprintf("  %s %s task %s: %s", oneLine(d.ID), oneLine(d.Verdict), oneLine(d.TaskID), oneLine(d.Rationale))
			if d.Consumed {
				l += st.paint(st.dim, " (consumed)")
			}
			out = append(out, l)
		}
		out = append(out, st.paint(st.bold, fmt.Sprintf("pending receipts (%d)", len(s.PendingReceipts))))
		for _, rc := range s.PendingReceipts {
			out = append(out, fmt.Sprintf("  %s %s → rev %d · %s", oneLine(rc.OperationID), oneLine(rc.Action), rc.Revision, oneLine(rc.Status)))
		}
	case len(n.roots) == 1:
		r := n.roots[0]
		out = append(out, fmt.Sprintf("root %s rev %d · intent %s · phase %s", oneLine(r.ID), r.Revision, oneLine(r.Intent), oneLine(r.Phase)),
			st.paint(st.dim, "press r for its status"))
	case len(n.roots) == 0:
		out = append(out, "no native root status yet: press r to load it (native sessions only)")
	}
	if n.last != "" {
		out = append(out, "")
		if n.lastErr {
			out = append(out, wrapLines(st.paint(st.bad, "last: ")+n.last, w)...)
		} else {
			out = append(out, wrapLines("last: "+n.last, w)...)
		}
	}
	if c := n.lastMut; c != nil {
		rev := ""
		if c.req.ExpectedRevision != nil {
			rev = " at revision " + itoa(*c.req.ExpectedRevision)
		}
		line := "pending: " + c.req.Action + " root " + oneLine(c.req.RootID) + rev + " · " + c.req.OperationID
		if c.uncertain {
			line += st.paint(st.warn, " · uncertain (the connection dropped): R retries it with the same operation id")
		} else {
			line += st.paint(st.dim, " · waiting for the result")
		}
		out = append(out, wrapLines(line, w)...)
	}
	return out
}

// wrapLines wraps s to w cells.
func wrapLines(s string, w int) []string {
	return strings.Split(ansi.Wrap(s, max(w, 4), ""), "\n")
}

// Intel.

func (m *Model) intelBody(f *fleet, w, h int) []string {
	st := m.st
	if f.intel == nil && f.evolution == nil && f.store == nil && f.experiment == nil {
		return []string{"", "  no intel from this fleet"}
	}
	var out []string
	if in := f.intel; in != nil {
		s := in.Summary
		out = append(out, st.paint(st.bold, "intel"))
		out = append(out, wrapLines(fmt.Sprintf("runs %d · failed %d · success %s · sessions %d · tokens %s · avg session %s",
			s.TotalAgentRuns, s.FailedRuns, pct(s.SuccessRate), s.SessionCount, fmtTokens(s.TotalTokens),
			fmtDur(time.Duration(s.AvgSessionDurationMs)*time.Millisecond)), w)...)
		for i, e := range s.TopErrors {
			if i == 3 {
				break
			}
			out = append(out, fmt.Sprintf("  %s %s", st.paint(st.bad, strconv.FormatInt(e.Count, 10)+"×"), oneLine(e.Message)))
		}
		for i, sg := range in.Suggestions {
			if i == 3 {
				break
			}
			out = append(out, fmt.Sprintf("  suggestion %s %s (%s)", pct(sg.Confidence), oneLine(sg.Title), oneLine(sg.SuggestionType)))
		}
		if len(in.Skills) > 0 {
			skills := slices.Clone(in.Skills)
			slices.SortStableFunc(skills, func(a, b protocol.FleetIntelSkill) int { return cmp.Compare(b.Uses, a.Uses) })
			var p []string
			for _, sk := range skills[:min(len(skills), 5)] {
				p = append(p, fmt.Sprintf("%s %d", oneLine(sk.Name), sk.Uses))
			}
			out = append(out, "  skills: "+strings.Join(p, ", "))
		}
	}
	if ev := f.evolution; ev != nil {
		out = append(out, st.paint(st.bold, "evolution")+fmt.Sprintf(" · %s · %d applied", plural(len(ev.Shadows), "shadow"), len(ev.Timeline)))
		for i, sh := range ev.Shadows {
			if i == 3 {
				break
			}
			l := "  " + oneLine(sh.Skill) + ": " + oneLine(sh.Summary)
			if sh.Status != "" {
				l += " · " + oneLine(sh.Status)
			}
			if sh.Trials != nil {
				l += " · " + plural(int(*sh.Trials), "trial")
			}
			if sh.BaselineSuccessRate != nil && sh.CandidateSuccessRate != nil {
				l += " · " + pct(*sh.BaselineSuccessRate) + " → " + pct(*sh.CandidateSuccessRate)
			}
			out = append(out, l)
		}
		if n := len(ev.Timeline); n > 0 {
			r := ev.Timeline[n-1]
			l := "  latest: " + oneLine(r.Skill) + ": " + oneLine(r.Summary)
			if r.SuccessRateBefore != nil && r.SuccessRateAfter != nil {
				l += " · " + pct(*r.SuccessRateBefore) + " → " + pct(*r.SuccessRateAfter)
			}
			out = append(out, l)
		}
	}
	if sr := f.store; sr != nil {
		var p []string
		for _, c := range sr.Counts {
			p = append(p, fmt.Sprintf("%s %d", oneLine(c.Name), c.Count))
		}
		out = append(out, st.paint(st.bold, "store")+" · "+strings.Join(p, " · "))
		if len(sr.Steering) > 0 {
			s := sr.Steering[len(sr.Steering)-1]
			out = append(out, "  latest steering: "+firstLine(s.Text))
		}
	}
	if ex := f.experiment; ex != nil {
		out = append(out, st.paint(st.bold, "experiments")+" · "+strconv.Itoa(len(ex.Experiments)))
		for i, e := range ex.Experiments {
			if i == 4 {
				break
			}
			l := "  " + oneLine(e.Name) + " · " + oneLine(e.Status)
			if r := e.LatestRun; r != nil {
				if r.Winner != "" {
					l += " · winner " + st.paint(st.good, oneLine(r.Winner))
					for _, v := range r.Variants {
						if v.Variant == r.Winner && v.Lift != nil {
							l += fmt.Sprintf(" (lift %+.0f%%, pass %s)", *v.Lift*100, pct(v.PassRate))
						}
					}
				} else {
					l += " · inconclusive"
				}
			}
			out = append(out, l)
		}
	}
	return out
}

// Overlays.

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
		if f != nil && len(f.pending) > 0 {
			line += " · " + st.paint(st.warn, "⚠ "+plural(len(f.pending), "request")+" waiting")
		}
		out = append(out, line)
		if r.Cwd != "" {
			out = append(out, st.paint(st.dim, "    "+oneLine(r.Cwd)))
		}
	}
	return out
}

// Formatting.

// fmtDur formats a duration compactly: 45ms, 1.2s, 12s, 5m10s, 1h02m, 3d04h.
func fmtDur(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	case d < 10*time.Second && d%time.Second != 0:
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
	case d < time.Minute:
		return strconv.Itoa(int(d.Seconds())) + "s"
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%02dh", int(d.Hours())/24, int(d.Hours())%24)
}

// fmtTokens formats a count compactly: 999, 12.3k, 1.2M.
func fmtTokens(n int64) string {
	switch {
	case n < 1000:
		return strconv.FormatInt(n, 10)
	case n < 1_000_000:
		return strconv.FormatFloat(float64(n)/1000, 'f', 1, 64) + "k"
	}
	return strconv.FormatFloat(float64(n)/1_000_000, 'f', 1, 64) + "M"
}

func pct(f float64) string {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "?"
	}
	return strconv.FormatFloat(f*100, 'f', 0, 64) + "%"
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// prefix is the first n runes of s (a short id).
func prefix(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n])
	}
	return s
}

// plural is "1 file", "2 files", "3 entries".
func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	if strings.HasSuffix(word, "y") && !strings.HasSuffix(word, "ey") {
		return strconv.Itoa(n) + " " + word[:len(word)-1] + "ies"
	}
	return strconv.Itoa(n) + " " + word + "s"
}
