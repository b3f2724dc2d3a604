package tui

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/agents-fleet/fleet/protocol"
)

// The Workers view (1): the workers table with the selected worker's
// details under it. enter opens the worker's transcript (transcript.go),
// d its diff (diff.go); the landing keys (d m a p x t) act on the selected
// worker from the table and from both panes.

// workersTab is the Workers view's state.
type workersTab struct {
	sel        string         // selected worker id (or name)
	transcript transcriptPane // the selected worker's transcript, when open
	diff       *diffPane      // a worker's diff, shown in place of the table or transcript
}

func (t *workersTab) reset() {
	t.sel = ""
	t.transcript = transcriptPane{follow: true, match: -1}
	t.diff = nil
}

func (t *workersTab) hint(*Model) string {
	switch {
	case t.diff != nil:
		return "↑↓ pgup pgdn home end scroll · esc back · d again · m merge · a apply · p PR · t tell"
	case t.transcript.open:
		return "↑↓ pgup pgdn scroll · f follow · / search · n N next/prev · d diff · m merge · a apply · p PR · x cancel · t tell · esc back"
	}
	return "↑↓ select · enter transcript · d diff · m merge · a apply · p PR · x cancel · t tell · ? help"
}

func (t *workersTab) body(m *Model, f *fleet, w, h int) []string {
	switch {
	case t.diff != nil:
		return t.diff.body(m, w, h)
	case t.transcript.open:
		return t.transcriptBody(m, f, w, h)
	}
	return t.tableBody(m, f, w, h)
}

// workerRow is one row of the Workers table.
type workerRow struct {
	id, name string // raw, as the fleet knows the worker
	w        *protocol.FleetWorkerSummary
	status   string // raw
}

// workerRows are f's workers: those of the last fleetState, else those of
// the last status.
func (f *fleet) workerRows() []workerRow {
	if f == nil {
		return nil
	}
	var rows []workerRow
	if f.fold.Fleet != nil && len(f.fold.Fleet.Workers) > 0 {
		for i := range f.fold.Fleet.Workers {
			w := &f.fold.Fleet.Workers[i]
			rows = append(rows, workerRow{id: w.ID, name: w.Name, w: w, status: shownStatus(w)})
		}
		return rows
	}
	if f.fold.Status != nil {
		for _, w := range f.fold.Status.Workers {
			rows = append(rows, workerRow{id: w.Name, name: w.Name, status: w.Status})
		}
	}
	return rows
}

// ref is the name commands use for the worker.
func (r workerRow) ref() string {
	if r.name != "" {
		return r.name
	}
	return r.id
}

// selected is f's selected worker and its row; ok is false when f has no
// workers.
func (t *workersTab) selected(f *fleet) (r workerRow, i int, ok bool) {
	rows := f.workerRows()
	if len(rows) == 0 {
		return workerRow{}, -1, false
	}
	for i, r := range rows {
		if r.id == t.sel {
			return r, i, true
		}
	}
	return rows[0], 0, true
}

func (t *workersTab) key(m *Model, f *fleet, name, text string) ([]Action, bool) {
	rows := f.workerRows()
	w, i, ok := t.selected(f)
	switch {
	case t.diff != nil:
		if t.diffKey(m, name) {
			return nil, true
		}
	case t.transcript.open:
		if t.transcriptKey(m, f, name, text) {
			return nil, true
		}
	default:
		switch name {
		case "up", "down":
			if ok {
				i = min(max(i+step(name), 0), len(rows)-1)
				t.sel = rows[i].id
			}
			return nil, true
		case "home":
			if ok {
				t.sel = rows[0].id
			}
			return nil, true
		case "end":
			if ok {
				t.sel = rows[len(rows)-1].id
			}
			return nil, true
		case "enter":
			if ok {
				t.sel = w.id
				p := &t.transcript
				p.open, p.follow = true, true
				p.search, p.match = "", -1
			}
			return nil, true
		}
	}
	if !ok || len(text) != 1 {
		return nil, false
	}
	ref := w.ref()
	switch text {
	case "d":
		t.sel = w.id // the pane's worker keeps the keys' selection
		return t.openDiff(m, ref), true
	case "m":
		m.askYesNo("merge "+oneLine(ref)+"? y/n", func() []Action { return m.sendPrompt("/merge " + ref) })
		return nil, true
	case "p":
		m.askYesNo("open a pull request for "+oneLine(ref)+"? y/n", func() []Action { return m.sendPrompt("/pr " + ref) })
		return nil, true
	case "x":
		m.askYesNo("cancel worker "+oneLine(ref)+"? y/n", func() []Action { return m.sendPrompt("/cancel " + ref) })
		return nil, true
	case "t":
		m.focusPrompt("/tell " + ref + " ")
		return nil, true
	case "a":
		// Apply is the one landing step that works on the operator's own
		// work tree, not the fleet's: it runs `fleet apply` here.
		if f == nil || f.fold.Welcome == nil || f.fold.Welcome.SessionID == "" || f.fold.Welcome.Cwd == "" {
			m.flash = "apply needs the fleet's session and folder (not known yet)"
			return nil, true
		}
		sid, dir, id := f.fold.Welcome.SessionID, f.fold.Welcome.Cwd, w.id
		m.askYesNo("apply "+oneLine(ref)+"'s change to the work tree in "+oneLine(dir)+"? y/n", func() []Action {
			return []Action{RunFleet{Fleet: f.ref.ID, Dir: dir, Args: []string{"apply", sid + "/" + id}}}
		})
		return nil, true
	}
	return nil, false
}

