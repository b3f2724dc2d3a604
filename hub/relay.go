package hub

import (
	"fmt"
	"strings"

	"github.com/agents-fleet/fleet/client"
	"github.com/agents-fleet/fleet/hub/telegram"
	"github.com/agents-fleet/fleet/protocol"
)

// request is a pending confirm or ask of a fleet, as posted in the chats.
type request struct {
	fleet    *fleet
	id       string
	kind     protocol.ResolvedKind
	text     string // the posted HTML, without an outcome
	posts    []post
	choices  []protocol.AskChoiceOption
	freeform bool
	// answer is what this hub sent and by whom, until the fleet resolves it.
	answer, by string
	approve    bool
	done       bool
	outcome    string
}

// onFrame relays one frame of f. f.fold keeps what the frames said of the
// fleet (its status, its pending requests); the hub posts what it changes.
func (h *hub) onFrame(f *fleet, m protocol.Message, replay bool) {
	ch := f.fold.Apply(m)
	switch m := m.(type) {
	case *protocol.Status:
		return
	case *protocol.NativeRootResult:
		h.native(f).result(h, f, m)
		return
	case *protocol.Hydrate:
		f.history += len(m.Conversation) + len(m.Transcripts) + len(m.Hub)
		return
	case *protocol.ReplayEnd:
		h.replayDone(f, ch.Gone)
		return
	case *protocol.ConfirmRequest, *protocol.AskRequest:
		// Posted once: a re-attach's replay brings it again (ch.Again).
		if !ch.Again && !ch.Overflow {
			h.request(f, replay, *ch.Asked)
		}
		return
	case *protocol.ConfirmResolved:
		// The replay carries none; a live one edits the request's posts.
		if ch.Resolved != nil {
			h.resolved(f, m)
		}
		return
	}
	if replay {
		f.history++
		return
	}
	v := h.cfg.Verbosity
	switch m := m.(type) {
	case *protocol.Reply:
		if t := strings.TrimSpace(m.Text); t != "" {
			h.line(f, esc(t))
		}
	case *protocol.HubEvent:
		if icon, from := hubEventClass(m.Kind); v >= from {
			h.line(f, icon+" "+esc(hubEventText(m)))
		}
	case *protocol.UserMessage:
		if f.ourPrompts[m.RequestID] {
			return // our own prompt, echoed back
		}
		if v >= Normal {
			h.line(f, "💬 <i>"+esc(m.Source)+"</i>: "+esc(oneLine(m.Text, 1000)))
		}
	case *protocol.Error:
		if v >= Normal {
			h.line(f, "⚠️ "+esc(m.Message))
		}
	case *protocol.Transcript:
		if t := strings.TrimRight(m.Text, " \n"); t != "" {
			who := m.Agent
			if who == "" {
				who = "coordinator"
			}
			h.output(f, "<code>"+esc(who)+"</code> "+esc(clip(t, 1000)))
		}
	case *protocol.ToolCall:
		if m.Phase == protocol.PhaseStart {
			d := m.Detail
			if d == "" {
				d = m.Tool
			}
			h.output(f, "🔧 <code>"+esc(m.Agent)+"</code> "+esc(m.Tool)+": "+esc(oneLine(d, 300)))
		}
	}
}

// hubEventClass says how a hubEvent kind is shown and from which verbosity:
// what an operator must know (failures, budgets) even when quiet, lifecycle
// news at normal, the chatter of coordination only when verbose.
func hubEventClass(kind string) (icon string, from Verbosity) {
	switch kind {
	case protocol.HubFailed:
		return "❌", Quiet
	case protocol.HubBudget:
		return "💸", Quiet
	case protocol.HubCompleted:
		return "✅", Normal
	case protocol.HubMerged:
		return "🔀", Normal
	case protocol.HubSpawned:
		return "🚀", Verbose
	}
	return "•", Verbose
}

func hubEventText(m *protocol.HubEvent) string {
	text := oneLine(m.Text, 500)
	switch {
	case m.From == "" || strings.HasPrefix(text, m.From):
		return text
	case text == "":
		return m.From + " " + m.Kind
	}
	return m.From + ": " + text
}

// request posts a confirm or ask that became pending as actionable.
func (h *hub) request(f *fleet, replay bool, q client.Request) {
	id, kind, body, free := q.ID(), q.Kind(), q.Text(), q.Freeform()
	var choices []protocol.AskChoiceOption
	if q.Ask != nil {
		choices = q.Ask.Choices
	}
	r := &request{fleet: f, id: id, kind: kind, choices: choices, freeform: free}
	var b strings.Builder
	b.WriteString(f.head())
	var buttons [][]telegram.Button
	if kind == protocol.KindConfirm {
		b.WriteString(" 🔐 <b>Approve?</b>\n")
		b.WriteString(esc(body))
		yes := h.buttons.add(&button{kind: buttonConfirm, fleet: f.d.ID, req: r, value: "approve"})
		no := h.buttons.add(&button{kind: buttonConfirm, fleet: f.d.ID, req: r, value: "deny"})
		buttons = [][]telegram.Button{{{Text: "✅ Approve", Data: yes}, {Text: "❌ Deny", Data: no}}}
	} else {
		b.WriteString(" ❓ <b>Question</b>\n")
		b.WriteString(esc(body))
		for _, c := range choices {
			if c.Description != "" {
				fmt.Fprintf(&b, "\n• <b>%s</b>: %s", esc(c.Label), esc(oneLine(c.Description, 300)))
			}
			t := h.buttons.add(&button{kind: buttonAsk, fleet: f.d.ID, req: r, value: c.Value})
			buttons = append(buttons, []telegram.Button{{Text: oneLine(c.Label, 60), Data: t}})
		}
		if free {
			if len(choices) > 0 {
				b.WriteString("\n<i>Or reply to this message with your own answer.</i>")
			} else {
				b.WriteString("\n<i>Reply to this message with your answer.</i>")
			}
		}
	}
	if replay {
		b.WriteString("\n<i>(asked before the hub attached)</i>")
	}
	r.text = b.String()
	r.posts = h.postAll(f, r.text, buttons, postRef{fleet: f.d.ID, req: r}, free && len(choices) == 0)
	f.requests[id] = r
}

