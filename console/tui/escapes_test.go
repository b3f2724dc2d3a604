package tui

import (
	"errors"
	"fmt"
	"regexp"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/agents-fleet/fleet/protocol"
)

// hostile carries terminal escapes: clear screen, an OSC title and hyperlink,
// a bell, C1 CSI as a rune and as a raw byte, a bidi override.
const hostile = "\x1b[2J\x1b]0;owned\x07\x1b]8;;http://x\x1b\\link\u009b31m\x9b32m\u202e\a\r\n"

func TestFleetTextNeverInjectsEscapes(t *testing.T) {
	h := func(s string) string { return s + hostile + s }
	for _, color := range []bool{false, true} {
		m, c := newModel(color)
		m.SetFleets([]FleetRef{{ID: "f1", Name: h("api"), Cwd: h("/src")}, {ID: "f2", Name: h("web")}})
		w := welcome()
		w.SessionName, w.SessionID, w.Model = h("name"), h("sid"), h("model")
		m.Connected("f1", w)
		st := fleetState()
		st.Workers[0].Name, st.Workers[0].Status, st.Workers[0].AgentType = h("router"), h("running"), h("coder")
		st.Workers[0].TaskID, st.Workers[0].RecentActivity = h("t"), h("act")
		st.Workers[0].Git.Branch, st.Workers[0].Git.Files[0].Path, st.Workers[0].Git.Files[0].Status = h("br"), h("p"), h("added")
		st.Workers[1].Git.Conflicts = []string{h("conflict")}
		st.Workers[0].TopTools = []string{h("tool")}
		st.Tasks.Items[0].Subject, st.Tasks.Items[0].Owner, st.Tasks.Items[0].ID = h("subj"), h("own"), h("id")
		st.Session.Provider = h("prov")
		frames := []protocol.Message{
			st,
			&protocol.Status{Provider: h("prov"), Model: h("model")},
			&protocol.Transcript{Agent: h("router"), Text: h("line")},
			&protocol.Transcript{Agent: st.Workers[0].Name, Text: h("line")},
			&protocol.ToolCall{Agent: h("a"), AgentName: h("n"), Tool: h("t"), Detail: h("d"), Phase: protocol.PhaseStart},
			&protocol.ToolCall{Agent: h("a"), Tool: h("t"), Result: h("r"), IsError: protocol.Bool(true), Phase: protocol.PhaseComplete},
			&protocol.FileChange{Changes: []protocol.FileChangeEntry{{Path: h("p"), Agent: h("a"), ChangeType: protocol.ChangeType(h("c"))}}},
			&protocol.HubEvent{From: h("f"), Kind: h("k"), To: h("t"), Text: h("x")},
			&protocol.Error{Message: h("err")},
			&protocol.Reply{Text: h("reply")},
			&protocol.UserMessage{Source: h("src"), Text: h("txt")},
			&protocol.ConfirmRequest{ID: h("c"), Summary: h("sum")},
			&protocol.AskRequest{ID: h("a"), Question: h("q"), Kind: h("k"), Choices: []protocol.AskChoiceOption{{Label: h("l"), Value: "v", Description: h("d")}}},
			&protocol.CommandCatalog{Commands: []protocol.CommandCatalogEntry{{Name: "/" + h("cmd")}, {Name: "/" + h("cmd2")}}},
			&protocol.FleetAnalytics{ToolUsage: []protocol.ToolUsageEntry{{ToolName: h("tool"), Count: 3}},
				WorkerTimeline: []protocol.WorkerTimelineEntry{{Name: h("w"), Status: h("s"), StartedAt: at(-time.Minute)}}},
			&protocol.Hydrate{Conversation: []protocol.HydrateConversationEntry{{Role: protocol.Role(h("role")), Text: h("c")}},
				Transcripts: []protocol.HydrateTranscriptEntry{{Agent: h("router"), Text: h("t")}}},
			&protocol.FleetIntel{Summary: protocol.FleetIntelSummary{TopErrors: []protocol.FleetIntelError{{Message: h("e")}}},
				Suggestions: []protocol.FleetIntelSuggestion{{Title: h("t"), SuggestionType: h("s")}}, Skills: []protocol.FleetIntelSkill{{Name: h("s")}}},
			&protocol.FleetEvolution{Shadows: []protocol.FleetEvolutionShadow{{Skill: h("s"), Summary: h("x"), Status: h("st")}},
				Timeline: []protocol.FleetEvolutionRecord{{Skill: h("s"), Summary: h("x")}}},
			&protocol.FleetStore{Counts: []protocol.FleetStoreCount{{Name: h("n")}}, Steering: []protocol.FleetStoreSteering{{Text: h("t")}}},
			&protocol.FleetExperiment{Experiments: []protocol.FleetExperimentEntry{{Name: h("n"), Status: h("s"),
				LatestRun: &protocol.FleetExperimentRun{Winner: h("w")}}}},
			&protocol.NativeRootResult{Result: protocol.NativeResult{Kind: protocol.NativeKindRoots, Roots: []protocol.NativeRootInfo{
				{ID: h("r1"), Intent: h("i"), Phase: h("p")}, {ID: h("r2")}}}},
			&protocol.NativeRootResult{Result: protocol.NativeResult{Kind: protocol.NativeKindStatus, Root: &protocol.NativeRootStatus{
				ID: h("root"), Intent: h("i"), Phase: h("p"), Grant: protocol.NativeGrant{SessionID: h("s"), PolicyVersion: h("v")},
				Tasks: []protocol.NativeTask{{State: h("s")}}, Holds: []protocol.NativeHold{{HoldHash: h("h"), Reason: h("r"), TaskID: h("t")}},
				Decisions:       []protocol.NativeDecision{{ID: h("d"), Verdict: h("v"), TaskID: h("t"), Rationale: h("r")}},
				PendingReceipts: []protocol.NativeReceipt{{OperationID: h("o"), Action: h("a"), Status: h("s")}}}}},
			&protocol.NativeRootResult{Result: protocol.NativeResult{Kind: protocol.NativeKindError, Code: h("c"), Message: h("m")}},
		}
		for _, f := range frames {
			m.Apply("f1", f, false)
		}
		m.Apply("f2", &protocol.ConfirmRequest{ID: "x", Summary: h("other")}, false)
		screens := map[string]string{}
		for v := viewWorkers; v <= viewIntel; v++ {
			screens[fmt.Sprint("view ", v)] = screen(m, v, 100, 40)
		}
		m.view = viewWorkers
		press(m, "enter")
		screens["detail"] = m.View()
		press(m, "/")
		m.Key(Key{Text: "line"})
		press(m, "enter")
		screens["search"] = m.View()
		press(m, "esc", "esc", "F")
		screens["picker"] = m.View()
		press(m, "esc", ":", "/", "tab")
		screens["completion"] = m.View()
		press(m, "esc", "esc")
		m.Disconnected("f1", errors.New(h("dial")), 3*time.Second)
		m.view = viewNative
		screens["disconnected"] = m.View()
		c.t = c.t.Add(time.Hour)
		for name, s := range screens {
			checkEscapes(t, fmt.Sprintf("color=%v %s", color, name), s, color)
		}
		alerts := m.Alerts()
		if len(alerts) == 0 {
			t.Fatal("no alerts")
		}
		for _, a := range alerts {
			if a != "\a" {
				checkEscapes(t, "alert", a[1:len(a)-1], false)
			}
		}
	}
}

var sgr = regexp.MustCompile(`\x1b\[[0-9;]*m`)

// checkEscapes: NoColor views have no escape at all, colour views only our
// SGR styles; neither has another control character, invalid UTF-8 or a
// bidi control.
func checkEscapes(t *testing.T, name, s string, color bool) {
	t.Helper()
	rest := s
	if color {
		rest = sgr.ReplaceAllString(s, "")
	}
	if !utf8.ValidString(rest) {
		t.Errorf("%s: invalid UTF-8 reached the view: %q", name, rest)
	}
	for _, r := range rest {
		if (unicode.IsControl(r) && r != '\n') || unicode.Is(unicode.Bidi_Control, r) {
			t.Errorf("%s: %U reached the view: %q", name, r, rest)
			return
		}
	}
}
