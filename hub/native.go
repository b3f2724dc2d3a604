package hub

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agents-fleet/fleet/client"
	"github.com/agents-fleet/fleet/hub/telegram"
	"github.com/agents-fleet/fleet/protocol"
)

// Native roots from the chat: /root shows the bound root with Pause /
// Resume / Stop (each confirmed by a second tap), and tasks waiting for a
// native approval are posted with Approve / Deny, which ask for the
// rationale by reply. Requests go through client.NativeCalls: a mutation
// carries a fresh operation id and the revision the operator saw, and one
// whose result does not come back is sent again with the same id (the
// fleet answers a repeat with the stored receipt).

const (
	// nativeTimeout is how long an attempt may go without its result.
	nativeTimeout   = client.DefaultNativeAttemptTimeout
	nativeItemsKept = 256
	// nativeOrigin starts the hub's operation and transport ids.
	nativeOrigin = "hub-"
)

// nativeState is what the hub knows of a fleet's native side.
type nativeState struct {
	probing  bool
	legacy   bool // the fleet answered native_mode_required
	known    bool // the fleet has roots
	root     string
	rev      int64
	status   *protocol.NativeRootStatus
	lastPoll time.Time
	polling  bool
	calls    *client.NativeCalls[nativeOp] // attempts awaiting their results
	resend   []*nativeCall                 // mutations whose result was lost with the connection
	items    map[string]*nativeItem
	order    []string
}

// nativeCall is one native request of the hub.
type nativeCall = client.NativeCall[nativeOp]

// nativeOp says what becomes of a request's result.
type nativeOp struct {
	done func(res protocol.NativeResult)
	// uncertain is told when a mutation's outcome stays unknown after its
	// last attempt (or a read gets no answer), with the attempts sent; nil
	// for polls.
	uncertain func(why string, tries int)
}

// nativeItem is a task waiting for an approve/deny decision.
type nativeItem struct {
	fleet    string
	taskID   string
	evidence string
	text     string
	posts    []post
	done     bool
	outcome  string
	// madeBy is set once this hub sent a decision for it.
	madeBy, verdict, rationale string
}

func (h *hub) native(f *fleet) *nativeState {
	n := &f.native
	if n.calls == nil {
		n.calls = client.NewNativeCalls[nativeOp](nativeOrigin)
		n.items = map[string]*nativeItem{}
	}
	return n
}

// start makes a call of req and sends it on f's link.
func (n *nativeState) start(f *fleet, req protocol.NativeRequest, op nativeOp) (*nativeCall, error) {
	c, err := client.NewNativeCall(req, op)
	if err != nil {
		return nil, err
	}
	if err := n.send(f, c); err != nil {
		return nil, err
	}
	return c, nil
}

// errNotTakingInput: f is not connected, or its link's queue is full.
var errNotTakingInput = errors.New("the fleet is not taking input right now")

// send puts an attempt of c on f's link: its first, or a retry with the
// same body.
func (n *nativeState) send(f *fleet, c *nativeCall) error {
	if f.link == nil || !f.connected {
		return errNotTakingInput
	}
	frame, err := n.calls.Attempt(c, time.Now())
	if err != nil {
		return err
	}
	if !f.link.send(frame) {
		n.calls.Unsent(c)
		return errNotTakingInput
	}
	return nil
}

// probe runs after every (re-)attach: learn whether the fleet is native,
// and send again the mutations whose results were lost.
func (n *nativeState) probe(h *hub, f *fleet) {
	for _, c := range n.resend {
		if n.send(f, c) != nil && c.Data.uncertain != nil {
			c.Data.uncertain("the fleet is not taking input", c.Tries)
		}
	}
	n.resend = nil
	if n.legacy || n.probing {
		return
	}
	_, err := n.start(f, protocol.NativeRequest{Action: protocol.NativeList}, nativeOp{done: func(res protocol.NativeResult) {
		n.probing = false
		switch {
		case res.Kind == protocol.NativeKindError && res.Code == "native_mode_required":
			n.legacy = true
		case res.Kind == protocol.NativeKindRoots:
			n.known = true
			if r := boundRoot(res.Roots); r != nil {
				n.root, n.rev = r.ID, r.Revision
			}
			n.poll(h, f)
		}
	}})
	n.probing = err == nil
}

