package tui

import (
	"time"

	"github.com/agents-fleet/fleet/client"
	"github.com/agents-fleet/fleet/protocol"
)

// The fold: how a fleet's frames become what the console keeps of it
// (fleet.go). Frames come in here only; the tabs read the fleet they fold
// into (the diff pane alone watches the frames, for its answer). The
// snapshots and the request queue are client.State's; this file adds what
// only a screen keeps: the cleaned histories, the answers we sent and the
// requests dismissed elsewhere.

// Apply folds one frame of fleet id into the model. replay marks history
// (between welcome and replayEnd): folded the same way, without alerts or
// dismissal notices.
func (m *Model) Apply(id string, msg protocol.Message, replay bool) {
	f := m.fleets[id]
	if f == nil && id != m.sel {
		return // a fleet left behind (followed to its successor, or dropped from the registry)
	}
	f = m.fleetFor(id)
	msg = asPointer(msg)
	// The diff pane waits for the reply to its own prompt among the frames.
	if d := m.tabs.workers.diff; d != nil {
		d.watch(id, msg, replay)
	}
	if ch := f.apply(msg, replay, m.now()); ch.Asked != nil && !ch.Again && !ch.Overflow && !replay {
		m.notify(f, *ch.Asked)
	}
}

// apply folds one frame into f, received at now, and returns what it did
// to the request queue.
func (f *fleet) apply(msg protocol.Message, replay bool, now time.Time) client.Change {
	f.lastFrame = now
	ch := f.fold.Apply(msg)
	switch v := msg.(type) {
	case *protocol.UserMessage:
		mine := v.RequestID != "" && f.own.remove(v.RequestID)
		who := oneLine(v.Source)
		if mine {
			who = "you"
		} else if who == "" {
			who = "user"
		}
		f.addConv(convEntry{who: who, mine: mine, role: protocol.RoleUser, text: v.Text})
	case *protocol.Reply:
		f.addConv(convEntry{who: "fleet", role: protocol.RoleAssistant, text: v.Text})
	case *protocol.FleetState:
		f.stateAt = now
	case *protocol.Hydrate:
		f.hydrate(v)
	case *protocol.Transcript:
		f.addTranscript(v.Agent, tline{role: v.Role, stream: v.Stream, kind: v.Kind}, v.Text)
	case *protocol.ToolCall:
		f.feed.push(toolEntry(v))
	case *protocol.FileChange:
		for i, c := range v.Changes {
			if i == maxFilesPerMsg {
				f.feed.push(feedEntry{kind: feedFiles, ts: v.Ts, icon: "✎", what: plural(len(v.Changes)-i, "more file change")})
				break
			}
			ts := c.Ts
			if ts == 0 {
				ts = v.Ts
			}
			f.feed.push(feedEntry{kind: feedFiles, ts: ts, icon: "✎", who: clip(oneLine(c.Agent)),
				what: clip(oneLine(string(c.ChangeType)) + " " + oneLine(c.Path))})
		}
	case *protocol.HubEvent:
		f.feed.push(hubEntry(v))
	case *protocol.Error:
		// error frames carry no time: stamp them on arrival.
		f.feed.push(feedEntry{kind: feedErrors, isErr: true, ts: now.UnixMilli(), icon: "!", who: "error", what: clip(oneLine(v.Message))})
	case *protocol.ConfirmResolved:
		f.resolved(v, ch.Resolved, replay)
	case *protocol.NativeRootResult:
		f.native.result(v)
	}
	// Other frames (pong, replayEnd, unknown types) change nothing here but
	// the frame time: the requests a replayEnd drops, resolved while the
	// console was away (ch.Gone), leave without a notice.
	return ch
}

// asPointer turns a message passed by value into its pointer form, the form
// protocol.Decode returns.
func asPointer(msg protocol.Message) protocol.Message {
	switch v := msg.(type) {
	case protocol.Welcome:
		return &v
	case protocol.UserMessage:
		return &v
	case protocol.Reply:
		return &v
	case protocol.Status:
		return &v
	case protocol.FleetState:
		return &v
	case protocol.FleetAnalytics:
		return &v
	case protocol.CommandCatalog:
		return &v
	case protocol.FleetIntel:
		return &v
	case protocol.FleetEvolution:
		return &v
	case protocol.FleetStore:
		return &v
	case protocol.FleetExperiment:
		return &v
	case protocol.Hydrate:
		return &v
	case protocol.Transcript:
		return &v
	case protocol.ToolCall:
		return &v
	case protocol.FileChange:
		return &v
	case protocol.HubEvent:
		return &v
	case protocol.Error:
		return &v
	case protocol.ConfirmRequest:
		return &v
	case protocol.AskRequest:
		return &v
	case protocol.ConfirmResolved:
		return &v
	case protocol.NativeRootResult:
		return &v
	}
	return msg
}

