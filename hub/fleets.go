package hub

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agents-fleet/fleet/client"
	"github.com/agents-fleet/fleet/hub/telegram"
	"github.com/agents-fleet/fleet/registry"
)

// Fleet states, as fleet hub status shows them.
const (
	stateAwaiting     = "awaiting approval"
	stateDenied       = "denied"
	stateConnecting   = "connecting"
	stateAttached     = "attached"
	stateReconnecting = "reconnecting"
	stateDetached     = "detached"
)

// fleet is one fleet the hub knows of: a live descriptor with hubAttach
// that validated.
type fleet struct {
	d      registry.Descriptor
	state  string
	detail string // why: the last error, the detach reason

	approval     []post
	approvalText string
	decidedBy    string

	link         *link
	connected    bool
	attachedOnce bool
	history      int // replayed items not reposted

	// fold is what the fleet's frames said: its latest status and the
	// requests it waits on (onFrame).
	fold       client.State
	requests   map[string]*request // the posted pending confirms and asks, by the fleet's id
	ourPrompts map[string]bool     // requestIds of prompts sent from the chat
	promptIDs  []string
	native     nativeState
}

// post is one message the hub sent to one chat.
type post struct {
	chat int64
	h    handle
}

const maxOurPrompts = 256

func (f *fleet) label() string {
	if f.d.Name != "" {
		return f.d.Name
	}
	return f.d.ID
}

// head is the HTML header every message about f starts with.
func (f *fleet) head() string { return "<b>[" + esc(f.label()) + "]</b>" }

func (f *fleet) notePrompt(id string) {
	f.ourPrompts[id] = true
	f.promptIDs = append(f.promptIDs, id)
	if len(f.promptIDs) > maxOurPrompts {
		delete(f.ourPrompts, f.promptIDs[0])
		f.promptIDs = f.promptIDs[1:]
	}
}

func (h *hub) sortedFleets() []*fleet {
	fs := make([]*fleet, 0, len(h.fleets))
	for _, f := range h.fleets {
		fs = append(fs, f)
	}
	slices.SortFunc(fs, func(a, b *fleet) int {
		return cmp.Or(cmp.Compare(a.d.StartedAt, b.d.StartedAt), strings.Compare(a.d.ID, b.d.ID))
	})
	return fs
}

func (h *hub) attached() []*fleet {
	var out []*fleet
	for _, f := range h.sortedFleets() {
		if f.link != nil && f.attachedOnce {
			out = append(out, f)
		}
	}
	return out
}

// onScan reconciles the fleets with a registry listing.
func (h *hub) onScan(s scan) {
	if s.err != nil {
		h.log.Warn("registry", "dir", h.cfg.RegistryDir, "err", s.err)
		return
	}
	seen := map[string]bool{}
	live := map[string]bool{}
	for _, e := range s.entries {
		if e.Err != nil {
			h.refuse(e.Path, e.Err.Error(), false)
			continue
		}
		if !e.Alive {
			continue // stale: the fleet died without cleaning up
		}
		live[e.ID] = true
		if f := h.fleets[e.ID]; f != nil {
			seen[e.ID] = true
			if e.Descriptor != f.d {
				h.detach(f, "its descriptor changed after the hub saw it")
			}
			continue
		}
		if !e.HubAttach {
			continue
		}
		if err := registry.Validate(e.Descriptor); err != nil {
			h.refuse(e.Path, err.Error(), true)
			continue
		}
		seen[e.ID] = true
		delete(h.refused, e.Path)
		h.discover(e.Descriptor)
	}
	for id, f := range h.fleets {
		if !seen[id] {
			h.gone(f)
		}
	}
	if err := h.trust.forget(live); err != nil {
		h.log.Warn("hub decisions", "err", err)
	}
}

// refuse reports a descriptor the hub will not trust, once per reason.
func (h *hub) refuse(path, reason string, post bool) {
	if h.refused[path] == reason {
		return
	}
	h.refused[path] = reason
	h.log.Warn("fleet descriptor refused; its token is not read", "path", path, "reason", reason)
	if post {
		h.postAll(nil, fmt.Sprintf("⚠️ <b>Refused a fleet descriptor</b>\n<code>%s</code>\n%s\nThe hub does not read its token or attach to it.", esc(path), esc(reason)), nil, postRef{}, false)
	}
}

