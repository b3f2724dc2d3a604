package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/client"
	fleetd "github.com/agents-fleet/fleet/daemon"
	"github.com/agents-fleet/fleet/e2e/e2etest"
	"github.com/agents-fleet/fleet/history"
	"github.com/agents-fleet/fleet/internal/modelmock"
	"github.com/agents-fleet/fleet/protocol"
	"github.com/agents-fleet/fleet/store"
)

// Issue 21, points 2 and 3: no input bricks a session, every console
// reads every fleet.

// worstShellCommand is a command whose prompt ("$ " + it) is as long as a
// prompt may be once JSON-encoded, made of the characters escaping grows
// the most, inside single quotes so that the shell runs it: it prints
// "start" and then word. plus adds that many quotes (2 bytes each
// encoded) past the limit.
func worstShellCommand(word string, plus int) string {
	head, tail := "echo start; : '", "'; echo "+word
	pieces := []string{`"`, `\`, "\x00", "\x01", "\x1f", "\u2028", "\u2029", "\xff", "é", "中", "🚀", "<&>"}
	room := protocol.MaxPromptText - protocol.EncodedLen("$ "+head+tail)
	var b strings.Builder
	for i, n := 0, 0; ; i++ {
		p := pieces[i%len(pieces)]
		if n+protocol.EncodedLen(p) > room {
			break
		}
		b.WriteString(p)
		n += protocol.EncodedLen(p)
	}
	b.WriteString(strings.Repeat(`"`, plus))
	return head + b.String() + tail
}

// strictStream reads a connection and fails the test at the first frame
// that is not whole: over the frame cap, malformed, or with entries the
// client had to leave out.
type strictStream struct {
	t      *testing.T
	frames chan protocol.Message
	errc   chan error
}

func watchStrict(t *testing.T, c *client.Conn) *strictStream {
	s := &strictStream{t: t, frames: make(chan protocol.Message, 100000), errc: make(chan error, 1)}
	go func() {
		for {
			m, _, _, err := c.Next()
			if err == nil && c.Skipped() > 0 {
				err = fmt.Errorf("%d entries of a %s frame do not match the protocol", c.Skipped(), m.MessageType())
			}
			if err != nil {
				s.errc <- err
				return
			}
			s.frames <- m
		}
	}()
	return s
}

func (s *strictStream) waitFor(what string, pred func(protocol.Message) bool) protocol.Message {
	s.t.Helper()
	timeout := time.After(3 * time.Minute)
	for {
		select {
		case m := <-s.frames:
			if pred(m) {
				return m
			}
		case err := <-s.errc:
			s.t.Fatalf("waiting for %s: %v", what, err)
		case <-timeout:
			s.t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// replayStrict attaches a Go client and reads its replay whole (see
// strictStream), returning the hydrate.
func replayStrict(t *testing.T, d *e2etest.Daemon) *protocol.Hydrate {
	t.Helper()
	c := d.Dial(protocol.ClientOther, "late")
	defer c.Close()
	s := watchStrict(t, c)
	var hy *protocol.Hydrate
	s.waitFor("replayEnd", func(m protocol.Message) bool {
		if h, ok := m.(*protocol.Hydrate); ok {
			hy = h
		}
		return m.MessageType() == protocol.TypeReplayEnd
	})
	if hy == nil {
		t.Fatal("no hydrate in the replay")
	}
	return hy
}

// attachBinary runs `fleet attach` to the end of its replay (stdin is
// empty: it detaches then) and checks it read the fleet whole.
func attachBinary(t *testing.T, e *e2etest.Env, fleet string) string {
	t.Helper()
	out, stderr, code := e.Fleet("", "attach", fleet)
	if code != 0 || strings.Contains(out+stderr, "malformed") || strings.Contains(out+stderr, "over 1048576") ||
		strings.Contains(out+stderr, "skipped") {
		t.Fatalf("fleet attach: exit %d\nstdout:\n%.2000s\nstderr:\n%s", code, out, stderr)
	}
	return out
}

func marked(s string) bool { return strings.Contains(s, "… [truncated ") }

// TestPromptAtTheLimitThenEveryConsoleAttaches: a `$ ` prompt at the
// limit, of the worst characters, is accepted by `fleet send`, runs
// (its command is far longer than an argument may be), and afterwards a
// Go client, `fleet attach` and, after `fleet run --resume`, all of them
// again and the TUI attach and read the history, its long texts cut and
// marked. One quote more is refused by `fleet send` with the reason.
func TestPromptAtTheLimitThenEveryConsoleAttaches(t *testing.T) {
	e := e2etest.NewEnv(t)
	d := e.Start("--control-socket", "--name", "worst")
	w := d.Dial(protocol.ClientOther, "watcher")
	session := w.Welcome().SessionID
	s := watchStrict(t, w)
	s.waitFor("replayEnd", e2etest.IsType(protocol.TypeReplayEnd))

	_, stderr, code := e.Fleet("$ "+worstShellCommand("never-run", 1), "send", "-")
	if code == 0 || !strings.Contains(stderr, fmt.Sprintf("over the limit of %d bytes", protocol.MaxPromptText)) {
		t.Fatalf("fleet send over the limit: exit %d, %s", code, stderr)
	}
	if _, stderr, code := e.Fleet("$ "+worstShellCommand("the-end", 0), "send", "-"); code != 0 {
		t.Fatalf("fleet send at the limit: exit %d, %s", code, stderr)
	}
	s.waitFor("the command's last line", func(m protocol.Message) bool {
		tr, ok := m.(*protocol.Transcript)
		return ok && tr.Text == "the-end"
	})
	s.waitFor("t1 done", func(m protocol.Message) bool {
		h, ok := m.(*protocol.HubEvent)
		return ok && h.Kind == "task.updated" && h.Text == "t1 done"
	})

	check := func(hy *protocol.Hydrate) {
		t.Helper()
		var prompt string
		for _, c := range hy.Conversation {
			if c.Role == protocol.RoleUser {
				prompt = c.Text
			}
		}
		if !strings.HasPrefix(prompt, "$ echo start; : '") || !marked(prompt) || protocol.EncodedLen(prompt) > history.MaxEntryText {
			t.Fatalf("the prompt in hydrate: %d bytes, %.40q", len(prompt), prompt)
		}
	}
	check(replayStrict(t, d))
	if out := attachBinary(t, e, "worst"); !strings.Contains(out, "… [truncated ") {
		t.Fatalf("fleet attach does not show the cut prompt:\n%.2000s", out)
	}
	d.Stop()

	d2 := e.Start("--control-socket", "--resume", session)
	check(replayStrict(t, d2))
	attachBinary(t, e, "worst")

	// The TUI attaches and shows the conversation.
	c := startConsole(t, e, 110, 32, "worst")
	c.waitText("fleet worst")
	c.keys("6")
	c.waitText("[truncated ")
	if scr := c.screen(); strings.Contains(scr, "RECONNECTING") || strings.Contains(scr, "CONNECTING") {
		t.Fatalf("the console is not attached:\n%s", scr)
	}
	d2.Stop()
}

// TestSessionSavedByAnEarlierBuildResumes: a session file holding the rows
// an earlier build saved for a 1,000,000-byte prompt (no limit then: the
// prompt, its task, the hub events, a system line without agent, all far
// over a frame once escaped) is resumed with `fleet run --resume`, and
// every console attaches and reads it, its texts cut and marked.
func TestSessionSavedByAnEarlierBuildResumes(t *testing.T) {
	e := e2etest.NewEnv(t)
	d := e.Start("--control-socket", "--name", "old")
	session := d.Dial(protocol.ClientOther, "probe").Welcome().SessionID
	d.Stop()

	huge := strings.Repeat("\"\\\x01", 1_000_000/3)
	st, err := fleetd.OpenStore(e.Home)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMilli()
	recs := []store.Record{
		{Conversation: &history.ConversationEntry{Role: protocol.RoleUser, Source: "attach@host", Text: "$ : " + huge, Ts: now}},
		{Task: &history.Task{ID: "t1", Command: ": " + huge, Status: "failed", Worker: "w1",
			Reason: "start sh: fork/exec /usr/bin/sh: argument list too long", CreatedAt: now, UpdatedAt: now}},
		{Counter: &history.Counter{Name: "task", Value: 1}},
		{Hub: &history.HubEvent{From: "coordinator", Kind: "task.created", Text: "t1: : " + huge, Ts: now}},
		{Hub: &history.HubEvent{From: "w1", Kind: "spawned", Text: "t1: : " + huge, Ts: now}},
		{Transcript: &history.TranscriptLine{Role: protocol.RoleSystem, Text: "coordinator-level " + huge, Ts: now}},
		{Transcript: &history.TranscriptLine{Role: protocol.RoleTool, Agent: "w1", Text: "worker line " + huge, Ts: now}},
		{Conversation: &history.ConversationEntry{Role: protocol.RoleAssistant, Text: "Queued t1: : " + huge, Ts: now}},
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := st.Append(ctx, session, recs); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	d2 := e.Start("--control-socket", "--resume", session)
	hy := replayStrict(t, d2)
	var prompt string
	for _, c := range hy.Conversation {
		if c.Role == protocol.RoleUser {
			prompt = c.Text
		}
	}
	var coordinator, worker string
	for _, l := range hy.Transcripts {
		switch {
		case strings.HasPrefix(l.Text, "coordinator-level"):
			coordinator = l.Agent
		case strings.HasPrefix(l.Text, "worker line"):
			worker = l.Agent
			if !marked(l.Text) {
				t.Fatal("the worker line is not cut")
			}
		}
	}
	if !marked(prompt) || coordinator != history.CoordinatorAgent || worker != "w1" {
		t.Fatalf("prompt %.40q, coordinator line under %q, worker line under %q", prompt, coordinator, worker)
	}
	for _, h := range hy.Hub {
		if strings.HasPrefix(h.Text, "t1: ") && !marked(h.Text) {
			t.Fatalf("hub %s not cut", h.Kind)
		}
	}
	out := attachBinary(t, e, "old")
	if !strings.Contains(out, "… [truncated ") {
		t.Fatalf("fleet attach:\n%.2000s", out)
	}
	// The restored task's command is listed cut too.
	c := d2.Dial(protocol.ClientOther, "op")
	s := watchStrict(t, c)
	s.waitFor("replayEnd", e2etest.IsType(protocol.TypeReplayEnd))
	if err := c.Send(&protocol.Prompt{Text: "/tasks"}); err != nil {
		t.Fatal(err)
	}
	r := s.waitFor("/tasks", func(m protocol.Message) bool {
		r, ok := m.(*protocol.Reply)
		return ok && strings.Contains(r.Text, "t1")
	}).(*protocol.Reply)
	if !marked(r.Text) || len(r.Text) > 4096 {
		t.Fatalf("/tasks: %d bytes", len(r.Text))
	}
	d2.Stop()
}

// TestClaudeCoordinatorLinesReplayForEveryConsole: the coordinator's text
// before a tool call is a transcript line of its own (no agent, live); in
// hydrate it is filed under "coordinator", so `fleet attach` and a strict
// Go client read the history, before and after `fleet run --resume`.
func TestClaudeCoordinatorLinesReplayForEveryConsole(t *testing.T) {
	script := modelmock.Script{Rules: []modelmock.Rule{{Name: "coordinator", Match: "what is queued", Turns: []modelmock.Turn{
		{Text: "Let me look at the tasks.", Usage: modelmock.Usage{Input: 30, Output: 5},
			ToolCalls: []modelmock.ToolCall{{Name: "mcp__fleet__list_tasks", Input: map[string]any{}}}},
		{Text: "Nothing is queued.", Usage: modelmock.Usage{Input: 40, Output: 4}},
	}}}}
	ae := e2etest.NewAgentEnv(t, "claude", script)
	d := ae.Start("--control-socket", "--provider", "claude", "--name", "agents")
	c := d.Dial(protocol.ClientOther, "op")
	session := c.Welcome().SessionID
	s := watchStrict(t, c)
	s.waitFor("replayEnd", e2etest.IsType(protocol.TypeReplayEnd))
	if err := c.Send(&protocol.Prompt{Text: "what is queued?"}); err != nil {
		t.Fatal(err)
	}
	s.waitFor("the coordinator's line", func(m protocol.Message) bool {
		tr, ok := m.(*protocol.Transcript)
		return ok && tr.Text == "Let me look at the tasks." && tr.Agent == ""
	})
	s.waitFor("the reply", func(m protocol.Message) bool {
		r, ok := m.(*protocol.Reply)
		return ok && r.Text == "Nothing is queued."
	})
	check := func(d *e2etest.Daemon) {
		t.Helper()
		found := false
		for _, l := range replayStrict(t, d).Transcripts {
			if l.Text == "Let me look at the tasks." {
				found = l.Agent == history.CoordinatorAgent
			}
		}
		if !found {
			t.Fatal("the coordinator's line is not in hydrate under \"coordinator\"")
		}
		if out := attachBinary(t, ae.Env, "agents"); !strings.Contains(out, "Nothing is queued.") {
			t.Fatalf("fleet attach:\n%s", out)
		}
	}
	check(d)
	d.Stop()
	d2 := ae.Start("--control-socket", "--provider", "claude", "--resume", session)
	check(d2)
	d2.Stop()
}
