package tui

import (
	"fmt"
	"strings"
	"time"
)

// The Feed view (3): tool calls, file changes, inter-agent events and
// errors as they happen, newest at the bottom, filtered by kind (k) and by
// text (/).

// feedKind is the kind filter of the Feed view.
type feedKind int

const (
	feedAll feedKind = iota
	feedTools
	feedFiles
	feedHub
	feedErrors
	numFeedKinds
)

var feedKindNames = [...]string{"all", "tools", "files", "hub", "errors"}

// feedTab is the Feed view's state.
type feedTab struct {
	kind   feedKind
	filter string
	back   int // entries scrolled back from the newest
}

// reset keeps the kind and the filter: they are the operator's choice,
// not the fleet's.
func (t *feedTab) reset() { t.back = 0 }

func (t *feedTab) hint(*Model) string {
	return "/ filter · k kind (" + feedKindNames[t.kind] + ") · ↑↓ pgup pgdn scroll · end newest"
}

func (t *feedTab) key(m *Model, _ *fleet, name, text string) ([]Action, bool) {
	switch {
	case text == "/":
		m.openField(field{
			label:  "filter: ",
			hint:   "enter keep filter · esc clear",
			edited: func(q string) { t.filter, t.back = q, 0 }, // the filter applies as typed
			submit: func(q string) ([]Action, bool) {
				t.filter = q
				return nil, true
			},
			cancel: func() { t.filter = "" },
		}, t.filter)
		return nil, true
	case text == "k":
		t.kind = (t.kind + 1) % numFeedKinds
		t.back = 0
		return nil, true
	}
	return m.scrollKey(&t.back, name)
}

// match says whether e passes the kind and the text filter.
func (t *feedTab) match(e feedEntry) bool {
	switch t.kind {
	case feedErrors:
		if !e.isErr && e.kind != feedErrors {
			return false
		}
	case feedAll:
	default:
		if e.kind != t.kind {
			return false
		}
	}
	if t.filter == "" {
		return true
	}
	q := strings.ToLower(t.filter)
	return strings.Contains(strings.ToLower(e.who+" "+e.what), q)
}

func (t *feedTab) body(m *Model, f *fleet, w, h int) []string {
	st := m.st
	var shown []feedEntry
	for i := 0; i < f.feed.len(); i++ {
		if e := f.feed.at(i); t.match(e) {
			shown = append(shown, e)
		}
	}
	title := fmt.Sprintf("feed · kind: %s", feedKindNames[t.kind])
	if t.filter != "" {
		title += " · filter: “" + oneLine(t.filter) + "”"
	}
	title += " · " + plural(len(shown), "entry")
	n := h - 1
	t.back = min(t.back, max(len(shown)-n, 0))
	if t.back > 0 {
		title += st.paint(st.warn, fmt.Sprintf(" · %d newer below (end)", t.back))
	}
	out := []string{st.paint(st.bold, title)}
	if len(shown) == 0 {
		return append(out, "", "  nothing in the feed yet")
	}
	end := len(shown) - t.back
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