// discover starts on a new fleet: attach if the operator already approved
// this very fleet (same id), else ask.
func (h *hub) discover(d registry.Descriptor) {
	f := &fleet{d: d, requests: map[string]*request{}, ourPrompts: map[string]bool{}}
	h.fleets[d.ID] = f
	if e, ok := h.trust.decision(d.ID); ok && e.Name == d.Name && e.Cwd == d.Cwd {
		f.decidedBy = e.By
		if e.Approved {
			h.log.Info("fleet approved before; attaching", "fleet", d.ID, "name", d.Name)
			h.attach(f)
		} else {
			f.state = stateDenied
		}
		return
	}
	f.state = stateAwaiting
	var b strings.Builder
	fmt.Fprintf(&b, "🛰 <b>Fleet %s wants to attach</b>\n", esc(f.label()))
	if d.Cwd != "" {
		fmt.Fprintf(&b, "folder: <code>%s</code>\n", esc(d.Cwd))
	}
	fmt.Fprintf(&b, "pid %d · id <code>%s</code> · started %s\n", d.PID, esc(d.ID), time.UnixMilli(d.StartedAt).Format("2006-01-02 15:04:05"))
	if h.trust.approvedBefore(d.Name, d.Cwd) {
		b.WriteString("Same name and folder as a fleet you approved before (this is a new process, so it is asked again).\n")
	}
	b.WriteString("Approve lets this hub read its control token, relay its requests and send it prompts.")
	f.approvalText = b.String()
	approve := h.buttons.add(&button{kind: buttonAttach, fleet: d.ID, value: "approve"})
	deny := h.buttons.add(&button{kind: buttonAttach, fleet: d.ID, value: "deny"})
	f.approval = h.postAll(nil, f.approvalText, [][]telegram.Button{{{Text: "✅ Approve", Data: approve}, {Text: "❌ Deny", Data: deny}}}, postRef{fleet: d.ID}, false)
	h.log.Info("fleet wants to attach; asked the operator", "fleet", d.ID, "name", d.Name, "cwd", d.Cwd)
}

// decideAttach is the operator's answer to an attach question.
func (h *hub) decideAttach(f *fleet, approve bool, by string) string {
	if f.state != stateAwaiting {
		return "already answered (" + f.state + " by " + cmp.Or(f.decidedBy, "the operator") + ")"
	}
	f.decidedBy = by
	if err := h.trust.decide(f.d, approve, by, time.Now().UnixMilli()); err != nil {
		h.log.Warn("hub decisions", "err", err)
	}
	if !approve {
		f.state = stateDenied
		h.editAll(f.approval, f.approvalText, "❌", "Denied by "+by+". The hub ignores this fleet until it restarts.")
		h.log.Info("fleet denied", "fleet", f.d.ID, "by", by)
		return "Denied " + f.label()
	}
	h.editAll(f.approval, f.approvalText, "✅", "Approved by "+by+". Attaching…")
	h.log.Info("fleet approved", "fleet", f.d.ID, "by", by)
	h.attach(f)
	return "Approved " + f.label()
}

func (h *hub) attach(f *fleet) {
	h.gen++
	f.state = stateConnecting
	f.link = startLink(h.ctxOrBackground(), f.d, h.cfg.RegistryDir, h.gen, h.cfg.Verbosity >= Verbose, h.log, h.emit)
}

func (h *hub) onLink(f *fleet, e linkEvent) {
	switch {
	case e.detach != "":
		h.detach(f, e.detach)
	case e.up:
		f.state, f.detail, f.connected = stateAttached, "", true
		f.fold.Attached(e.welcome)
		f.history = 0
		h.log.Info("fleet attached", "fleet", f.d.ID, "name", f.d.Name, "session", e.welcome.SessionID)
	default:
		f.connected = false
		f.detail = e.err.Error()
		if f.attachedOnce {
			f.state = stateReconnecting
		}
		h.native(f).connectionLost()
	}
}

// detach stops relaying f for good (until it restarts as a new fleet).
func (h *hub) detach(f *fleet, reason string) {
	if f.state == stateDetached {
		return
	}
	was := f.state
	h.stopLink(f)
	f.state, f.detail = stateDetached, reason
	h.log.Warn("fleet detached", "fleet", f.d.ID, "reason", reason)
	switch was {
	case stateAwaiting:
		h.editAll(f.approval, f.approvalText, "⚠️", "Not attached: "+reason+".")
	case stateDenied:
	default:
		h.postAll(f, f.head()+" ⚠️ detached: "+esc(reason)+". The hub no longer relays this fleet.", nil, postRef{fleet: f.d.ID}, false)
	}
	h.dropRequests(f, "the hub detached from the fleet")
}

// gone forgets a fleet whose descriptor disappeared or whose pid died.
func (h *hub) gone(f *fleet) {
	h.stopLink(f)
	switch f.state {
	case stateAwaiting:
		h.editAll(f.approval, f.approvalText, "⌛", "The fleet exited before it was approved.")
	case stateAttached, stateReconnecting, stateConnecting:
		if f.attachedOnce && h.cfg.Verbosity >= Normal {
			h.line(f, "🏁 the fleet has exited")
		}
	}
	h.dropRequests(f, "the fleet exited")
	delete(h.fleets, f.d.ID)
	for _, c := range h.chats {
		if c.selected == f.d.ID {
			c.selected = ""
		}
	}
	h.log.Info("fleet gone", "fleet", f.d.ID)
}

