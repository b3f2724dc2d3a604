package tui

import "github.com/agents-fleet/fleet/protocol"

// A fleet's native root as the console knows it (the roots listed, the
// status shown, the last receipt or error) and the nativeRoot calls in
// flight, kept with the fleet: a mutation whose result was lost with the
// connection stays retryable with its operation id.

// nativeCall is a nativeRoot request awaiting its result.
type nativeCall struct {
	tid       string
	req       protocol.NativeRequest
	mutation  bool
	uncertain bool // sent, no result, and the connection dropped since
}

// nativeState is the Native view's data.
type nativeState struct {
	roots   []protocol.NativeRootInfo
	rootSel int
	rootID  string
	status  *protocol.NativeRootStatus
	last    string // plain text of the last receipt or error
	lastErr bool
	calls   map[string]*nativeCall
	order   []string    // transport ids in sending order, for the bound
	lastMut *nativeCall // the latest mutation until its result arrives
	// stale: a mutation was accepted, so the status shown is old; Pending
	// asks for a fresh one.
	stale bool
}

func newNativeState() nativeState {
	return nativeState{calls: map[string]*nativeCall{}}
}

func (n *nativeState) track(c *nativeCall) {
	if len(n.order) >= maxNativeCalls {
		delete(n.calls, n.order[0])
		n.order = n.order[1:]
	}
	n.calls[c.tid] = c
	n.order = append(n.order, c.tid)
	if c.mutation {
		n.lastMut = c
	}
}

func (n *nativeState) forget(tid string) {
	delete(n.calls, tid)
	for i, t := range n.order {
		if t == tid {
			n.order = append(n.order[:i], n.order[i+1:]...)
			break
		}
	}
}

// dropReads forgets reads in flight: they died with the connection.
func (n *nativeState) dropReads() {
	for _, tid := range append([]string(nil), n.order...) {
		if !n.calls[tid].mutation {
			n.forget(tid)
		}
	}
}

func (n *nativeState) markUncertain() {
	for _, c := range n.calls {
		if c.mutation {
			c.uncertain = true
		}
	}
}

func (n *nativeState) result(v *protocol.NativeRootResult) {
	var call *nativeCall
	if v.ID != nil {
		call = n.calls[*v.ID]
		if call != nil {
			n.forget(call.tid)
		}
	}
	if call != nil && call == n.lastMut {
		n.lastMut = nil // answered: no longer uncertain
	}
	r := v.Result
	switch r.Kind {
	case protocol.NativeKindRoots:
		n.roots = append([]protocol.NativeRootInfo(nil), r.Roots[:min(len(r.Roots), maxNativeRoots)]...)
		n.rootSel = currentRoot(n.roots)
		if len(n.roots) > 0 {
			n.rootID = n.roots[n.rootSel].ID
		}
		n.last, n.lastErr = plural(len(r.Roots), "root")+" listed", false
	case protocol.NativeKindStatus:
		if r.Root != nil {
			n.status = r.Root
			n.rootID = r.Root.ID
		}
	case protocol.NativeKindReceipt:
		n.last, n.lastErr = receiptText(r.Receipt), false
		n.stale = true
	case protocol.NativeKindPolicyAdmission:
		s := "policy admission: new root " + oneLine(r.RootID)
		if r.PreviousRootID != "" {
			s += ", previous root " + oneLine(r.PreviousRootID)
			if r.PreviousRootUnchanged != nil && *r.PreviousRootUnchanged {
				s += " unchanged"
			}
		}
		if r.SessionRebound != nil {
			s += ", session rebound: " + yesNo(*r.SessionRebound)
		}
		if r.Receipt != nil {
			s += ", receipt " + oneLine(r.Receipt.Status)
		}
		if r.RootID != "" {
			n.rootID = r.RootID
		}
		n.last, n.lastErr = s, false
	case protocol.NativeKindError:
		n.last, n.lastErr = nativeErrorText(call, r.Code, r.Message), true
	}
}

// currentRoot picks the root a list most likely means: one no other root
// replaced, else the first.
func currentRoot(roots []protocol.NativeRootInfo) int {
	replaced := map[string]bool{}
	for _, r := range roots {
		if r.PreviousRootID != "" {
			replaced[r.PreviousRootID] = true
		}
	}
	for i, r := range roots {
		if !replaced[r.ID] {
			return i
		}
	}
	return 0
}

func receiptText(rc *protocol.NativeReceipt) string {
	if rc == nil {
		return "receipt (empty)"
	}
	s := "receipt: " + oneLine(rc.Action) + " root " + oneLine(rc.RootID) +
		" → revision " + itoa(rc.Revision) + ", " + oneLine(rc.Status)
	if rc.Status == "persisted" {
		s += " (recorded, not yet carried out: follow the root status)"
	}
	return s
}

func nativeErrorText(call *nativeCall, code, msg string) string {
	code, msg = oneLine(code), oneLine(msg)
	var s string
	switch code {
	case "revision_conflict":
		s = "conflict: the root changed since you looked"
		if call != nil && call.req.ExpectedRevision != nil {
			s += " (you saw revision " + itoa(*call.req.ExpectedRevision) + ")"
		}
		s += "; press r to refresh, then try again"
	case "operation_id_reused":
		s = "refused: that operation id was already used for a different request"
	case "native_mode_required":
		s = "not a native session: native controls need a fleet started with --native-root"
	case "unknown_root":
		s = "unknown root: press r to list the roots again"
	default:
		s = "error " + code
	}
	if msg != "" {
		s += " — " + msg
	}
	return s
}