func (f *fleet) addConv(e convEntry) {
	e.lines = textLines(e.text)
	if len(e.lines) > maxEntryLines {
		more := len(e.lines) - maxEntryLines
		e.lines = append(e.lines[:maxEntryLines:maxEntryLines], "… "+plural(more, "more line"))
	}
	for i, l := range e.lines {
		e.lines[i] = clipBytes(l, maxConvLineText)
	}
	e.text = ""
	n := entrySize(e)
	for f.conv.len() > 0 && f.convBytes+n > maxConvBytes {
		f.convBytes -= entrySize(f.conv.shift())
	}
	if old, ok := f.conv.push(e); ok {
		f.convBytes -= entrySize(old)
	}
	f.convBytes += n
}

func entrySize(e convEntry) int {
	n := len(e.who) + 16
	for _, l := range e.lines {
		n += len(l) + 16
	}
	return n
}

func (f *fleet) addTranscript(agent string, proto tline, text string) {
	if agent == "" {
		agent = "coordinator"
	}
	lg := f.logs[agent]
	if lg == nil {
		if len(f.logs) >= maxWorkerLogs {
			f.evictLog()
		}
		lg = &workerLog{lines: newRing[tline](maxTranscript)}
		f.logs[agent] = lg
	}
	f.logTick++
	lg.used = f.logTick
	for _, l := range textLines(text) {
		t := proto
		t.text = clipBytes(l, maxLineBytes)
		lg.lines.push(t)
	}
}

func (f *fleet) evictLog() {
	oldest, key := int64(-1), ""
	for k, lg := range f.logs {
		if oldest < 0 || lg.used < oldest {
			oldest, key = lg.used, k
		}
	}
	delete(f.logs, key)
}

// hydrate replaces the history buffers with the attach-time backfill, so a
// re-attach shows history once.
func (f *fleet) hydrate(h *protocol.Hydrate) {
	f.conv.reset()
	f.convBytes = 0
	for _, c := range h.Conversation {
		who := string(c.Role)
		if c.Role == protocol.RoleAssistant {
			who = "fleet"
		}
		f.addConv(convEntry{who: oneLine(who), role: c.Role, text: c.Text})
	}
	f.logs = map[string]*workerLog{}
	for _, t := range h.Transcripts {
		f.addTranscript(t.Agent, tline{role: t.Role}, t.Text)
	}
	f.feed.filter(func(e feedEntry) bool { return e.kind != feedHub })
	for i := range h.Hub {
		f.feed.push(hubEntry(&h.Hub[i]))
	}
}

func toolEntry(v *protocol.ToolCall) feedEntry {
	who := oneLine(v.AgentName)
	if who == "" {
		who = oneLine(v.Agent)
	}
	e := feedEntry{kind: feedTools, ts: v.Ts, who: clip(who)}
	tool := oneLine(v.Tool)
	if v.Phase == protocol.PhaseStart {
		e.icon = "▶"
		e.what = tool
		if d := firstLine(v.Detail); d != "" {
			e.what += ": " + d
		}
	} else {
		e.isErr = v.IsError != nil && *v.IsError
		e.icon = "✓"
		e.what = tool
		if e.isErr {
			e.icon = "✗"
			if r := lastLine(v.Result); r != "" {
				e.what += ": " + r
			} else {
				e.what += " failed"
			}
		}
		if d := v.DurationMs; d != nil && e.isErr {
			e.what += " (" + fmtDur(time.Duration(*d)*time.Millisecond) + ")"
		} else if d != nil {
			e.what += " " + fmtDur(time.Duration(*d)*time.Millisecond)
		}
	}
	e.what = clip(e.what)
	return e
}

func hubEntry(v *protocol.HubEvent) feedEntry {
	what := oneLine(v.Kind)
	if v.To != "" {
		what += " → " + oneLine(v.To)
	}
	if t := firstLine(v.Text); t != "" {
		what += ": " + t
	}
	return feedEntry{kind: feedHub, ts: v.Ts, icon: "•", who: clip(oneLine(v.From)), what: clip(what),
		isErr: v.Kind == protocol.HubFailed}
}

// resolved notes the end of request v.ID; r is the pending request it
// ended, nil when it was not pending. One the operator did not answer from
// here gets a dismissal notice, unless it ended in the replay.
func (f *fleet) resolved(v *protocol.ConfirmResolved, r *client.Request, replay bool) {
	mine := f.answered.remove(v.ID)
	answering := f.answering[v.ID]
	delete(f.answering, v.ID)
	if r != nil && !mine && !replay && answering == "" {
		f.dismissed.push(dismissal{id: oneLine(r.ID()), text: oneLine(r.Text()), reason: dismissReason(v.Reason)})
	}
}

func dismissReason(r protocol.ResolvedReason) string {
	switch r {
	case "", protocol.ReasonAnswered, protocol.ReasonSuperseded:
		return "answered elsewhere"
	case protocol.ReasonExpired:
		return "expired"
	case protocol.ReasonCancelled:
		return "cancelled"
	}
	return oneLine(string(r))
}