// boundRoot is the session's current root: the newest one no other root
// names as its previous.
func boundRoot(roots []protocol.NativeRootInfo) *protocol.NativeRootInfo {
	prev := map[string]bool{}
	for _, r := range roots {
		if r.PreviousRootID != "" {
			prev[r.PreviousRootID] = true
		}
	}
	for i := len(roots) - 1; i >= 0; i-- {
		if !prev[roots[i].ID] {
			return &roots[i]
		}
	}
	return nil
}

// nativeTick polls native fleets and books timeouts.
func (h *hub) nativeTick(f *fleet, now time.Time) {
	n := h.native(f)
	for _, c := range n.calls.Expired(now, nativeTimeout) {
		h.lost(f, c, "no answer within "+nativeTimeout.String())
	}
	if n.known && f.connected && !n.polling && now.Sub(n.lastPoll) >= h.cfg.NativePoll {
		n.poll(h, f)
	}
}

// lost handles a request whose answer did not come: a mutation is sent
// again with the same operation id while it is Retryable.
func (h *hub) lost(f *fleet, c *nativeCall, why string) {
	n := h.native(f)
	if c.Retryable() {
		if n.send(f, c) != nil {
			n.resend = append(n.resend, c)
		}
		return
	}
	if c.Data.uncertain != nil {
		c.Data.uncertain(why, c.Tries)
	}
	if !c.Mutation() {
		n.polling, n.probing = false, false
	}
}

func (n *nativeState) connectionLost() {
	for _, c := range n.calls.Lost() {
		if c.Retryable() {
			n.resend = append(n.resend, c)
		} else if c.Data.uncertain != nil {
			c.Data.uncertain("the connection to the fleet was lost", c.Tries)
		}
	}
	n.polling, n.probing = false, false
}

// result routes a nativeRootResult to its request.
func (n *nativeState) result(h *hub, f *fleet, m *protocol.NativeRootResult) {
	if c := n.calls.Result(m); c != nil {
		c.Data.done(m.Result)
	}
}

// poll reads the bound root and reconciles the approvals posted.
func (n *nativeState) poll(h *hub, f *fleet) {
	if n.root == "" {
		return
	}
	n.lastPoll = time.Now()
	_, err := n.start(f, protocol.NativeRequest{Action: protocol.NativeStatus, RootID: n.root}, nativeOp{done: func(res protocol.NativeResult) {
		n.polling = false
		if res.Kind == protocol.NativeKindStatus && res.Root != nil {
			n.status, n.rev = res.Root, res.Root.Revision
			h.reconcileApprovals(f, res.Root)
		}
	}})
	n.polling = err == nil
}

// awaiting says whether task t waits for an approve/deny: it has evidence to
// pin, it has not run, and no live decision pins that evidence.
func awaiting(t protocol.NativeTask, ds []protocol.NativeDecision) bool {
	if t.EvidenceHash == "" || t.Attempts > 0 || slices.Contains([]string{"running", "settled", "failed"}, t.State) {
		return false
	}
	return liveDecision(t, ds) == nil
}

func liveDecision(t protocol.NativeTask, ds []protocol.NativeDecision) *protocol.NativeDecision {
	superseded := map[string]bool{}
	for _, d := range ds {
		if d.Supersedes != "" {
			superseded[d.Supersedes] = true
		}
	}
	for i := len(ds) - 1; i >= 0; i-- {
		d := ds[i]
		if d.TaskID == t.ID && d.EvidenceHash == t.EvidenceHash && !superseded[d.ID] {
			return &ds[i]
		}
	}
	return nil
}

