package tui

import (
	"fmt"
	"strings"

	"github.com/charmbracelet/x/ansi"

	"github.com/agents-fleet/fleet/protocol"
)

// The diff pane: d on a worker sends /diff WORKER and shows the fleet's
// answer in the Workers view, scrollable, in place of the table (esc goes
// back). The answer is a reply like any other (it is in the conversation
// too); the pane recognises it as the reply to its own prompt: the one
// right after the prompt's echo (the fleet answers a refused /diff there,
// under the same lock), or a later one that is a diff or names the worker
// as /diff's answers do.

// diffPane is the /diff answer shown, or awaited, for one worker.
type diffPane struct {
	fleet    string // the fleet it was asked of
	worker   string // the worker as /diff names it
	reqID    string // requestId of the /diff prompt
	echoed   bool   // the prompt's echo came: the answer follows
	adjacent bool   // the echo was the fleet's last frame
	answered bool
	lines    []string // the answer, cleaned and bounded
	top      int      // first line shown
}

// openDiff asks the fleet of the current view for the worker's diff and
// opens the pane; nothing opens when the prompt could not be sent.
func (t *workersTab) openDiff(m *Model, ref string) []Action {
	acts := m.sendPrompt("/diff " + ref)
	if len(acts) != 1 {
		return acts
	}
	s, _ := acts[0].(Send)
	p, _ := s.Msg.(*protocol.Prompt)
	if p == nil {
		return acts
	}
	t.diff = &diffPane{fleet: s.Fleet, worker: ref, reqID: p.RequestID}
	m.flash = "" // the pane says what it waits for; the line keeps its keys
	return acts
}

// watch looks among fleet id's live frames for the answer the pane waits
// for.
func (d *diffPane) watch(id string, msg protocol.Message, replay bool) {
	if d.fleet != id || d.answered || replay {
		return
	}
	next := d.adjacent
	d.adjacent = false
	switch v := msg.(type) {
	case *protocol.UserMessage:
		if v.RequestID == d.reqID {
			d.echoed, d.adjacent = true, true
		}
	case *protocol.Reply:
		if d.echoed && (next || isDiffAnswer(v.Text, d.worker)) {
			d.set(v.Text)
		}
	}
}

// isDiffAnswer says whether text is one of the answers /diff WORKER gives
// once it has looked (engine cmdDiff): the diff, no changes, or the failure.
func isDiffAnswer(text, worker string) bool {
	return strings.HasPrefix(text, "diff --git ") ||
		strings.HasPrefix(text, worker+" has no changes") ||
		strings.HasPrefix(text, "Could not diff "+worker+":")
}

func (d *diffPane) set(text string) {
	d.answered = true
	lines := textLines(strings.ReplaceAll(text, "\t", "    "))
	if len(lines) > maxEntryLines {
		more := len(lines) - maxEntryLines
		lines = append(lines[:maxEntryLines:maxEntryLines], "… "+plural(more, "more line")+" (fleet diff shows all of it)")
	}
	for i, l := range lines {
		lines[i] = clipBytes(l, maxConvLineText)
	}
	d.lines = lines
}

// diffKey handles the pane's own keys; the worker keys (d again, m, a, p,
// x, t) fall through to the table's.
func (t *workersTab) diffKey(m *Model, name string) bool {
	d := t.diff
	page := max(m.bodyHeight()-2, 1)
	switch name {
	case "esc":
		t.diff = nil
	case "up":
		d.top--
	case "down":
		d.top++
	case "pgup":
		d.top -= page
	case "pgdown":
		d.top += page
	case "home":
		d.top = 0
	case "end":
		d.top = len(d.lines)
	default:
		return false
	}
	d.top = min(max(d.top, 0), max(len(d.lines)-(m.bodyHeight()-1), 0))
	return true
}

func (d *diffPane) body(m *Model, w, h int) []string {
	st := m.st
	title := st.paint(st.bold, oneLine(d.worker)) + " · diff"
	if !d.answered {
		return []string{title, "", "  asking the fleet for " + oneLine(d.worker) + "'s diff… (its reply also shows in 6 Conversation)"}
	}
	rows := max(h-1, 1)
	d.top = min(max(d.top, 0), max(len(d.lines)-rows, 0))
	end := min(d.top+rows, len(d.lines))
	right := fmt.Sprintf("lines %d–%d of %d", d.top+1, end, len(d.lines))
	if len(d.lines) <= rows {
		right = plural(len(d.lines), "line")
	}
	out := []string{spread(title, st.paint(st.dim, right), w)}
	for _, l := range d.lines[d.top:end] {
		out = append(out, m.diffLine(ansi.Truncate(l, w, "…")))
	}
	return out
}

// diffLine colours one line of a unified diff.
func (m *Model) diffLine(l string) string {
	st := m.st
	switch {
	case strings.HasPrefix(l, "+++ "), strings.HasPrefix(l, "--- "), strings.HasPrefix(l, "diff --git "),
		strings.HasPrefix(l, "index "), strings.HasPrefix(l, "new file"), strings.HasPrefix(l, "deleted file"):
		return st.paint(st.bold, l)
	case strings.HasPrefix(l, "@@"):
		return st.paint(st.info, l)
	case strings.HasPrefix(l, "+"):
		return st.paint(st.good, l)
	case strings.HasPrefix(l, "-"):
		return st.paint(st.bad, l)
	}
	return l
}