// resolved edits a request's messages with its outcome: who answered and
// where, or why it went away.
func (h *hub) resolved(f *fleet, m *protocol.ConfirmResolved) {
	r := f.requests[m.ID]
	if r == nil {
		return
	}
	delete(f.requests, m.ID)
	verdict := "approved"
	if !m.Approved {
		verdict = "denied"
	}
	icon := "✅"
	if !m.Approved {
		icon = "❌"
	}
	switch {
	case m.Reason == protocol.ReasonExpired:
		icon, r.outcome = "⌛", "expired unanswered"
	case m.Reason == protocol.ReasonCancelled:
		icon, r.outcome = "✖️", "cancelled: the worker ended or the fleet shut down"
	case m.Reason == protocol.ReasonSuperseded:
		r.outcome = "answered elsewhere (the fleet's terminal or another surface): " + verdict
		icon = "↪️"
	case r.answer != "" && r.kind == protocol.KindConfirm && r.approve != m.Approved:
		// We sent one answer, the fleet took another: someone was first.
		icon, r.outcome = "↪️", "answered elsewhere (another console) first: "+verdict
	case r.answer != "":
		if r.kind == protocol.KindAsk {
			icon, r.outcome = "💬", fmt.Sprintf("answered here by %s: %s", r.by, r.answer)
		} else {
			r.outcome = verdict + " here by " + r.by
		}
	default:
		if r.kind == protocol.KindAsk {
			icon, r.outcome = "↪️", "answered elsewhere (another console)"
		} else {
			icon, r.outcome = "↪️", "answered elsewhere (another console): "+verdict
		}
	}
	r.done = true
	h.editAll(r.posts, r.text, icon, r.outcome)
}

// replayDone ends a (re-)attach: gone are the requests that were pending
// when the link dropped and that the replay did not bring again, resolved
// while the hub was away; the first attach gets one summary line instead
// of the history.
func (h *hub) replayDone(f *fleet, gone []client.Request) {
	for _, q := range gone {
		if r := f.requests[q.ID()]; r != nil {
			delete(f.requests, q.ID())
			r.done, r.outcome = true, "no longer pending: resolved while the hub was away"
			h.editAll(r.posts, r.text, "↪️", r.outcome)
		}
	}
	first := !f.attachedOnce
	f.attachedOnce = true
	pending := len(f.requests)
	if first {
		text := fmt.Sprintf("🛰 attached to %s", esc(f.label()))
		if f.d.Cwd != "" {
			text += " (<code>" + esc(f.d.Cwd) + "</code>)"
		}
		if f.history > 0 {
			text += fmt.Sprintf(": %d earlier items of history not reposted", f.history)
		} else {
			text += ": no earlier history"
		}
		if pending > 0 {
			text += fmt.Sprintf("; %d pending request(s) posted", pending)
		}
		text += ". Send text to prompt it; /help for commands."
		h.line(f, text)
	} else {
		h.log.Info("fleet re-attached; history not reposted", "fleet", f.d.ID, "items", f.history, "pending", pending)
	}
	h.native(f).probe(h, f)
}

// dropRequests closes f's pending requests when the hub stops relaying it.
func (h *hub) dropRequests(f *fleet, why string) {
	for id, r := range f.requests {
		delete(f.requests, id)
		r.done, r.outcome = true, "not answerable from here any more: "+why
		h.editAll(r.posts, r.text, "✖️", r.outcome)
	}
	h.native(f).drop(h, why)
}

// answer sends the operator's answer to a request; it returns what the
// presser is told.
func (h *hub) answer(r *request, value string, by string) string {
	if r.done {
		return "already answered (" + r.outcome + ")"
	}
	if r.answer != "" {
		return "already answered (" + r.answer + " by " + r.by + "; waiting for the fleet)"
	}
	f := h.fleets[r.fleet.d.ID]
	if f == nil || f != r.fleet || f.link == nil || !f.connected {
		return "the fleet is not connected right now; try again when it is back"
	}
	var m protocol.Message
	switch {
	case r.kind == protocol.KindConfirm:
		r.approve = value == "approve"
		m = &protocol.ConfirmResponse{ID: r.id, Approve: r.approve}
	default:
		m = &protocol.AskResponse{ID: r.id, Text: value}
	}
	if !f.link.send(m) {
		return "the fleet is not taking input right now; try again"
	}
	r.answer, r.by = value, by
	if r.kind == protocol.KindConfirm {
		r.answer = map[bool]string{true: "approved", false: "denied"}[r.approve]
	}
	for _, c := range r.choices {
		if c.Value == value {
			r.answer = c.Label // what the operator tapped, not the wire value
		}
	}
	return fmt.Sprintf("Sent to %s: %s", f.label(), clip(r.answer, 100))
}