// shownStatus is a worker's STATUS cell: the protocol's coarse status, or
// its state when that says more (waiting for the operator or for memory,
// rate-limited, stalled).
func shownStatus(w *protocol.FleetWorkerSummary) string {
	switch w.State {
	case protocol.WorkerStateWaitingForOperator:
		return "needs you"
	case protocol.WorkerStateWaitingForMemory:
		return "memory"
	case protocol.WorkerStateRateLimited:
		return "rate-limited"
	case protocol.WorkerStateStalled:
		return "stalled"
	}
	return w.Status
}

// workerCols are the Workers table's columns. As the screen narrows,
// ACTIVITY shrinks first, then the columns with a drop rank go, lowest
// first; NAME, STATUS and TASK stay.
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

// hostCol is the worker host a worker runs on, after AGENT: the table
// shows it only when some worker runs on one, so a fleet without hosts
// looks as it always did. It goes after TOOLS, TOKENS and ACTIVITY.
var hostCol = column{title: "HOST", min: 4, max: 16, drop: 5}

// withHost returns workerCols with hostCol after AGENT.
func withHost() []column { return slices.Insert(slices.Clone(workerCols), 3, hostCol) }

// anyHost reports whether some row's worker runs on a worker host.
func anyHost(rows []workerRow) bool {
	return slices.ContainsFunc(rows, func(r workerRow) bool { return r.w != nil && r.w.Host != "" })
}

// tableBody draws the table and, when there is room, the selected
// worker's details.
func (t *workersTab) tableBody(m *Model, f *fleet, w, h int) []string {
	rows := f.workerRows()
	st := m.st
	if len(rows) == 0 {
		if f.conn == connNever {
			return []string{"", "  connecting to " + f.name() + "…"}
		}
		return []string{"", "  no workers yet"}
	}
	now := m.now()
	cols, hosted := workerCols, anyHost(rows)
	if hosted {
		cols = withHost()
	}
	cells := make([][]string, len(rows))
	for i, r := range rows {
		c := []string{oneLine(r.ref()), oneLine(r.status), "", "", "", "", "", "", ""}
		host := ""
		if s := r.w; s != nil {
			c[2] = oneLine(s.AgentType)
			c[3] = oneLine(s.TaskID)
			c[4] = gitCell(s.Git)
			c[5] = strconv.FormatInt(s.ToolUseCount, 10)
			c[6] = fmtTokens(s.TokenCount)
			c[7] = firstLine(s.RecentActivity)
			c[8] = workerDuration(s, now)
			host = oneLine(s.Host)
		}
		if hosted {
			c = slices.Insert(c, 3, host)
		}
		cells[i] = c
	}
	_, sel, _ := t.selected(f)
	header, lines := m.table(cols, cells, w-2, func(row, col int, s string) string {
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
		if s.Host != "" {
			p = append(p, "on "+oneLine(s.Host))
		}
		if s.TaskID != "" {
			p = append(p, "task "+oneLine(s.TaskID))
		}
		if d := workerDuration(s, now); d != "" {
			p = append(p, d)
		}
		if s.RSSBytes > 0 {
			p = append(p, "memory "+strconv.FormatInt(s.RSSBytes>>20, 10)+" MiB")
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
		if s.State != "" && s.State != protocol.WorkerStateWorking && s.State != protocol.WorkerStateDone {
			line := "state " + oneLine(s.State)
			if s.RateLimitedUntil > 0 {
				line += " until " + time.UnixMilli(s.RateLimitedUntil).Format("15:04")
			}
			if s.StateReason != "" {
				line += ": " + oneLine(s.StateReason)
			}
			out = append(out, st.paint(st.warn, clipRunes(line, max(w, 10))))
		}
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