func (h *hub) reconcileApprovals(f *fleet, root *protocol.NativeRootStatus) {
	n := h.native(f)
	current := map[string]protocol.NativeTask{}
	for _, t := range root.Tasks {
		if t.EvidenceHash == "" {
			continue
		}
		key := t.ID + "|" + t.EvidenceHash
		current[key] = t
		if !awaiting(t, root.Decisions) || n.items[key] != nil {
			continue
		}
		it := &nativeItem{fleet: f.d.ID, taskID: t.ID, evidence: t.EvidenceHash}
		it.text = fmt.Sprintf("%s 🛡 <b>Native approval needed</b>\ntask <code>%s</code>: %s\nroot <code>%s</code> · evidence <code>%s</code>",
			f.head(), esc(t.ID), esc(oneLine(t.Subject, 1500)), esc(root.ID), esc(clip(t.EvidenceHash, 16)))
		yes := h.buttons.add(&button{kind: buttonNative, fleet: f.d.ID, native: it, value: "approve"})
		no := h.buttons.add(&button{kind: buttonNative, fleet: f.d.ID, native: it, value: "deny"})
		it.posts = h.postAll(f, it.text, [][]telegram.Button{{{Text: "✅ Approve…", Data: yes}, {Text: "❌ Deny…", Data: no}}}, postRef{fleet: f.d.ID, native: it}, false)
		n.items[key] = it
		n.order = append(n.order, key)
		n.forgetDone()
	}
	for key, it := range n.items {
		if it.done {
			continue
		}
		t, ok := current[key]
		if ok && awaiting(t, root.Decisions) {
			continue
		}
		it.done = true
		switch d := liveDecisionOrNil(t, ok, root.Decisions); {
		case d != nil && it.madeBy != "" && d.Rationale == it.rationale:
			it.outcome = fmt.Sprintf("%s here by %s: %s", pastTense(d.Verdict), it.madeBy, d.Rationale)
		case d != nil:
			it.outcome = fmt.Sprintf("answered elsewhere: %s (%s)", pastTense(d.Verdict), d.Rationale)
		default:
			it.outcome = "no longer waiting for a decision"
		}
		h.editAll(it.posts, it.text, verdictIcon(it.outcome), it.outcome)
	}
}

// forgetDone drops the oldest answered approvals beyond nativeItemsKept;
// open ones stay (they are bounded by the root's tasks).
func (n *nativeState) forgetDone() {
	for i := 0; len(n.order) > nativeItemsKept && i < len(n.order); {
		if it := n.items[n.order[i]]; it == nil || it.done {
			delete(n.items, n.order[i])
			n.order = append(n.order[:i], n.order[i+1:]...)
			continue
		}
		i++
	}
}

func liveDecisionOrNil(t protocol.NativeTask, ok bool, ds []protocol.NativeDecision) *protocol.NativeDecision {
	if !ok {
		return nil
	}
	return liveDecision(t, ds)
}

func pastTense(verdict string) string {
	switch verdict {
	case "approve":
		return "approved"
	case "deny":
		return "denied"
	}
	return verdict
}

func verdictIcon(outcome string) string {
	switch {
	case strings.HasPrefix(outcome, "approved"):
		return "✅"
	case strings.HasPrefix(outcome, "denied"):
		return "❌"
	}
	return "↪️"
}

// drop closes the native approvals when the fleet goes.
func (n *nativeState) drop(h *hub, why string) {
	for _, it := range n.items {
		if !it.done {
			it.done, it.outcome = true, "not answerable from here any more: "+why
			h.editAll(it.posts, it.text, "✖️", it.outcome)
		}
	}
	for _, c := range n.calls.Lost() {
		if c.Data.uncertain != nil {
			c.Data.uncertain(why, c.Tries)
		}
	}
	n.resend = nil
}

// cmdRoot shows the bound root of f with its action buttons.
func (h *hub) cmdRoot(m *telegram.Message, f *fleet) {
	if f == nil {
		if len(h.attached()) == 0 {
			h.reply(m, "No fleet is attached.")
		} else {
			h.reply(m, "Which fleet? Reply to one of its messages with /root, or choose it with /use FLEET.")
		}
		return
	}
	n := h.native(f)
	switch {
	case n.legacy:
		h.reply(m, f.head()+" is a legacy session: it has no native roots (start one with <code>fleet run --native-root</code>).")
		return
	case !n.known || n.root == "":
		h.reply(m, f.head()+": the native root is not known yet; try again in a moment.")
		if !n.probing {
			n.probe(h, f)
		}
		return
	}
	chat, thread := m.ChatID, m.ThreadID
	_, err := n.start(f, protocol.NativeRequest{Action: protocol.NativeStatus, RootID: n.root}, nativeOp{
		done: func(res protocol.NativeResult) {
			if res.Kind != protocol.NativeKindStatus || res.Root == nil {
				h.out.Enqueue(outItem{chat: chat, thread: thread, text: f.head() + " /root: " + esc(resultText(res))})
				return
			}
			n.status, n.rev = res.Root, res.Root.Revision
			h.reconcileApprovals(f, res.Root)
			h.out.Enqueue(outItem{chat: chat, thread: thread, text: rootText(f, res.Root), buttons: h.rootButtons(f, res.Root)})
		},
		uncertain: func(why string, _ int) {
			h.out.Enqueue(outItem{chat: chat, thread: thread, text: f.head() + " /root: no answer (" + esc(why) + ")"})
		},
	})
	if err != nil {
		h.reply(m, f.head()+" is not taking input right now.")
	}
}

