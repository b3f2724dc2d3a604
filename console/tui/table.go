package tui

import (
	"slices"
	"strings"

	"github.com/charmbracelet/x/ansi"
)

// Table helpers: columns that drop and shrink to fit the width, padded
// cells, and the window of rows that keeps the selection in view.

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
