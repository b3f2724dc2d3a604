// Package console turns control-socket frames into text for people: a
// Renderer that prints one compact line per event, and REPL, the line
// console behind `fleet attach`.
package console

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/agents-fleet/fleet/client"
	"github.com/agents-fleet/fleet/protocol"
)

// HistoryPrefix marks lines rendered from replay frames (history, not live).
const HistoryPrefix = "· "

// LiveMarker is printed at replayEnd when history was printed before it.
const LiveMarker = "── live ──"

// maxHydrateLines is how many of the most recent conversation entries of a
// hydrate frame are shown.
const maxHydrateLines = 10

// maxFileChanges is how many entries of one fileChange frame are listed.
const maxFileChanges = 5

// ANSI colours, used only when Renderer.Color is set.
const (
	ansiReset  = "\x1b[0m"
	ansiDim    = "\x1b[2m"
	ansiBold   = "\x1b[1m"
	ansiRed    = "\x1b[31m"
	ansiGreen  = "\x1b[32m"
	ansiYellow = "\x1b[33m"
	ansiCyan   = "\x1b[36m"
)

// Renderer turns protocol messages into terminal lines. The periodic
// snapshots (status, fleetState, fleetAnalytics) are not printed: every
// frame it renders is folded into its State, whose latest ones Summary
// shows. A Renderer is not safe for concurrent use.
type Renderer struct {
	// Color enables ANSI colours; set it only when the output is a terminal.
	Color bool

	state   client.State
	history bool // a history line was printed since the last replayEnd
}

// NewRenderer returns a Renderer; color enables ANSI colours.
func NewRenderer(color bool) *Renderer { return &Renderer{Color: color} }

// Render returns the lines for m, without newlines; none for frames that
// are not shown. replay marks a frame received before replayEnd: its lines
// get HistoryPrefix, and replayEnd then yields LiveMarker.
func (r *Renderer) Render(m protocol.Message, replay bool) []string {
	r.state.Apply(m)
	lines := r.render(m)
	if _, ok := m.(*protocol.ReplayEnd); ok {
		if r.history {
			r.history = false
			return []string{r.paint(ansiDim, LiveMarker)}
		}
		return nil
	}
	if replay && len(lines) > 0 {
		r.history = true
		for i, l := range lines {
			lines[i] = r.paint(ansiDim, HistoryPrefix) + l
		}
	}
	return lines
}

func (r *Renderer) render(m protocol.Message) []string {
	switch m := m.(type) {
	case *protocol.Transcript:
		return r.transcript(m)
	case *protocol.ToolCall:
		return []string{r.toolCall(m)}
	case *protocol.HubEvent:
		return []string{r.hubEvent(m)}
	case *protocol.Reply:
		return r.labelled(r.paint(ansiCyan+ansiBold, "fleet:"), m.Text)
	case *protocol.UserMessage:
		return r.labelled(r.paint(ansiBold, clean(m.Source)+":"), m.Text)
	case *protocol.AskRequest:
		return []string{r.ask(m)}
	case *protocol.ConfirmRequest:
		return []string{fmt.Sprintf("%s [%s] %s %s", r.paint(ansiYellow+ansiBold, "?"), clean(m.ID), clean(m.Summary), r.paint(ansiDim, "(/yes or /no)"))}
	case *protocol.ConfirmResolved:
		return []string{r.resolved(m)}
	case *protocol.Error:
		return []string{r.paint(ansiRed, "error:") + " " + clean(m.Message)}
	case *protocol.FileChange:
		return r.fileChange(m)
	case *protocol.Hydrate:
		return r.hydrate(m)
	case *protocol.Welcome:
		return []string{r.welcome(m)}
	case *protocol.NativeRootResult:
		return []string{r.native(m)}
	}
	// pong, replayEnd, the dashboards, the snapshots and unknown types print
	// nothing.
	return nil
}

// paint wraps s in an ANSI colour when colours are on.
func (r *Renderer) paint(code, s string) string {
	if !r.Color {
		return s
	}
	return code + s + ansiReset
}

// labelled renders "label text", continuation lines indented under the text.
func (r *Renderer) labelled(label, text string) []string {
	parts := splitLines(text)
	out := make([]string, len(parts))
	indent := strings.Repeat(" ", visibleLen(label)+1)
	for i, p := range parts {
		if i == 0 {
			out[i] = label + " " + p
		} else {
			out[i] = indent + p
		}
	}
	return out
}