func rootText(f *fleet, r *protocol.NativeRootStatus) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s 🌳 <b>root</b> <code>%s</code> · revision %d\nintent <b>%s</b> · phase <b>%s</b>", f.head(), esc(r.ID), r.Revision, esc(r.Intent), esc(r.Phase))
	if r.Intent != r.Phase {
		b.WriteString(" (not reached yet)")
	}
	fmt.Fprintf(&b, "\ntasks: %d", len(r.Tasks))
	var waiting []string
	for _, t := range r.Tasks {
		if awaiting(t, r.Decisions) {
			waiting = append(waiting, t.ID)
		}
	}
	fmt.Fprintf(&b, " · pending approvals: %d", len(waiting))
	if len(waiting) > 0 {
		fmt.Fprintf(&b, " (%s)", esc(strings.Join(waiting, ", ")))
	}
	fmt.Fprintf(&b, "\nholds: %d", len(r.Holds))
	for i, hd := range r.Holds {
		if i == 5 {
			fmt.Fprintf(&b, "\n  … %d more", len(r.Holds)-5)
			break
		}
		fmt.Fprintf(&b, "\n  • %s %s", esc(hd.TaskID), esc(oneLine(hd.Reason, 200)))
	}
	fmt.Fprintf(&b, "\ndecisions: %d · receipts pending: %d", len(r.Decisions), len(r.PendingReceipts))
	return b.String()
}

func (h *hub) rootButtons(f *fleet, r *protocol.NativeRootStatus) [][]telegram.Button {
	var row []telegram.Button
	for _, a := range []struct{ action, label string }{{"pause", "⏸ Pause"}, {"resume", "▶️ Resume"}, {"stop", "⏹ Stop"}} {
		t := h.buttons.add(&button{kind: buttonRoot, fleet: f.d.ID, value: a.action, text: r.ID, rev: r.Revision})
		row = append(row, telegram.Button{Text: a.label, Data: t})
	}
	return [][]telegram.Button{row}
}

// nativePress handles the root and native-approval buttons.
func (h *hub) nativePress(f *fleet, b *button, cq *telegram.Callback, by string) string {
	n := h.native(f)
	switch b.kind {
	case buttonRoot:
		// First tap: ask for a second one, pinned to the revision seen.
		yes := h.buttons.add(&button{kind: buttonRootConfirm, fleet: f.d.ID, value: b.value, text: b.text, rev: b.rev})
		no := h.buttons.add(&button{kind: buttonRootConfirm, fleet: f.d.ID, value: "cancel", text: b.text, rev: b.rev})
		text := fmt.Sprintf("%s %s root <code>%s</code> (revision %d)? Tap to confirm.", f.head(), strings.ToUpper(b.value[:1])+b.value[1:], esc(b.text), b.rev)
		h.out.Enqueue(outItem{chat: cq.ChatID, thread: cq.ThreadID, text: text, buttons: [][]telegram.Button{{{Text: "Confirm " + b.value, Data: yes}, {Text: "Cancel", Data: no}}}})
		return "Confirm with a second tap"
	case buttonRootConfirm:
		if b.value == "cancel" {
			h.out.Enqueue(outItem{chat: cq.ChatID, h: 0, text: f.head() + " cancelled; nothing was sent.", thread: cq.ThreadID})
			return "Cancelled"
		}
		if b.used {
			return "already sent"
		}
		b.used = true
		req := client.NativeMutation(nativeOrigin, protocol.NativeRequest{Action: b.value, RootID: b.text}, b.rev)
		chat, thread, msg := cq.ChatID, cq.ThreadID, cq.MessageID
		say := func(text string) {
			h.out.Enqueue(outItem{chat: chat, thread: thread, replyTo: msg, text: f.head() + " " + text})
		}
		_, err := n.start(f, req, nativeOp{
			done: func(res protocol.NativeResult) {
				h.log.Info("native root mutation", "fleet", f.d.ID, "action", req.Action, "operationId", req.OperationID, "result", res.Kind, "code", res.Code)
				say(esc(resultText(res)))
				if n.known {
					n.poll(h, f)
				}
			},
			uncertain: func(why string, tries int) {
				say(fmt.Sprintf("⚠️ the result of %s (operation <code>%s</code>) is uncertain: %s. It was sent %d times with the same operation id; /root shows whether it took effect.",
					esc(req.Action), esc(req.OperationID), esc(why), tries))
			},
		})
		if err != nil {
			return err.Error()
		}
		return "Sent " + b.value + " (operation " + req.OperationID + ")"
	case buttonNative:
		it := b.native
		if it.done {
			return "already answered (" + it.outcome + ")"
		}
		verb := map[string]string{"approve": "approving", "deny": "denying"}[b.value]
		text := fmt.Sprintf("%s Reply to this message with your rationale for %s task <code>%s</code> (required).", f.head(), verb, esc(it.taskID))
		h.postTo(cq.ChatID, f, text, nil, postRef{fleet: f.d.ID, native: it, rationale: b.value}, true, cq.MessageID)
		return "Reply with your rationale"
	}
	return ""
}

