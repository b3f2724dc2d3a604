package tui

import (
	"github.com/agents-fleet/fleet/client"
	"github.com/agents-fleet/fleet/protocol"
)

// A fleet's native root as the console knows it (the roots listed, the
// status shown, the last receipt or error) and the nativeRoot calls in
// flight, kept with the fleet: a mutation whose result was lost with the
// connection stays retryable with its operation id. client.NativeCalls
// pairs attempts with results and says which mutations are uncertain.

// nativeCall is a nativeRoot request of the Native view.
type nativeCall = client.NativeCall[struct{}]

// nativeOrigin starts the console's operation and transport ids.
const nativeOrigin = "console-"

// nativeState is the Native view's data.
type nativeState struct {
	roots   []protocol.NativeRootInfo
	rootSel int
	rootID  string
	status  *protocol.NativeRootStatus
	last    string // plain text of the last receipt or error
	lastErr bool
	calls   *client.NativeCalls[struct{}] // attempts awaiting their results
	lastMut *nativeCall                   // the latest mutation until its result arrives
	// stale: a mutation was accepted, so the status shown is old; Pending
	// asks for a fresh one.
	stale bool
}

func newNativeState() nativeState {
	return nativeState{calls: client.NewNativeCalls[struct{}](nativeOrigin)}
}

func (n *nativeState) result(v *protocol.NativeRootResult) {
	call := n.calls.Result(v)
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
		if call != nil && call.Req.ExpectedRevision != nil {
			s += " (you saw revision " + itoa(*call.Req.ExpectedRevision) + ")"
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
