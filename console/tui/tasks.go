package tui

import "fmt"

// The Tasks view (2): the fleet's task counts and its task table.

// tasksTab is the Tasks view's state.
type tasksTab struct {
	top int // first task row shown
}

func (t *tasksTab) reset() { t.top = 0 }

func (t *tasksTab) hint(*Model) string { return "↑↓ scroll · ? help" }

// taskCols are the Tasks table's columns; SUBJECT takes the width left.
var taskCols = []column{
	{title: "ID", min: 4, max: 12},
	{title: "STATUS", min: 6, max: 11},
	{title: "OWNER", min: 5, max: 16, drop: 1},
	{title: "SUBJECT", min: 10, max: 200, flex: true},
}

func (t *tasksTab) body(m *Model, f *fleet, w, h int) []string {
	s := f.fold.Fleet
	if s == nil {
		return []string{"", "  no task state from this fleet yet"}
	}
	sum := s.Tasks
	out := []string{fmt.Sprintf("%d tasks · %d done · %d running · %d pending · %d blocked", sum.Total, sum.Done, sum.Running, sum.Pending, sum.Blocked)}
	if int64(len(sum.Items)) < sum.Total && len(sum.Items) > 0 {
		out[0] += m.st.paint(m.st.dim, fmt.Sprintf(" (showing %d)", len(sum.Items)))
	}
	if len(sum.Items) == 0 {
		return append(out, "", "  no task items")
	}
	cells := make([][]string, len(sum.Items))
	for i, it := range sum.Items {
		cells[i] = []string{oneLine(it.ID), oneLine(it.Status), oneLine(it.Owner), oneLine(it.Subject)}
	}
	header, lines := m.table(taskCols, cells, w-2, func(row, col int, s string) string {
		if col == 1 {
			return m.st.status(sum.Items[row].Status, s)
		}
		return s
	})
	out = append(out, "", "  "+header)
	n := max(h-len(out), 1)
	t.top = min(t.top, max(len(lines)-n, 0))
	for _, l := range lines[t.top:min(t.top+n, len(lines))] {
		out = append(out, "  "+l)
	}
	return out
}

func (t *tasksTab) key(_ *Model, _ *fleet, name, _ string) ([]Action, bool) {
	switch name {
	case "up":
		t.top = max(t.top-1, 0)
		return nil, true
	case "down":
		t.top++
		return nil, true
	}
	return nil, false
}