func (r *Renderer) transcript(m *protocol.Transcript) []string {
	agent := m.Agent
	if agent == "" {
		agent = "coordinator"
	}
	tag := "[" + clean(agent) + "]"
	if m.Stream == protocol.StreamStderr {
		tag = r.paint(ansiRed, "["+clean(agent)+" stderr]")
	} else {
		tag = r.paint(ansiDim, tag)
	}
	parts := splitLines(m.Text)
	out := make([]string, len(parts))
	for i, p := range parts {
		out[i] = tag + " " + p
	}
	return out
}

func agentLabel(agent, name string) string {
	if name != "" {
		return clean(name)
	}
	return clean(agent)
}

func (r *Renderer) toolCall(m *protocol.ToolCall) string {
	who := agentLabel(m.Agent, m.AgentName)
	tool := clean(m.Tool)
	if m.Phase == protocol.PhaseStart {
		s := r.paint(ansiCyan, "▶") + " " + who + " " + tool
		if d := firstLine(m.Detail, 120); d != "" {
			s += ": " + d
		}
		return s
	}
	failed := m.IsError != nil && *m.IsError
	dur := ""
	if m.DurationMs != nil {
		dur = formatMs(*m.DurationMs)
	}
	if !failed {
		s := r.paint(ansiGreen, "✓") + " " + who + " " + tool
		if dur != "" {
			s += " " + dur
		}
		return s
	}
	s := r.paint(ansiRed, "✗") + " " + who + " " + tool
	// An error's cause is usually at the end of the output.
	if res := lastLine(m.Result, 120); res != "" {
		s += " " + res
	} else {
		s += " failed"
	}
	if dur != "" {
		s += " (" + dur + ")"
	}
	return s
}

func (r *Renderer) hubEvent(m *protocol.HubEvent) string {
	s := r.paint(ansiDim, "•") + " " + clean(m.From) + " " + clean(m.Kind)
	if m.To != "" {
		s += " → " + clean(m.To)
	}
	if t := firstLine(m.Text, 200); t != "" {
		s += ": " + t
	}
	return s
}

func (r *Renderer) ask(m *protocol.AskRequest) string {
	var b strings.Builder
	b.WriteString(r.paint(ansiYellow+ansiBold, "?"))
	fmt.Fprintf(&b, " [%s] %s", clean(m.ID), clean(m.Question))
	if len(m.Choices) > 0 {
		b.WriteString(" choices:")
		for i, c := range m.Choices {
			label := c.Label
			if label == "" {
				label = c.Value
			}
			fmt.Fprintf(&b, " %d) %s", i+1, clean(label))
		}
		hint := "(/answer <n>)"
		if m.AllowFreeform != nil && *m.AllowFreeform {
			hint = "(/answer <n> or /answer <text>)"
		}
		b.WriteString(" " + r.paint(ansiDim, hint))
	} else {
		b.WriteString(" " + r.paint(ansiDim, "(/answer <text>)"))
	}
	return b.String()
}

func (r *Renderer) resolved(m *protocol.ConfirmResolved) string {
	id := clean(m.ID)
	outcome := ""
	if m.Kind != protocol.KindAsk {
		if m.Approved {
			outcome = " (approved)"
		} else {
			outcome = " (denied)"
		}
	}
	switch m.Reason {
	case "", protocol.ReasonAnswered:
		return r.paint(ansiGreen, "✓") + " " + id + " answered" + outcome
	case protocol.ReasonSuperseded:
		return r.paint(ansiGreen, "✓") + " " + id + " superseded: answered elsewhere" + outcome
	case protocol.ReasonExpired:
		return r.paint(ansiYellow, "✗") + " " + id + " expired"
	case protocol.ReasonCancelled:
		return r.paint(ansiYellow, "✗") + " " + id + " cancelled"
	}
	return "- " + id + " resolved: " + clean(string(m.Reason)) + outcome
}

func (r *Renderer) fileChange(m *protocol.FileChange) []string {
	var out []string
	for i, c := range m.Changes {
		if i == maxFileChanges {
			out = append(out, fmt.Sprintf("  … %d more file changes", len(m.Changes)-maxFileChanges))
			break
		}
		out = append(out, fmt.Sprintf("%s %s %s %s", r.paint(ansiDim, "✎"), clean(c.Agent), clean(string(c.ChangeType)), clean(c.Path)))
	}
	return out
}

func (r *Renderer) hydrate(m *protocol.Hydrate) []string {
	conv := m.Conversation
	var out []string
	if skipped := len(conv) - maxHydrateLines; skipped > 0 || m.Truncated && len(conv) > 0 {
		if skipped > 0 {
			conv = conv[skipped:]
		}
		out = append(out, r.paint(ansiDim, "… earlier conversation not shown"))
	}
	for _, e := range conv {
		label := "fleet:"
		switch e.Role {
		case protocol.RoleUser:
			label = "user:"
		case protocol.RoleSystem:
			label = "system:"
		case protocol.RoleTool:
			label = "tool:"
		}
		out = append(out, r.labelled(label, e.Text)...)
	}
	return out
}

