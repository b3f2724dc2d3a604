package hub

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	"github.com/agents-fleet/fleet/client"
	"github.com/agents-fleet/fleet/hub/telegram"
	"github.com/agents-fleet/fleet/protocol"
)

var hubCommands = []telegram.Command{
	{Name: "help", Description: "what the hub does and its commands"},
	{Name: "fleets", Description: "the fleets the hub knows"},
	{Name: "use", Description: "/use FLEET: send plain text to that fleet"},
	{Name: "status", Description: "workers, tasks and pending requests"},
	{Name: "root", Description: "a native fleet's root: status, pause, resume, stop"},
}

const helpText = `<b>fleet hub</b> relays your fleets' questions and approvals here, and your answers and prompts back.

Plain text is a prompt: it goes to the fleet of the message you reply to, else the one chosen with /use, else the only attached fleet; with several the hub asks which.
Reply to a question to answer it in your own words.

/fleets: the fleets and their state
/use FLEET: choose the fleet for plain text (id, id prefix or name)
/status: workers, tasks and pending requests
/root: a native fleet's root, with Pause / Resume / Stop
Any other /command is sent to the fleet as a prompt (its /help lists them).`

// who names a Telegram user in outcomes.
func who(name string, id int64) string {
	if name != "" {
		return name
	}
	return fmt.Sprintf("user %d", id)
}

// onMessage handles text from a chat: hub commands, answers by reply, and
// prompts.
func (h *hub) onMessage(m *telegram.Message) {
	if !h.allowedChat(m.ChatID) {
		h.log.Warn("ignored a message from a chat that is not allowed", "chat", m.ChatID, "from", m.FromID)
		return
	}
	if !h.allowedUser(m.FromID) {
		h.log.Warn("ignored a message from a user who is not allowed", "chat", m.ChatID, "from", m.FromID)
		return
	}
	c := h.chat(m.ChatID)
	if m.IsForum {
		c.forum = true
	}
	text := strings.TrimSpace(m.Text)
	if text == "" {
		return
	}
	by := who(m.FromName, m.FromID)
	var ref postRef
	var replied bool
	if m.ReplyTo != 0 {
		ref, replied = h.posts.lookup(m.ChatID, m.ReplyTo)
	}
	// A reply to a question or to a rationale prompt is an answer.
	if replied && ref.rationale != "" && ref.native != nil {
		h.nativeRationale(m, ref, text, by)
		return
	}
	if replied && ref.req != nil && ref.req.kind == protocol.KindAsk && ref.req.done && !strings.HasPrefix(text, "/") {
		// A late answer must not vanish, nor become a prompt by surprise.
		h.reply(m, "That question is already answered ("+esc(ref.req.outcome)+"); nothing was sent. To prompt the fleet, send your text without replying to the question.")
		return
	}
	if replied && ref.req != nil && ref.req.kind == protocol.KindAsk && !ref.req.done && !strings.HasPrefix(text, "/") {
		if !ref.req.freeform {
			h.reply(m, "This question takes one of its buttons, not free text.")
			return
		}
		h.reply(m, h.answer(ref.req, text, by))
		return
	}
	if strings.HasPrefix(text, "/") {
		name, args := command(text)
		switch name {
		case "help", "start":
			h.reply(m, helpText)
			return
		case "fleets":
			h.cmdFleets(m)
			return
		case "use":
			h.cmdUse(m, args)
			return
		case "status":
			h.cmdStatus(m, h.target(m, ref, replied))
			return
		case "root":
			h.cmdRoot(m, h.target(m, ref, replied))
			return
		}
	}
	f := h.target(m, ref, replied)
	if f == nil {
		h.askWhich(m, text)
		return
	}
	h.prompt(m, f, text)
}

// command splits "/name@bot args" into name (lower case) and args.
func command(text string) (name, args string) {
	name, args, _ = strings.Cut(text[1:], " ")
	name, _, _ = strings.Cut(name, "@")
	return strings.ToLower(name), strings.TrimSpace(args)
}

// target is the fleet a message is for: the fleet of the message it
// replies to, else of its forum topic, else the chat's /use choice, else
// the only attached fleet; nil when that leaves a choice.
func (h *hub) target(m *telegram.Message, ref postRef, replied bool) *fleet {
	live := func(id string) *fleet {
		if f := h.fleets[id]; f != nil && f.link != nil && f.attachedOnce {
			return f
		}
		return nil
	}
	if replied && ref.fleet != "" {
		if f := live(ref.fleet); f != nil {
			return f
		}
	}
	c := h.chat(m.ChatID)
	if m.ThreadID != 0 {
		if f := live(c.byThread[m.ThreadID]); f != nil {
			return f
		}
	}
	if f := live(c.selected); f != nil {
		return f
	}
	if a := h.attached(); len(a) == 1 {
		return a[0]
	}
	return nil
}

