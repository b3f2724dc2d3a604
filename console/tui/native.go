package tui

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/agents-fleet/fleet/client"
	"github.com/agents-fleet/fleet/protocol"
)

// The Native view (7): the native root of a fleet started with
// --native-root, its tasks, holds, decisions and pending receipts, and the
// controls: pause, resume and stop at the revision shown (each after a
// y/n), and the retry of a mutation the connection left uncertain. What is
// known of the root is kept with the fleet (nativestate.go).

// nativeTab is the Native view. Its selection (the root) is the fleet's
// own (fleet.native), so it has no state here.
type nativeTab struct{}

func (nativeTab) reset() {}

func (nativeTab) hint(*Model) string {
	return "r refresh · p pause · u resume · s stop · R retry uncertain · ↑↓ root"
}

func (nativeTab) key(m *Model, f *fleet, name, text string) ([]Action, bool) {
	if f == nil {
		return nil, false
	}
	n := &f.native
	switch {
	case name == "up" || name == "down":
		if len(n.roots) > 0 {
			n.rootSel = min(max(n.rootSel+step(name), 0), len(n.roots)-1)
			n.rootID = n.roots[n.rootSel].ID
		}
		return nil, true
	case text == "r":
		if n.rootID == "" {
			return m.sendNative(f, protocol.NativeRequest{Action: protocol.NativeList}), true
		}
		return m.sendNative(f, protocol.NativeRequest{Action: protocol.NativeStatus, RootID: n.rootID}), true
	case text == "p" || text == "u" || text == "s":
		action := map[string]string{"p": protocol.NativePause, "u": protocol.NativeResume, "s": protocol.NativeStop}[text]
		st := n.status
		if st == nil || st.ID == "" {
			m.flash = "no root status yet: press r first"
			return nil, true
		}
		rootID, rev := st.ID, st.Revision
		m.askYesNo(action+" root "+oneLine(rootID)+" at revision "+itoa(rev)+"? y/n", func() []Action {
			req := client.NativeMutation(nativeOrigin, protocol.NativeRequest{Action: action, RootID: rootID}, rev)
			return m.sendNative(f, req)
		})
		return nil, true
	case text == "R":
		c := n.lastMut
		if c == nil || !c.Uncertain {
			m.flash = "no uncertain mutation to retry"
			return nil, true
		}
		// Same operationId, revision and body: the fleet applies it at most once.
		if !m.canSend(f) {
			return nil, true
		}
		return m.attemptNative(f, c), true
	}
	return nil, false
}

// sendNative sends a new request to f's native root: a read, or a
// mutation built with client.NativeMutation.
func (m *Model) sendNative(f *fleet, req protocol.NativeRequest) []Action {
	if !m.canSend(f) {
		return nil
	}
	c, err := client.NewNativeCall(req, struct{}{})
	if err != nil {
		m.flash = "cannot send the request: " + oneLine(err.Error())
		return nil
	}
	if old := f.native.lastMut; c.Mutation() && old != nil {
		f.native.calls.Drop(old) // a new mutation replaces the uncertain one
	}
	return m.attemptNative(f, c)
}

// attemptNative sends an attempt of c, tracked until its result comes: its
// first, or the operator's retry with the same body.
func (m *Model) attemptNative(f *fleet, c *nativeCall) []Action {
	frame, err := f.native.calls.Attempt(c, m.now())
	if err != nil {
		m.flash = "cannot send the request: " + oneLine(err.Error())
		return nil
	}
	if c.Mutation() {
		f.native.lastMut = c
	}
	m.flash = "sent: " + c.Req.Action
	return []Action{Send{Fleet: f.ref.ID, Msg: frame}}
}

