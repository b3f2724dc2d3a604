package tui

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/agents-fleet/fleet/protocol"
)

// The Timeline view (4): when each worker ran, as bars on one time axis,
// and which tools the fleet used most.

// timelineTab is the Timeline view: it only draws.
type timelineTab struct{ drawOnly }

func (timelineTab) body(m *Model, f *fleet, w, h int) []string {
	st := m.st
	a := f.fold.Analytics
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