// prompt sends text to f with a fresh requestId, whose echo is not reposted.
func (h *hub) prompt(m *telegram.Message, f *fleet, text string) {
	if !f.connected {
		h.reply(m, f.head()+" is not connected right now ("+esc(cmp.Or(f.detail, f.state))+"); your message was not sent.")
		return
	}
	id := client.NewRequestID()
	if !f.link.send(&protocol.Prompt{Text: text, RequestID: id}) {
		h.reply(m, f.head()+" is not taking input right now; your message was not sent.")
		return
	}
	f.notePrompt(id)
}

// askWhich stashes text and asks which fleet it is for.
func (h *hub) askWhich(m *telegram.Message, text string) {
	a := h.attached()
	if len(a) == 0 {
		h.reply(m, "No fleet is attached. Start one with <code>fleet run --hub</code>; it will ask to attach here.")
		return
	}
	var rows [][]telegram.Button
	routed := new(string) // one text, sent once, whichever button is tapped
	for _, f := range a {
		t := h.buttons.add(&button{kind: buttonRoute, fleet: f.d.ID, text: text, routed: routed})
		rows = append(rows, []telegram.Button{{Text: oneLine(f.label(), 40), Data: t}})
	}
	h.replyButtons(m, "Which fleet is this for? (/use FLEET to choose one for what follows)\n<i>"+esc(oneLine(text, 200))+"</i>", rows)
}

func (h *hub) cmdFleets(m *telegram.Message) {
	fs := h.sortedFleets()
	if len(fs) == 0 {
		h.reply(m, "No fleets. A fleet started with <code>fleet run --hub</code> asks to attach here.")
		return
	}
	c := h.chat(m.ChatID)
	var b strings.Builder
	b.WriteString("<b>Fleets</b>")
	var rows [][]telegram.Button
	for _, f := range fs {
		mark := ""
		if c.selected == f.d.ID {
			mark = " ← /use"
		}
		fmt.Fprintf(&b, "\n• <b>%s</b> <code>%s</code> %s · %s%s", esc(f.label()), esc(f.d.ID), esc(f.d.Cwd), esc(f.state), mark)
		if n := len(f.requests); n > 0 {
			fmt.Fprintf(&b, " · %d pending", n)
		}
		if f.link != nil && f.attachedOnce && c.selected != f.d.ID {
			t := h.buttons.add(&button{kind: buttonUse, fleet: f.d.ID})
			rows = append(rows, []telegram.Button{{Text: "Use " + oneLine(f.label(), 40), Data: t}})
		}
	}
	h.replyButtons(m, b.String(), rows)
}

func (h *hub) cmdUse(m *telegram.Message, sel string) {
	if sel == "" {
		h.reply(m, "Usage: /use FLEET (an id, a unique id prefix or a name; /fleets lists them)")
		return
	}
	var match []*fleet
	for _, f := range h.attached() {
		if f.d.ID == sel || f.d.Name == sel {
			match = []*fleet{f}
			break
		}
		if strings.HasPrefix(f.d.ID, sel) {
			match = append(match, f)
		}
	}
	switch len(match) {
	case 0:
		h.reply(m, "No attached fleet matches <code>"+esc(sel)+"</code>; /fleets lists them.")
	case 1:
		h.chat(m.ChatID).selected = match[0].d.ID
		h.reply(m, "Plain text now goes to "+match[0].head()+".")
	default:
		h.reply(m, "<code>"+esc(sel)+"</code> matches several fleets; use its id.")
	}
}