func (nativeTab) body(m *Model, f *fleet, w, h int) []string {
	st := m.st
	n := &f.native
	var out []string
	if len(n.roots) > 1 {
		out = append(out, st.paint(st.bold, "roots"))
		for i, r := range n.roots {
			mark := "  "
			if i == n.rootSel {
				mark = "▸ "
			}
			out = append(out, fmt.Sprintf("%s%s rev %d · intent %s · phase %s", mark, oneLine(r.ID), r.Revision, oneLine(r.Intent), oneLine(r.Phase)))
		}
		out = append(out, "")
	}
	s := n.status
	switch {
	case s != nil:
		out = append(out, st.paint(st.bold, "root "+oneLine(s.ID))+fmt.Sprintf(" · revision %d", s.Revision))
		out = append(out, "intent "+oneLine(s.Intent)+" · phase "+oneLine(s.Phase))
		g := "grant: session " + clipRunes(oneLine(s.Grant.SessionID), 12) + " · policy " + oneLine(s.Grant.PolicyVersion)
		if s.PreviousRootID != "" {
			g += " · previous root " + oneLine(s.PreviousRootID)
		}
		out = append(out, st.paint(st.dim, g))
		counts := map[string]int{}
		for _, t := range s.Tasks {
			counts[oneLine(t.State)]++
		}
		keys := make([]string, 0, len(counts))
		for k := range counts {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var tc []string
		for _, k := range keys {
			tc = append(tc, fmt.Sprintf("%d %s", counts[k], k))
		}
		line := "tasks: " + strconv.Itoa(len(s.Tasks))
		if len(tc) > 0 {
			line += " (" + strings.Join(tc, ", ") + ")"
		}
		uncertain := 0
		for _, e := range s.Effects {
			if e.State == "uncertain" {
				uncertain++
			}
		}
		line += " · effects: " + strconv.Itoa(len(s.Effects))
		if uncertain > 0 {
			line += st.paint(st.warn, fmt.Sprintf(" (%d uncertain)", uncertain))
		}
		out = append(out, line)
		out = append(out, st.paint(st.bold, fmt.Sprintf("holds (%d)", len(s.Holds))))
		for _, hd := range s.Holds {
			l := "  " + clipRunes(oneLine(hd.HoldHash), 12) + " " + oneLine(hd.Reason)
			if hd.TaskID != "" {
				l += " · task " + oneLine(hd.TaskID)
			}
			out = append(out, l)
		}
		out = append(out, st.paint(st.bold, fmt.Sprintf("decisions (%d)", len(s.Decisions))))
		for _, d := range s.Decisions {
			l := fmt.Sprintf("  %s %s task %s: %s", oneLine(d.ID), oneLine(d.Verdict), oneLine(d.TaskID), oneLine(d.Rationale))
			if d.Consumed {
				l += st.paint(st.dim, " (consumed)")
			}
			out = append(out, l)
		}
		out = append(out, st.paint(st.bold, fmt.Sprintf("pending receipts (%d)", len(s.PendingReceipts))))
		for _, rc := range s.PendingReceipts {
			out = append(out, fmt.Sprintf("  %s %s → rev %d · %s", oneLine(rc.OperationID), oneLine(rc.Action), rc.Revision, oneLine(rc.Status)))
		}
	case len(n.roots) == 1:
		r := n.roots[0]
		out = append(out, fmt.Sprintf("root %s rev %d · intent %s · phase %s", oneLine(r.ID), r.Revision, oneLine(r.Intent), oneLine(r.Phase)),
			st.paint(st.dim, "press r for its status"))
	case len(n.roots) == 0:
		out = append(out, "no native root status yet: press r to load it (native sessions only)")
	}
	if n.last != "" {
		out = append(out, "")
		if n.lastErr {
			out = append(out, wrapLines(st.paint(st.bad, "last: ")+n.last, w)...)
		} else {
			out = append(out, wrapLines("last: "+n.last, w)...)
		}
	}
	if c := n.lastMut; c != nil {
		rev := ""
		if c.Req.ExpectedRevision != nil {
			rev = " at revision " + itoa(*c.Req.ExpectedRevision)
		}
		line := "pending: " + c.Req.Action + " root " + oneLine(c.Req.RootID) + rev + " · " + c.Req.OperationID
		if c.Uncertain {
			line += st.paint(st.warn, " · uncertain (the connection dropped): R retries it with the same operation id")
		} else {
			line += st.paint(st.dim, " · waiting for the result")
		}
		out = append(out, wrapLines(line, w)...)
	}
	return out
}