func (r *Renderer) welcome(m *protocol.Welcome) string {
	var parts []string
	if m.SessionName != "" {
		parts = append(parts, "session "+clean(m.SessionName))
	} else if m.SessionID != "" {
		parts = append(parts, "session "+clean(m.SessionID))
	}
	if m.Model != "" {
		parts = append(parts, "model "+clean(m.Model))
	}
	if m.Cwd != "" {
		parts = append(parts, "in "+clean(m.Cwd))
	}
	if len(parts) == 0 {
		return "attached"
	}
	return "attached: " + strings.Join(parts, ", ")
}

func (r *Renderer) native(m *protocol.NativeRootResult) string {
	id := "-"
	if m.ID != nil {
		id = clean(*m.ID)
	}
	s := fmt.Sprintf("native [%s] %s", id, clean(string(m.Result.Kind)))
	if m.Result.Code != "" {
		s += " " + clean(m.Result.Code)
	}
	if m.Result.Message != "" {
		s += ": " + firstLine(m.Result.Message, 200)
	}
	return s
}

// State returns what the rendered frames said of the fleet: its latest
// snapshots and its pending requests.
func (r *Renderer) State() *client.State { return &r.state }

// Summary returns the /status lines from the latest status, fleetState and
// fleetAnalytics frames.
func (r *Renderer) Summary() []string {
	if r.state.Status == nil && r.state.Fleet == nil {
		return []string{"no status received yet"}
	}
	var out []string
	if f := r.state.Fleet; f != nil {
		c := f.Coordinator
		state := "idle"
		if c.IsProcessing {
			state = "processing"
		}
		var flags []string
		if c.DispatchPaused {
			flags = append(flags, "dispatch paused")
		}
		if c.PlanMode {
			flags = append(flags, "plan mode")
		}
		line := "coordinator: " + state
		if len(flags) > 0 {
			line += " (" + strings.Join(flags, ", ") + ")"
		}
		if s := f.Session; s != nil {
			if s.Model != "" {
				line += ", model " + clean(s.Model)
			}
			if s.Provider != "" {
				line += " via " + clean(s.Provider)
			}
			if s.Uptime != nil && *s.Uptime > 0 {
				line += ", up " + formatMs(*s.Uptime)
			}
		}
		out = append(out, line)
		workers := fmt.Sprintf("workers: %d active / %d", f.WorkerActive, f.WorkerTotal)
		if f.WorkerMax != nil {
			workers += fmt.Sprintf(" (max %d)", *f.WorkerMax)
		}
		if sc := f.WorkerStatusCounts; sc != nil {
			workers += fmt.Sprintf(": %d running, %d idle, %d completed, %d failed", sc.Running, sc.Idle, sc.Completed, sc.Failed)
		}
		out = append(out, workers)
		for _, w := range f.Workers {
			who := agentLabel(w.ID, w.Name)
			if w.Host != "" { // a remote worker: where it runs
				who += "@" + clean(w.Host)
			}
			l := fmt.Sprintf("  %-12s %-10s", who, clean(w.Status))
			if w.TaskID != "" {
				l += " task " + clean(w.TaskID)
			}
			if a := firstLine(w.RecentActivity, 60); a != "" {
				l += "  " + a
			}
			out = append(out, strings.TrimRight(l, " "))
		}
		t := f.Tasks
		out = append(out, fmt.Sprintf("tasks: %d done, %d running, %d pending, %d blocked, %d total", t.Done, t.Running, t.Pending, t.Blocked, t.Total))
		for _, it := range t.Items {
			l := fmt.Sprintf("  %-8s %-10s %s", clean(it.ID), clean(it.Status), firstLine(it.Subject, 60))
			if it.Owner != "" {
				l += " (" + clean(it.Owner) + ")"
			}
			out = append(out, l)
		}
		for _, lp := range f.Loops {
			it := strconv.FormatInt(lp.Iteration, 10)
			if lp.Max > 0 {
				it += "/" + strconv.FormatInt(lp.Max, 10)
			}
			out = append(out, fmt.Sprintf("loop %s: %s, iteration %s: %s", clean(lp.ID), clean(lp.Status), it, firstLine(lp.Goal, 60)))
		}
		if tk := f.Tokens; tk != nil {
			var parts []string
			if tk.ContextPercent != nil {
				parts = append(parts, fmt.Sprintf("context %.0f%%", *tk.ContextPercent))
			}
			if tk.TotalTokens != nil {
				parts = append(parts, fmt.Sprintf("%d tokens", *tk.TotalTokens))
			}
			if len(parts) > 0 {
				out = append(out, "usage: "+strings.Join(parts, ", "))
			}
		}
	} else if s := r.state.Status; s != nil {
		state := "idle"
		if s.Processing {
			state = "processing"
		}
		line := "coordinator: " + state
		if s.Model != "" {
			line += ", model " + clean(s.Model)
		}
		if s.Provider != "" {
			line += " via " + clean(s.Provider)
		}
		out = append(out, line)
		if s.ActiveWorkerCount != nil || s.TotalWorkerCount != nil {
			out = append(out, fmt.Sprintf("workers: %d active / %d", deref(s.ActiveWorkerCount), deref(s.TotalWorkerCount)))
		}
		for _, w := range s.Workers {
			out = append(out, fmt.Sprintf("  %-12s %s", clean(w.Name), clean(w.Status)))
		}
		if s.TasksTotal != nil {
			out = append(out, fmt.Sprintf("tasks: %d done, %d running, %d total", deref(s.TasksDone), deref(s.TasksActive), deref(s.TasksTotal)))
		}
	}
	if a := r.state.Analytics; a != nil && len(a.ToolUsage) > 0 {
		var parts []string
		for i, u := range a.ToolUsage {
			if i == 5 {
				break
			}
			parts = append(parts, fmt.Sprintf("%s %d", clean(u.ToolName), u.Count))
		}
		out = append(out, "tools: "+strings.Join(parts, ", "))
	}
	return out
}