func (h *hub) cmdStatus(m *telegram.Message, only *fleet) {
	fs := h.attached()
	if only != nil {
		fs = []*fleet{only}
	}
	if len(fs) == 0 {
		h.reply(m, "No fleet is attached.")
		return
	}
	var b strings.Builder
	for i, f := range fs {
		if i > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString(f.head() + " " + esc(f.state))
		if s := f.fold.Status; s != nil {
			state := "idle"
			if s.Processing {
				state = "working"
			}
			fmt.Fprintf(&b, " · %s", state)
			switch {
			case s.Model != "" && s.Model != s.Provider:
				fmt.Fprintf(&b, " · %s %s", esc(s.Provider), esc(s.Model))
			case s.Provider != "":
				fmt.Fprintf(&b, " · %s", esc(s.Provider))
			}
			if s.TasksTotal != nil {
				fmt.Fprintf(&b, "\ntasks: %d done of %d", deref(s.TasksDone), *s.TasksTotal)
				if s.TasksActive != nil {
					fmt.Fprintf(&b, ", %d active", *s.TasksActive)
				}
			}
			for _, w := range s.Workers {
				fmt.Fprintf(&b, "\n• <code>%s</code> %s", esc(w.Name), esc(w.Status))
				if st := workerState(f.fold.Fleet, w.Name); st != "" {
					b.WriteString(" — " + esc(st))
				}
			}
		}
		if n := len(f.requests); n > 0 {
			fmt.Fprintf(&b, "\n%d pending request(s) above", n)
		}
	}
	h.reply(m, b.String())
}

// workerState is what fleetState says worker name is doing, when that says
// more than its status: waiting for the operator or for memory,
// rate-limited until a time, stalled, failed with a reason; "" otherwise.
func workerState(fs *protocol.FleetState, name string) string {
	if fs == nil {
		return ""
	}
	for _, w := range fs.Workers {
		if w.Name != name && w.ID != name {
			continue
		}
		if w.State == "" || w.State == protocol.WorkerStateWorking || w.State == protocol.WorkerStateDone {
			return ""
		}
		s := w.State
		if w.RateLimitedUntil > 0 {
			s += " until " + time.UnixMilli(w.RateLimitedUntil).UTC().Format("15:04 UTC")
		}
		if w.StateReason != "" {
			s += ": " + protocol.CutText(w.StateReason, 200)
		}
		return s
	}
	return ""
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// reply answers a message in its chat and thread.
func (h *hub) reply(m *telegram.Message, html string) { h.replyButtons(m, html, nil) }

func (h *hub) replyButtons(m *telegram.Message, html string, rows [][]telegram.Button) {
	parts := split(html, MaxMessageLen)
	for i, p := range parts {
		it := outItem{chat: m.ChatID, thread: m.ThreadID, text: p}
		if i == len(parts)-1 {
			it.buttons = rows
		}
		h.out.Enqueue(it)
	}
}

// onCallback handles a button press.
func (h *hub) onCallback(cq *telegram.Callback) {
	if !h.allowedChat(cq.ChatID) {
		h.log.Warn("ignored a button press from a chat that is not allowed", "chat", cq.ChatID, "from", cq.FromID)
		h.answerCallback(cq.ID, "")
		return
	}
	if !h.allowedUser(cq.FromID) {
		h.log.Warn("ignored a button press from a user who is not allowed", "chat", cq.ChatID, "from", cq.FromID)
		h.answerCallback(cq.ID, "You are not allowed to answer this fleet.")
		return
	}
	b := h.buttons.get(cq.Data)
	if b == nil {
		h.answerCallback(cq.ID, "This button has expired.")
		return
	}
	by := who(cq.FromName, cq.FromID)
	f := h.fleets[b.fleet]
	switch b.kind {
	case buttonAttach:
		if f == nil {
			h.answerCallback(cq.ID, "That fleet has exited.")
			return
		}
		h.answerCallback(cq.ID, h.decideAttach(f, b.value == "approve", by))
	case buttonConfirm, buttonAsk:
		h.answerCallback(cq.ID, h.answer(b.req, b.value, by))
	case buttonRoute, buttonUse:
		if f == nil || f.link == nil {
			h.answerCallback(cq.ID, "That fleet is not attached any more.")
			return
		}
		m := &telegram.Message{ChatID: cq.ChatID, ThreadID: cq.ThreadID, FromID: cq.FromID, FromName: cq.FromName}
		if b.kind == buttonUse {
			h.chat(cq.ChatID).selected = f.d.ID
			h.answerCallback(cq.ID, "Plain text now goes to "+f.label())
			return
		}
		if *b.routed != "" {
			h.answerCallback(cq.ID, "Already sent to "+*b.routed)
			return
		}
		*b.routed = f.label()
		h.prompt(m, f, b.text)
		h.answerCallback(cq.ID, "Sent to "+f.label())
	case buttonRoot, buttonRootConfirm, buttonNative:
		if f == nil || f.link == nil {
			h.answerCallback(cq.ID, "That fleet is not attached any more.")
			return
		}
		h.answerCallback(cq.ID, h.nativePress(f, b, cq, by))
	default:
		h.answerCallback(cq.ID, "")
	}
}
