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
)

// The screen: the headers, the tab bar, the current tab's body, the
// waiting-requests banner, the message line and the prompt line.

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
		out = append(out, m.tabBar(w))
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

func (m *Model) bannerShown() bool {
	f := m.cur()
	return f != nil && len(f.pending()) > 0 && (m.view != viewRequests || m.help || m.picker)
}

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
	return m.tab().body(m, f, w, h)
}

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

func (m *Model) header1(w int) string {
	f := m.cur()
	st := m.st
	if f == nil {
		return st.paint(st.title, "fleet console") + " · no fleet"
	}
	now := m.now()
	parts := []part{{st.paint(st.title, "fleet "+f.name()), 10}}
	sid := ""
	if f.fold.Welcome != nil {
		sid = f.fold.Welcome.SessionID
	}
	if sid == "" && f.fold.Fleet != nil {
		sid = f.fold.Fleet.Coordinator.SessionID
	}
	if sid != "" {
		parts = append(parts, part{"session " + prefix(oneLine(sid), 8), 3})
	}
	if pm := f.providerModel(); pm != "" {
		parts = append(parts, part{pm, 5})
	}
	if s := f.fold.Fleet; s != nil && s.Session != nil && s.Session.Uptime != nil {
		up := time.Duration(*s.Session.Uptime)*time.Millisecond + now.Sub(f.stateAt)
		parts = append(parts, part{"up " + fmtDur(up), 2})
	}
	processing := false
	if f.fold.Fleet != nil {
		processing = f.fold.Fleet.Coordinator.IsProcessing
	} else if f.fold.Status != nil {
		processing = f.fold.Status.Processing
	}
	if processing {
		parts = append(parts, part{st.paint(st.good, "● working"), 8})
	} else if f.fold.Fleet != nil || f.fold.Status != nil {
		parts = append(parts, part{st.paint(st.dim, "○ idle"), 8})
	}
	if s := f.fold.Fleet; s != nil && s.Coordinator.StaleMs != nil && *s.Coordinator.StaleMs >= 1000 {
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

func (f *fleet) providerModel() string {
	var prov, model string
	if f.fold.Status != nil {
		prov, model = f.fold.Status.Provider, f.fold.Status.Model
	}
	if s := f.fold.Fleet; s != nil && s.Session != nil {
		prov, model = cmp.Or(prov, s.Session.Provider), cmp.Or(model, s.Session.Model)
	}
	if f.fold.Welcome != nil {
		model = cmp.Or(model, f.fold.Welcome.Model)
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
	if s := f.fold.Fleet; s != nil {
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
	if s := f.fold.Fleet; s != nil {
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
	} else if s := f.fold.Status; s != nil && s.ActiveWorkerCount != nil && s.TotalWorkerCount != nil {
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
			n += len(f.pending())
		}
	}
	return n
}

func (m *Model) banner(w int) string {
	f := m.cur()
	n := len(f.pending())
	noun := "requests"
	if n == 1 {
		noun = "request"
	}
	key := "press 5 (or r)"
	if m.view == viewNative && !m.help && !m.picker {
		key = "press 5" // r refreshes the native root here
	}
	s := fmt.Sprintf("⚠ %d %s waiting — %s: %s", n, noun, key, oneLine(f.pending()[0].Text()))
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
	case m.focus == inputField:
		return m.field.hint
	case m.help:
		return "keys · ? or esc closes · ↑↓ scroll"
	case m.picker:
		return "↑↓ choose · enter switch · esc close"
	}
	if h := m.tab().hint(m); h != "" {
		return h
	}
	return "1-8 views · : prompt · ? help · q quit"
}