func (h *hub) stopLink(f *fleet) {
	if f.link != nil {
		f.link.stop()
		f.link = nil
	}
	f.connected = false
}

// postAll sends a message that must go out as it is (not merged) to every
// allowed chat, in the fleet's topic where there is one, and remembers what
// each copy is about.
func (h *hub) postAll(f *fleet, text string, buttons [][]telegram.Button, ref postRef, force bool) []post {
	var posts []post
	for _, c := range h.cfg.AllowedChats {
		posts = append(posts, h.postTo(c, f, text, buttons, ref, force, 0))
	}
	return posts
}

// postTo sends to one chat; replyTo is a message id in it (0: none). Text
// over the limit is sent in parts, the last one carrying the buttons.
func (h *hub) postTo(chat int64, f *fleet, text string, buttons [][]telegram.Button, ref postRef, force bool, replyTo int64) post {
	thread := int64(0)
	if f != nil {
		thread = h.thread(chat, f)
	}
	parts := split(text, MaxMessageLen-300) // room for an outcome appended later
	for _, p := range parts[:len(parts)-1] {
		hd := h.out.NewHandle()
		h.posts.expect(hd, ref)
		h.out.Enqueue(outItem{chat: chat, thread: thread, h: hd, text: p, replyTo: replyTo, fleet: ref.fleet})
		replyTo = 0
	}
	hd := h.out.NewHandle()
	h.posts.expect(hd, ref)
	h.out.Enqueue(outItem{chat: chat, thread: thread, h: hd, text: parts[len(parts)-1], buttons: buttons, force: force && buttons == nil, replyTo: replyTo, fleet: ref.fleet})
	return post{chat: chat, h: hd}
}

// editAll rewrites posts (the messages that carry the buttons) as base,
// the text they were posted with, plus an outcome line, and removes their
// buttons. Only the last part of a long base was in the message that is
// edited, and the outcome is clipped so the edit fits.
func (h *hub) editAll(posts []post, base, icon, outcome string) {
	parts := split(base, MaxMessageLen-300)
	text := parts[len(parts)-1] + "\n\n" + icon + " <b>" + esc(clip(outcome, 250)) + "</b>"
	for _, p := range posts {
		h.out.Enqueue(outItem{chat: p.chat, h: p.h, edit: true, text: text})
	}
}

// line queues a low-priority notice or reply about f, merged with its
// neighbours.
func (h *hub) line(f *fleet, html string) { h.text(f, false, html) }

// output queues a line of worker output or a tool call (verbose).
func (h *hub) output(f *fleet, html string) { h.text(f, true, html) }

func (h *hub) text(f *fleet, output bool, html string) {
	for _, c := range h.cfg.AllowedChats {
		thread := h.thread(c, f)
		if utf16Len(html) > MaxMessageLen-utf16Len(f.head())-1 {
			// A long reply goes out whole, in parts.
			for _, p := range split(html, MaxMessageLen-utf16Len(f.head())-1) {
				h.out.Enqueue(outItem{chat: c, thread: thread, text: f.head() + "\n" + p, h: h.out.NewHandle(), fleet: f.d.ID})
			}
			continue
		}
		h.out.Line(c, thread, f.d.ID, output, f.head(), html)
	}
}

// thread is f's forum topic in chat, 0 for none; in a forum chat it starts
// creating one the first time.
func (h *hub) thread(chat int64, f *fleet) int64 {
	c := h.chat(chat)
	if t, ok := c.topics[f.d.ID]; ok {
		return t
	}
	if c.forum && !c.noTopics && !c.creating[f.d.ID] {
		c.creating[f.d.ID] = true
		id, name := f.d.ID, f.label()
		h.async(func(ctx context.Context) {
			t, err := h.bot.CreateTopic(ctx, chat, clip(name, 120))
			h.emit(h.ctxOrBackground(), topicResult{chat: chat, fleet: id, thread: t, err: err})
		})
	}
	return 0
}

type topicResult struct {
	chat   int64
	fleet  string
	thread int64
	err    error
}

func (h *hub) onTopic(r topicResult) {
	c := h.chat(r.chat)
	delete(c.creating, r.fleet)
	if r.err != nil && !errors.Is(r.err, telegram.ErrUnsupported) && !errors.Is(r.err, telegram.ErrBadRequest) && !errors.Is(r.err, telegram.ErrForbidden) {
		// A transient failure (network, 429): try again with the next post.
		h.log.Info("could not create a forum topic; will try again", "chat", r.chat, "err", r.err)
		return
	}
	if r.err != nil || r.thread == 0 {
		if !c.noTopics {
			h.log.Warn("chat is a forum but the hub cannot create topics there; posting in the general topic", "chat", r.chat, "err", r.err)
		}
		c.noTopics = true
		return
	}
	c.topics[r.fleet] = r.thread
	c.byThread[r.thread] = r.fleet
}