// nativeRationale sends an approve or deny whose rationale the operator
// gave by reply.
func (h *hub) nativeRationale(m *telegram.Message, ref postRef, rationale, by string) {
	it := ref.native
	f := h.fleets[ref.fleet]
	if it.done {
		h.reply(m, "already answered ("+esc(it.outcome)+")")
		return
	}
	if f == nil || !f.connected {
		h.reply(m, "That fleet is not connected right now; nothing was sent.")
		return
	}
	n := h.native(f)
	req := client.NativeMutation(nativeOrigin, protocol.NativeRequest{
		Action: ref.rationale, RootID: n.root, TaskID: it.taskID, Rationale: rationale,
	}, n.rev)
	chat, thread, msg := m.ChatID, m.ThreadID, m.ID
	say := func(text string) {
		h.out.Enqueue(outItem{chat: chat, thread: thread, replyTo: msg, text: f.head() + " " + text})
	}
	_, err := n.start(f, req, nativeOp{
		done: func(res protocol.NativeResult) {
			if res.Kind == protocol.NativeKindReceipt {
				it.madeBy, it.verdict, it.rationale = by, ref.rationale, rationale
			}
			say(esc(resultText(res)))
			n.poll(h, f)
		},
		uncertain: func(why string, _ int) {
			say(fmt.Sprintf("⚠️ the result of %s for %s (operation <code>%s</code>) is uncertain: %s; /root shows whether it took effect.",
				esc(req.Action), esc(it.taskID), esc(req.OperationID), esc(why)))
		},
	})
	switch {
	case errors.Is(err, errNotTakingInput):
		h.reply(m, "That fleet is not taking input right now; nothing was sent.")
	case err != nil:
		h.reply(m, "That "+esc(req.Action)+" cannot be sent ("+esc(err.Error())+"); nothing was sent.")
	}
}

// resultText says what a native result means, plainly.
func resultText(res protocol.NativeResult) string {
	switch res.Kind {
	case protocol.NativeKindReceipt:
		if r := res.Receipt; r != nil {
			return fmt.Sprintf("✅ %s accepted: receipt %s, root %s now at revision %d (%s)", r.Action, r.OperationID, r.RootID, r.Revision, r.Status)
		}
		return "✅ accepted"
	case protocol.NativeKindError:
		switch res.Code {
		case "revision_conflict":
			return "✖️ conflict: the root changed since you looked at it (" + res.Message + "). Nothing was changed; /root shows it as it is now."
		case "operation_id_reused":
			return "✖️ refused: that operation id was used for another request (" + res.Message + ")."
		}
		return "✖️ refused: " + res.Code + ": " + res.Message
	case protocol.NativeKindStatus:
		return "status"
	}
	return string(res.Kind)
}