// Catalog returns the latest command catalog, or nil.
func (r *Renderer) Catalog() *protocol.CommandCatalog { return r.state.Catalog }

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// formatMs formats a duration in milliseconds compactly: 45ms, 0.3s, 1.2s, 2m5s.
func formatMs(ms int64) string {
	switch {
	case ms < 0:
		return "0s"
	case ms < 100:
		return strconv.FormatInt(ms, 10) + "ms"
	case ms < 59_950: // rounds to at most 59.9s
		return strconv.FormatFloat(float64(ms)/1000, 'f', 1, 64) + "s"
	}
	return (time.Duration(ms) * time.Millisecond).Round(time.Second).String()
}

// Sanitize makes text from a fleet or a descriptor safe to print on a
// terminal; see clean.
func Sanitize(s string) string { return clean(s) }

// clean makes fleet-supplied text safe to print: control characters
// (terminal escape sequences included), line separators, bidi controls and
// invalid UTF-8 (a lone 0x9b byte is a CSI to some terminals) become
// U+FFFD, except tab, which becomes a space. Newlines are not expected
// here; splitLines handles them.
func clean(s string) string {
	if strings.IndexFunc(s, needsCleaning) < 0 && utf8.ValidString(s) {
		return s
	}
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\t':
			return ' '
		case needsCleaning(r):
			return '\uFFFD'
		}
		return r
	}, s)
}

func needsCleaning(r rune) bool {
	return unicode.IsControl(r) || r == '\u2028' || r == '\u2029' || unicode.Is(unicode.Bidi_Control, r)
}

// splitLines cleans text and splits it into lines (\n, \r\n), dropping a
// trailing empty line. It always returns at least one line.
func splitLines(text string) []string {
	text = strings.TrimRight(text, "\r\n")
	parts := strings.Split(text, "\n")
	for i, p := range parts {
		parts[i] = clean(strings.TrimSuffix(p, "\r"))
	}
	return parts
}

// firstLine returns the first non-empty line of s, cleaned and cut to max
// runes (with …) and marked with … when more lines follow.
func firstLine(s string, max int) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	line, rest, more := strings.Cut(s, "\n")
	line = clean(strings.TrimRight(line, "\r"))
	if r := []rune(line); len(r) > max {
		return string(r[:max-1]) + "…"
	}
	if more && strings.TrimSpace(rest) != "" {
		line += " …"
	}
	return line
}

// lastLine returns the last non-empty line of s, cleaned and cut to max
// runes, after "… " when earlier lines were dropped.
func lastLine(s string, max int) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	i := strings.LastIndexByte(s, '\n')
	line := clean(strings.TrimSpace(s[i+1:]))
	if r := []rune(line); len(r) > max {
		line = string(r[:max-1]) + "…"
	}
	if i >= 0 {
		line = "… " + line
	}
	return line
}

// visibleLen is the length of s in runes, ANSI escapes excluded.
func visibleLen(s string) int {
	n := 0
	esc := false
	for _, r := range s {
		switch {
		case esc:
			if r == 'm' {
				esc = false
			}
		case r == '\x1b':
			esc = true
		default:
			n++
		}
	}
	return n
}
