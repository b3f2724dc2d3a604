package tui

import (
	"strconv"
	"strings"

	"github.com/charmbracelet/x/ansi"
)

// The numbered views. Each is a tab: it owns its state (selection, scroll
// position, filter), its keys and its body, in a file of its own
// (workers.go, tasks.go, feed.go, timeline.go, requests.go,
// conversation.go, native.go, intel.go). The Model routes keys and drawing
// to the current tab; what the fleets sent is kept apart from every tab
// (fleet.go, fold.go), so a tab only reads it.

// view is one of the numbered tabs, 1 to numViews.
type view int

const (
	viewWorkers view = iota + 1
	viewTasks
	viewFeed
	viewTimeline
	viewRequests
	viewConversation
	viewNative
	viewIntel
	numViews = int(viewIntel)
)

// The tabs' labels, long to short: the tab bar takes the longest that fit.
var (
	tabLong  = [...]string{"Workers", "Tasks", "Feed", "Timeline", "Requests", "Conversation", "Native", "Intel"}
	tabMid   = [...]string{"Workers", "Tasks", "Feed", "Timeline", "Requests", "Conv", "Native", "Intel"}
	tabShort = [...]string{"Work", "Tasks", "Feed", "Time", "Req", "Conv", "Nat", "Intel"}
)

// tab is one numbered view.
type tab interface {
	// key handles a key press in the view; ok is false for the keys it
	// leaves to the global ones. f is the selected fleet, nil for none.
	key(m *Model, f *fleet, name, text string) (acts []Action, ok bool)
	// body draws the view of f (never nil) in w×h cells.
	body(m *Model, f *fleet, w, h int) []string
	// hint is the view's key reminder; "" leaves the global one.
	hint(m *Model) string
	// reset forgets what belonged to the previous fleet: the selection and
	// the scroll position.
	reset()
}

// drawOnly gives a tab that only draws its body the rest of tab: no
// state, no keys of its own, the global hint.
type drawOnly struct{}

func (drawOnly) reset()                                              {}
func (drawOnly) hint(*Model) string                                  { return "" }
func (drawOnly) key(*Model, *fleet, string, string) ([]Action, bool) { return nil, false }

// opener is a tab that starts afresh each time it is shown.
type opener interface{ opened() }

// tabs holds the state of every view, one field a tab.
type tabs struct {
	workers  workersTab
	tasks    tasksTab
	feed     feedTab
	timeline timelineTab
	requests requestsTab
	conv     convTab
	native   nativeTab
	intel    intelTab
}

// all lists the tabs in the order of the views.
func (t *tabs) all() [numViews]tab {
	return [numViews]tab{&t.workers, &t.tasks, &t.feed, &t.timeline, &t.requests, &t.conv, &t.native, &t.intel}
}

// tab is the current view's tab.
func (m *Model) tab() tab { return m.tabs.all()[m.view-1] }

// setView makes v the current view.
func (m *Model) setView(v view) {
	if v == m.view {
		return
	}
	m.view = v
	if o, ok := m.tab().(opener); ok {
		o.opened()
	}
}

// tabBar draws the view tabs with the longest labels that fit.
func (m *Model) tabBar(w int) string {
	waiting := len(m.cur().pending())
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
