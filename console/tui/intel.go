package tui

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agents-fleet/fleet/protocol"
)

// The Intel view (8): what the fleet learned across sessions (run
// statistics, suggestions, skills), its skill evolution, its store and
// its experiments.

// intelTab is the Intel view: it only draws.
type intelTab struct{ drawOnly }

func (intelTab) body(m *Model, f *fleet, w, h int) []string {
	st := m.st
	if f.fold.Intel == nil && f.fold.Evolution == nil && f.fold.Store == nil && f.fold.Experiment == nil {
		return []string{"", "  no intel from this fleet"}
	}
	var out []string
	if in := f.fold.Intel; in != nil {
		s := in.Summary
		out = append(out, st.paint(st.bold, "intel"))
		out = append(out, wrapLines(fmt.Sprintf("runs %d · failed %d · success %s · sessions %d · tokens %s · avg session %s",
			s.TotalAgentRuns, s.FailedRuns, pct(s.SuccessRate), s.SessionCount, fmtTokens(s.TotalTokens),
			fmtDur(time.Duration(s.AvgSessionDurationMs)*time.Millisecond)), w)...)
		for i, e := range s.TopErrors {
			if i == 3 {
				break
			}
			out = append(out, fmt.Sprintf("  %s %s", st.paint(st.bad, strconv.FormatInt(e.Count, 10)+"×"), oneLine(e.Message)))
		}
		for i, sg := range in.Suggestions {
			if i == 3 {
				break
			}
			out = append(out, fmt.Sprintf("  suggestion %s %s (%s)", pct(sg.Confidence), oneLine(sg.Title), oneLine(sg.SuggestionType)))
		}
		if len(in.Skills) > 0 {
			skills := slices.Clone(in.Skills)
			slices.SortStableFunc(skills, func(a, b protocol.FleetIntelSkill) int { return cmp.Compare(b.Uses, a.Uses) })
			var p []string
			for _, sk := range skills[:min(len(skills), 5)] {
				p = append(p, fmt.Sprintf("%s %d", oneLine(sk.Name), sk.Uses))
			}
			out = append(out, "  skills: "+strings.Join(p, ", "))
		}
	}
	if ev := f.fold.Evolution; ev != nil {
		out = append(out, st.paint(st.bold, "evolution")+fmt.Sprintf(" · %s · %d applied", plural(len(ev.Shadows), "shadow"), len(ev.Timeline)))
		for i, sh := range ev.Shadows {
			if i == 3 {
				break
			}
			l := "  " + oneLine(sh.Skill) + ": " + oneLine(sh.Summary)
			if sh.Status != "" {
				l += " · " + oneLine(sh.Status)
			}
			if sh.Trials != nil {
				l += " · " + plural(int(*sh.Trials), "trial")
			}
			if sh.BaselineSuccessRate != nil && sh.CandidateSuccessRate != nil {
				l += " · " + pct(*sh.BaselineSuccessRate) + " → " + pct(*sh.CandidateSuccessRate)
			}
			out = append(out, l)
		}
		if n := len(ev.Timeline); n > 0 {
			r := ev.Timeline[n-1]
			l := "  latest: " + oneLine(r.Skill) + ": " + oneLine(r.Summary)
			if r.SuccessRateBefore != nil && r.SuccessRateAfter != nil {
				l += " · " + pct(*r.SuccessRateBefore) + " → " + pct(*r.SuccessRateAfter)
			}
			out = append(out, l)
		}
	}
	if sr := f.fold.Store; sr != nil {
		var p []string
		for _, c := range sr.Counts {
			p = append(p, fmt.Sprintf("%s %d", oneLine(c.Name), c.Count))
		}
		out = append(out, st.paint(st.bold, "store")+" · "+strings.Join(p, " · "))
		if len(sr.Steering) > 0 {
			s := sr.Steering[len(sr.Steering)-1]
			out = append(out, "  latest steering: "+firstLine(s.Text))
		}
	}
	if ex := f.fold.Experiment; ex != nil {
		out = append(out, st.paint(st.bold, "experiments")+" · "+strconv.Itoa(len(ex.Experiments)))
		for i, e := range ex.Experiments {
			if i == 4 {
				break
			}
			l := "  " + oneLine(e.Name) + " · " + oneLine(e.Status)
			if r := e.LatestRun; r != nil {
				if r.Winner != "" {
					l += " · winner " + st.paint(st.good, oneLine(r.Winner))
					for _, v := range r.Variants {
						if v.Variant == r.Winner && v.Lift != nil {
							l += fmt.Sprintf(" (lift %+.0f%%, pass %s)", *v.Lift*100, pct(v.PassRate))
						}
					}
				} else {
					l += " · inconclusive"
				}
			}
			out = append(out, l)
		}
	}
	return out
}
