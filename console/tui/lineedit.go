package tui

import (
	"slices"
	"unicode"
	"unicode/utf8"

	"github.com/charmbracelet/x/ansi"

	"github.com/agents-fleet/fleet/console"
)

// The one-line text editor of the prompt and the tabs' fields, and how it
// is drawn.

// lineEditor is a one-line text field.
type lineEditor struct {
	r   []rune
	cur int
}

func (e *lineEditor) String() string { return string(e.r) }
func (e *lineEditor) len() int       { return len(e.r) }
func (e *lineEditor) clear()         { e.r, e.cur = e.r[:0], 0 }

func (e *lineEditor) set(s string) {
	e.clear()
	e.insert(s)
}

// insert types s at the cursor; line breaks and tabs of a paste become
// spaces and other control characters are dropped.
func (e *lineEditor) insert(s string) {
	var add []rune
	for _, r := range s {
		switch {
		case r == '\n' || r == '\r' || r == '\t':
			if len(add) == 0 || add[len(add)-1] != ' ' || r != '\n' {
				add = append(add, ' ')
			}
		case unicode.IsControl(r) || r == utf8.RuneError:
		default:
			add = append(add, r)
		}
	}
	e.r = slices.Insert(e.r, e.cur, add...)
	e.cur += len(add)
}

func (e *lineEditor) backspace() {
	if e.cur > 0 {
		e.r = slices.Delete(e.r, e.cur-1, e.cur)
		e.cur--
	}
}

func (e *lineEditor) del() {
	if e.cur < len(e.r) {
		e.r = slices.Delete(e.r, e.cur, e.cur+1)
	}
}

func (e *lineEditor) move(d int) { e.cur = min(max(e.cur+d, 0), len(e.r)) }

func (e *lineEditor) deleteWord() {
	i := e.cur
	for i > 0 && e.r[i-1] == ' ' {
		i--
	}
	for i > 0 && e.r[i-1] != ' ' {
		i--
	}
	e.r = slices.Delete(e.r, i, e.cur)
	e.cur = i
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
