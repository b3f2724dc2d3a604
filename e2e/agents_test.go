package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/e2e/e2etest"
	"github.com/agents-fleet/fleet/internal/modelmock"
	"github.com/agents-fleet/fleet/internal/testwait"
	"github.com/agents-fleet/fleet/protocol"
)

// coordinatorScript: the coordinator spawns two workers through the
// fleet's MCP tool; worker A writes a file with Write, worker B runs a
// shell command that needs the operator's permission.
func coordinatorScript() modelmock.Script {
	u := func(in, out int64) modelmock.Usage { return modelmock.Usage{Input: in, Output: out} }
	return modelmock.Script{Rules: []modelmock.Rule{
		{Name: "coordinator", Match: "Add a greeting and a farewell", Turns: []modelmock.Turn{
			{Text: "I'll split this in two.", Usage: u(300, 30), ToolCalls: []modelmock.ToolCall{{Name: "mcp__fleet__spawn_worker", Input: map[string]any{"task": "worker-a: create hello.txt saying hello"}}}},
			{Usage: u(320, 25), ToolCalls: []modelmock.ToolCall{{Name: "mcp__fleet__spawn_worker", Input: map[string]any{"task": "worker-b: create bye.txt saying bye"}}}},
			{Text: "Two workers are on it.", Usage: u(340, 20)},
		}},
		{Name: "a", Match: "worker-a:", Turns: []modelmock.Turn{
			{Usage: u(200, 15), ToolCalls: []modelmock.ToolCall{{Name: "Write", Input: map[string]any{"file_path": "hello.txt", "content": "hello\n"}}}},
			{Text: "Wrote hello.txt.", Usage: u(210, 5)},
		}},
		{Name: "b", Match: "worker-b:", Turns: []modelmock.Turn{
			{Usage: u(200, 15), ToolCalls: []modelmock.ToolCall{{Name: "Bash", Input: map[string]any{"command": "echo bye > bye.txt", "description": "write bye.txt"}}}},
			{Text: "Finished with bye.txt.", Usage: u(210, 5)},
		}},
		{Name: "direct", Match: "direct:", Turns: []modelmock.Turn{
			{Text: "Direct work done.", Usage: u(50, 5)},
		}},
		{Name: "follow-up", Match: "follow-up:", Turns: []modelmock.Turn{
			{Text: "Followed up.", Usage: u(70, 7)},
		}},
		{Name: "tell-write", Match: "tell-write:", Turns: []modelmock.Turn{
			{Usage: u(20, 2), ToolCalls: []modelmock.ToolCall{{Name: "Write", Input: map[string]any{"file_path": "later.txt", "content": "later\n"}}}},
			{Text: "Added later.txt.", Usage: u(30, 3)},
		}},
		{Name: "hang", Match: "hang:", Turns: []modelmock.Turn{{Hang: true}}},
		{Name: "fail", Match: "fail:", Turns: []modelmock.Turn{{Status: 500, ErrorMessage: "the scripted endpoint is down"}}},
		{Name: "slow", Match: "slow:", Turns: []modelmock.Turn{
			{Usage: u(10, 1), ToolCalls: []modelmock.ToolCall{{Name: "Bash", Input: map[string]any{"command": "sleep 300", "description": "wait"}}}},
			{Text: "slept"},
		}},
	}}
}

// The scenario with the real Claude Code CLI: a prompt to the
// coordinator spawns two workers; a second console answers each
// permission prompt (allow, then deny in another run).
func TestClaudeCoordinatorSpawnsWorkersAndRelaysPermissions(t *testing.T) {
	for _, allow := range []bool{true, false} {
		name := "deny"
		if allow {
			name = "allow"
		}
		t.Run(name, func(t *testing.T) {
			ae := e2etest.NewAgentEnv(t, "claude", coordinatorScript())
			d := ae.Start("--control-socket", "--provider", "claude", "--workers", "2")
			watcher := e2etest.Watch(t, d.Dial(protocol.ClientOther, "watcher"))
			answerer := d.Dial(protocol.ClientOther, "answerer")
			watcher.WaitFor("replayEnd", e2etest.IsType(protocol.TypeReplayEnd))
			if err := answerer.Send(&protocol.Prompt{Text: "Add a greeting and a farewell to the repo"}); err != nil {
				t.Fatal(err)
			}
			// The coordinator's text before its last is a transcript line;
			// its last is the reply, said once.
			var said []string
			reply := watcher.WaitLong("the coordinator's reply", func(m protocol.Message) bool {
				if tr, ok := m.(*protocol.Transcript); ok && tr.Agent == "" && tr.Role == protocol.RoleAssistant {
					said = append(said, tr.Text)
				}
				return m.MessageType() == protocol.TypeReply
			}).(*protocol.Reply)
			if reply.Text != "Two workers are on it." || !slices.Equal(said, []string{"I'll split this in two."}) {
				t.Fatalf("reply %q after coordinator lines %q", reply.Text, said)
			}
			// Worker B's Bash call needs permission: the summary names
			// the worker, the tool and the command.
			var bash *protocol.AskRequest
			var write *protocol.AskRequest
			for bash == nil || write == nil {
				a := watcher.WaitLong("permission prompts", e2etest.IsType(protocol.TypeAskRequest)).(*protocol.AskRequest)
				switch {
				case strings.Contains(a.Question, "Bash") && strings.Contains(a.Question, "echo bye > bye.txt"):
					bash = a
				case strings.Contains(a.Question, "Write") && strings.Contains(a.Question, "hello.txt"):
					write = a
				default:
					t.Fatalf("unexpected request %q", a.Question)
				}
			}
			answer := "deny"
			if allow {
				answer = "allow"
			}
			if err := answerer.Send(&protocol.AskResponse{ID: write.ID, Text: "allow"}); err != nil {
				t.Fatal(err)
			}
			if err := answerer.Send(&protocol.AskResponse{ID: bash.ID, Text: answer}); err != nil {
				t.Fatal(err)
			}
			resolved := map[string]bool{}
			changes := map[string]protocol.FileChangeEntry{} // by path
			var bashDone *protocol.ToolCall
			sawText := false
			settled := map[string]string{}
			// One bound for all of it: the fleet sends frames all along, so
			// a bound per frame would never end a test that went wrong.
			deadline := time.Now().Add(3 * time.Minute)
			for len(resolved) < 2 || bashDone == nil || !sawText || len(settled) < 2 {
				m := watcher.WaitWithin(time.Until(deadline), "the workers to settle (3 minutes in all)", func(protocol.Message) bool { return true })
				switch m := m.(type) {
				case *protocol.ConfirmResolved:
					resolved[m.ID] = true
				case *protocol.FileChange:
					for _, c := range m.Changes {
						changes[c.Path] = c
					}
				case *protocol.ToolCall:
					if m.Tool == "Bash" && m.Phase == protocol.PhaseComplete {
						bashDone = m
					}
				case *protocol.Transcript:
					if m.Role == protocol.RoleAssistant && m.Agent != "" && m.Text == "Wrote hello.txt." {
						sawText = true
					}
				case *protocol.HubEvent:
					if m.Kind == protocol.HubCompleted || m.Kind == protocol.HubFailed {
						settled[m.From] = m.Kind
					}
				}
			}
			// The fileChanges of a worker come before its settlement.
			if c, ok := changes["hello.txt"]; !ok || c.Tool != "Write" || c.ChangeType != protocol.ChangeCreated {
				t.Fatalf("fileChanges %+v", changes)
			}
			if c, ok := changes["bye.txt"]; allow != ok || (ok && c.Tool != "Bash") {
				t.Fatalf("fileChanges after %s: %+v", answer, changes)
			}
			if bashDone.ToolCallID == "" {
				t.Fatalf("toolCall without the CLI's id: %+v", bashDone)
			}
			// The worktree of the Bash worker has the file only if allowed.
			wt := filepath.Join(ae.Home, "worktrees")
			matches, _ := filepath.Glob(filepath.Join(wt, "*", "*", "bye.txt"))
			if allow != (len(matches) == 1) {
				t.Fatalf("bye.txt after %s: %v", answer, matches)
			}
			fs := watcher.WaitLong("token counts", func(m protocol.Message) bool {
				fs, ok := m.(*protocol.FleetState)
				return ok && fs.WorkerStatusCounts != nil && fs.WorkerStatusCounts.Completed == 2 && !fs.Coordinator.IsProcessing
			}).(*protocol.FleetState)
			// Exactly what the endpoint reported: coordinator 960/75, each
			// worker 410/20.
			if *fs.Tokens.InputTokens != 960+410+410 || *fs.Tokens.OutputTokens != 75+20+20 {
				t.Fatalf("session tokens %d/%d", *fs.Tokens.InputTokens, *fs.Tokens.OutputTokens)
			}
			for _, w := range fs.Workers {
				if w.AgentType != "claude" || *w.InputTokens != 410 || *w.OutputTokens != 20 || w.Status != "completed" {
					t.Fatalf("worker %+v", w)
				}
			}
			d.Stop()
		})
	}
}

// /spawn starts a worker without the coordinator; /tell gives a settled
// worker another turn in the same CLI session; /cancel mid-tool leaves no
// process behind.
func TestClaudeSpawnTellCancel(t *testing.T) {
	ae := e2etest.NewAgentEnv(t, "claude", coordinatorScript())
	d := ae.Start("--control-socket", "--provider", "claude")
	s := e2etest.Watch(t, d.Dial(protocol.ClientOther, "w"))
	c := d.Dial(protocol.ClientOther, "op")
	session := c.Welcome().SessionID
	s.WaitFor("replayEnd", e2etest.IsType(protocol.TypeReplayEnd))
	c.Send(&protocol.Prompt{Text: "/spawn direct: do it"})
	s.WaitLong("the direct worker's text", func(m protocol.Message) bool {
		tr, ok := m.(*protocol.Transcript)
		return ok && tr.Agent == "w1" && tr.Text == "Direct work done."
	})
	s.WaitLong("w1 settles", func(m protocol.Message) bool {
		h, ok := m.(*protocol.HubEvent)
		return ok && h.From == "w1" && h.Kind == protocol.HubCompleted
	})
	c.Send(&protocol.Prompt{Text: "/tell w1 follow-up: and this"})
	s.WaitLong("the follow-up's text", func(m protocol.Message) bool {
		tr, ok := m.(*protocol.Transcript)
		return ok && tr.Agent == "w1" && tr.Text == "Followed up."
	})
	// The follow-up continued the same conversation: its request carries
	// the first turn's text.
	resumed := false
	for _, r := range ae.Mock.Requests() {
		if r.Rule == "follow-up" && strings.Contains(string(r.Body), "Direct work done.") {
			resumed = true
		}
	}
	if !resumed {
		t.Fatal("the /tell turn did not carry the worker's earlier conversation")
	}
	// A follow-up's edits are reported like the first turn's.
	c.Send(&protocol.Prompt{Text: "/tell w1 tell-write: add later.txt"})
	ask := s.WaitLong("the follow-up's permission", e2etest.IsType(protocol.TypeAskRequest)).(*protocol.AskRequest)
	c.Send(&protocol.AskResponse{ID: ask.ID, Text: "allow"})
	fc := s.WaitLong("the follow-up's fileChange", e2etest.IsType(protocol.TypeFileChange)).(*protocol.FileChange)
	if len(fc.Changes) != 1 || fc.Changes[0].Path != "later.txt" || fc.Changes[0].Agent != "w1" || fc.Changes[0].Tool != "Write" {
		t.Fatalf("follow-up fileChange %+v", fc.Changes)
	}

	c.Send(&protocol.Prompt{Text: "/spawn slow: wait"})
	// Claude may or may not ask before `sleep`; answer if it does.
	deadline := time.Now().Add(3 * time.Minute)
	for len(sleepers(session)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the agent's sleep never started")
		}
		select {
		case f := <-s.Frames:
			if a, ok := f.Msg.(*protocol.AskRequest); ok {
				c.Send(&protocol.AskResponse{ID: a.ID, Text: "allow"})
			}
		case <-time.After(50 * time.Millisecond):
		}
	}
	c.Send(&protocol.Prompt{Text: "/cancel w2"})
	s.WaitLong("w2 fails as cancelled", func(m protocol.Message) bool {
		h, ok := m.(*protocol.HubEvent)
		return ok && h.From == "w2" && h.Kind == protocol.HubFailed && strings.Contains(h.Text, "cancelled")
	})
	if left := e2etest.MarkedProcesses(session); len(left) > 0 {
		t.Fatalf("processes left after the cancel: %v", left)
	}
	d.Stop()
}

// sleepers are the session's processes running `sleep 300`.
func sleepers(session string) []int {
	var out []int
	for _, pid := range e2etest.MarkedProcesses(session) {
		b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		if strings.Contains(string(b), "sleep\x00300") {
			out = append(out, pid)
		}
	}
	return out
}

// A model endpoint that never answers, with stall healing off
// (limits.stallRetries 0): the worker shows as stale and then
// fails, after limits.agentStallTimeoutMs, with a reason that says so; an
// endpoint answering 500 fails the worker in bounded time with the CLI's
// own error text. The fleet keeps serving.
func TestClaudeStallAndEndpointErrorFailWorkers(t *testing.T) {
	ae := e2etest.NewAgentEnv(t, "claude", coordinatorScript(), map[string]any{"agentStallTimeoutMs": 6000, "stallRetries": 0})
	d := ae.Start("--control-socket", "--provider", "claude")
	s := e2etest.Watch(t, d.Dial(protocol.ClientOther, "w"))
	c := d.Dial(protocol.ClientOther, "op")
	s.WaitFor("replayEnd", e2etest.IsType(protocol.TypeReplayEnd))
	c.Send(&protocol.Prompt{Text: "/spawn hang: wait forever"})
	c.Send(&protocol.Prompt{Text: "/spawn fail: try"})
	failed := map[string]string{}
	for len(failed) < 2 {
		h := s.WaitLong("both workers fail", func(m protocol.Message) bool {
			h, ok := m.(*protocol.HubEvent)
			return ok && h.Kind == protocol.HubFailed
		}).(*protocol.HubEvent)
		failed[h.From] = h.Text
	}
	if !strings.Contains(failed["w1"], "stalled") || !strings.Contains(failed["w1"], "agentStallTimeoutMs") {
		t.Fatalf("hanging endpoint: %q", failed["w1"])
	}
	if !strings.Contains(failed["w2"], "500") {
		t.Fatalf("failing endpoint: %q", failed["w2"])
	}
	c.Send(&protocol.Prompt{Text: "/spawn direct: still serving?"})
	s.WaitLong("a later worker still works", func(m protocol.Message) bool {
		tr, ok := m.(*protocol.Transcript)
		return ok && tr.Text == "Direct work done."
	})
	d.Stop()
}

// Eight Claude Code workers at once, each with its own turn: every one
// completes with its own text and tokens, and the fleet answers a ping
// meanwhile.
func TestClaudeEightWorkersAtOnce(t *testing.T) {
	ae := e2etest.NewAgentEnv(t, "claude", coordinatorScript())
	d := ae.Start("--control-socket", "--provider", "claude", "--workers", "8")
	s := e2etest.Watch(t, d.Dial(protocol.ClientOther, "w"))
	c := d.Dial(protocol.ClientOther, "op")
	s.WaitFor("replayEnd", e2etest.IsType(protocol.TypeReplayEnd))
	for i := range 8 {
		c.Send(&protocol.Prompt{Text: "/spawn direct: job " + strconv.Itoa(i)})
	}
	done := map[string]bool{}
	for len(done) < 8 {
		h := s.WaitLong("eight workers settle", func(m protocol.Message) bool {
			h, ok := m.(*protocol.HubEvent)
			return ok && (h.Kind == protocol.HubCompleted || h.Kind == protocol.HubFailed)
		}).(*protocol.HubEvent)
		if h.Kind != protocol.HubCompleted {
			t.Fatalf("%s: %s", h.From, h.Text)
		}
		done[h.From] = true
	}
	fs := s.WaitLong("their tokens", func(m protocol.Message) bool {
		fs, ok := m.(*protocol.FleetState)
		return ok && fs.WorkerStatusCounts != nil && fs.WorkerStatusCounts.Completed == 8
	}).(*protocol.FleetState)
	if *fs.Tokens.InputTokens != 8*50 || *fs.Tokens.OutputTokens != 8*5 {
		t.Fatalf("tokens %d/%d, want %d/%d", *fs.Tokens.InputTokens, *fs.Tokens.OutputTokens, 8*50, 8*5)
	}
	d.Stop()
}

// kill -9 of the daemon while a worker's command runs, then
// `fleet run --resume`: the leftover processes are stopped, and the
// coordinator continues its conversation in the same CLI session.
func TestClaudeKill9ThenResumeContinuesTheCoordinator(t *testing.T) {
	script := coordinatorScript()
	script.Rules = append([]modelmock.Rule{
		{Name: "first", Match: "remember the word banana", Turns: []modelmock.Turn{{Text: "Noted: banana.", Usage: modelmock.Usage{Input: 40, Output: 4}}}},
		{Name: "second", Match: "which word", Turns: []modelmock.Turn{{Text: "banana", Usage: modelmock.Usage{Input: 60, Output: 1}}}},
	}, script.Rules...)
	ae := e2etest.NewAgentEnv(t, "claude", script)
	d := ae.Start("--control-socket", "--provider", "claude")
	s := e2etest.Watch(t, d.Dial(protocol.ClientOther, "w"))
	c := d.Dial(protocol.ClientOther, "op")
	session := c.Welcome().SessionID
	s.WaitFor("replayEnd", e2etest.IsType(protocol.TypeReplayEnd))
	c.Send(&protocol.Prompt{Text: "remember the word banana"})
	if r := s.WaitLong("the first reply", e2etest.IsType(protocol.TypeReply)).(*protocol.Reply); r.Text != "Noted: banana." {
		t.Fatalf("reply %q", r.Text)
	}
	c.Send(&protocol.Prompt{Text: "/spawn slow: wait"})
	deadline := time.Now().Add(3 * time.Minute)
	for len(sleepers(session)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the agent's sleep never started")
		}
		select {
		case f := <-s.Frames:
			if a, ok := f.Msg.(*protocol.AskRequest); ok {
				c.Send(&protocol.AskResponse{ID: a.ID, Text: "allow"})
			}
		case <-time.After(50 * time.Millisecond):
		}
	}
	d.Cmd.Process.Kill()
	<-d.Done
	if len(e2etest.MarkedProcesses(session)) == 0 {
		t.Fatal("nothing of the killed fleet was left to stop (the test proves nothing)")
	}

	d2 := ae.Start("--control-socket", "--provider", "claude", "--resume", session)
	// The new fleet's own processes carry the session too, but it runs
	// none until a prompt arrives.
	if !testwait.Until(time.Minute, func() bool { return len(e2etest.MarkedProcesses(session)) == 0 }) {
		t.Fatalf("processes %v of the killed fleet still run after the resume", e2etest.MarkedProcesses(session))
	}
	s2 := e2etest.Watch(t, d2.Dial(protocol.ClientOther, "w2"))
	c2 := d2.Dial(protocol.ClientOther, "op2")
	s2.WaitFor("replayEnd", e2etest.IsType(protocol.TypeReplayEnd))
	c2.Send(&protocol.Prompt{Text: "which word did I ask you to remember?"})
	if r := s2.WaitLong("the resumed reply", e2etest.IsType(protocol.TypeReply)).(*protocol.Reply); r.Text != "banana" {
		t.Fatalf("reply %q", r.Text)
	}
	// The coordinator's request carries the first conversation.
	found := false
	for _, r := range ae.Mock.Requests() {
		if r.Rule == "second" && strings.Contains(string(r.Body), "Noted: banana.") {
			found = true
		}
	}
	if !found {
		t.Fatal("the resumed coordinator did not continue its CLI session")
	}
	// A worker of the killed run takes a follow-up in its own worktree.
	c2.Send(&protocol.Prompt{Text: "/tell w1 follow-up: after the crash"})
	s2.WaitLong("the restored worker's follow-up", func(m protocol.Message) bool {
		tr, ok := m.(*protocol.Transcript)
		return ok && tr.Agent == "w1" && tr.Text == "Followed up."
	})
	inWorktree := false
	for _, r := range ae.Mock.Requests() {
		if r.Rule == "follow-up" && strings.Contains(string(r.Body), filepath.Join("worktrees", session, "w1")) {
			inWorktree = true
		}
	}
	if !inWorktree {
		t.Fatal("the restored worker's follow-up did not run in its worktree")
	}
	d2.Stop()
}

// A permission prompt nobody answers expires after --request-ttl: the
// request resolves as expired for every console and the CLI is told no
// (the worker goes on without the command). An answer to a prompt whose
// worker was cancelled meanwhile gets an error frame, and the fleet goes on.
func TestClaudePermissionExpiresAndLateAnswersAreRefused(t *testing.T) {
	ae := e2etest.NewAgentEnv(t, "claude", coordinatorScript())
	d := ae.Start("--control-socket", "--provider", "claude", "--request-ttl", "2s")
	s := e2etest.Watch(t, d.Dial(protocol.ClientOther, "w"))
	c := d.Dial(protocol.ClientOther, "op")
	cs := e2etest.Watch(t, c) // errors go to the client that sent the frame
	s.WaitFor("replayEnd", e2etest.IsType(protocol.TypeReplayEnd))
	c.Send(&protocol.Prompt{Text: "/spawn worker-b: create bye.txt"})
	ask := s.WaitLong("the permission prompt", e2etest.IsType(protocol.TypeAskRequest)).(*protocol.AskRequest)
	res := s.WaitLong("its expiry", func(m protocol.Message) bool {
		r, ok := m.(*protocol.ConfirmResolved)
		return ok && r.ID == ask.ID
	}).(*protocol.ConfirmResolved)
	if res.Reason != protocol.ReasonExpired || res.Approved {
		t.Fatalf("resolved %+v", res)
	}
	done := s.WaitLong("the Bash call ends denied", func(m protocol.Message) bool {
		tc, ok := m.(*protocol.ToolCall)
		return ok && tc.Tool == "Bash" && tc.Phase == protocol.PhaseComplete
	}).(*protocol.ToolCall)
	if done.IsError == nil || !*done.IsError {
		t.Fatalf("an expired prompt let the command run: %+v", done)
	}
	s.WaitLong("w1 settles", func(m protocol.Message) bool {
		h, ok := m.(*protocol.HubEvent)
		return ok && h.From == "w1" && (h.Kind == protocol.HubCompleted || h.Kind == protocol.HubFailed)
	})

	c.Send(&protocol.Prompt{Text: "/spawn worker-b: create bye.txt"})
	ask2 := s.WaitLong("the second prompt", e2etest.IsType(protocol.TypeAskRequest)).(*protocol.AskRequest)
	c.Send(&protocol.Prompt{Text: "/cancel w2"})
	s.WaitLong("w2 cancelled", func(m protocol.Message) bool {
		h, ok := m.(*protocol.HubEvent)
		return ok && h.From == "w2" && h.Kind == protocol.HubFailed
	})
	c.Send(&protocol.AskResponse{ID: ask2.ID, Text: "allow"})
	e := cs.WaitLong("the late answer's error", e2etest.IsType(protocol.TypeError)).(*protocol.Error)
	if !strings.Contains(e.Message, "already resolved") {
		t.Fatalf("late answer: %+v", e)
	}
	if matches, _ := filepath.Glob(filepath.Join(ae.Home, "worktrees", "*", "*", "bye.txt")); len(matches) != 0 {
		t.Fatalf("a denied or cancelled command ran: %v", matches)
	}
	c.Send(&protocol.Prompt{Text: "/spawn direct: still there?"})
	s.WaitLong("the fleet goes on", func(m protocol.Message) bool {
		tr, ok := m.(*protocol.Transcript)
		return ok && tr.Text == "Direct work done."
	})
	d.Stop()
}

// codexScript is coordinatorScript's /spawn, /tell and cancel rules in
// Codex's tool names.
func codexScript() modelmock.Script {
	u := func(in, out int64) modelmock.Usage { return modelmock.Usage{Input: in, Output: out} }
	return modelmock.Script{Rules: []modelmock.Rule{
		{Name: "first", Match: "remember the word banana", Turns: []modelmock.Turn{{Text: "Noted: banana.", Usage: u(40, 4)}}},
		{Name: "second", Match: "which word", Turns: []modelmock.Turn{{Text: "banana", Usage: u(60, 1)}}},
		{Name: "direct", Match: "direct:", Turns: []modelmock.Turn{{Text: "Direct work done.", Usage: u(50, 5)}}},
		{Name: "follow-up", Match: "follow-up:", Turns: []modelmock.Turn{{Text: "Followed up.", Usage: u(70, 7)}}},
		{Name: "slow", Match: "slow:", Turns: []modelmock.Turn{
			{Usage: u(10, 1), ToolCalls: []modelmock.ToolCall{{Name: "exec_command", Input: map[string]any{"cmd": "sleep 300"}}}},
			{Text: "slept"},
		}},
	}}
}

// /spawn, /tell (resuming the settled worker's thread), /cancel mid-command
// leaving no process, and kill -9 then --resume continuing the
// coordinator's thread, with the real Codex CLI.
func TestCodexSpawnTellCancelResume(t *testing.T) {
	spawnTellCancelResume(t, "codex", codexScript())
}

// The same with the real Copilot CLI.
func TestCopilotSpawnTellCancelResume(t *testing.T) {
	script := codexScript()
	for i, r := range script.Rules {
		if r.Name == "slow" {
			script.Rules[i].Turns[0].ToolCalls = []modelmock.ToolCall{{Name: "bash", Input: map[string]any{"command": "sleep 300", "description": "wait"}}}
		}
	}
	spawnTellCancelResume(t, "copilot", script)
}

func spawnTellCancelResume(t *testing.T, name string, script modelmock.Script) {
	ae := e2etest.NewAgentEnv(t, name, script)
	d := ae.Start("--control-socket", "--provider", name)
	s := e2etest.Watch(t, d.Dial(protocol.ClientOther, "w"))
	c := d.Dial(protocol.ClientOther, "op")
	session := c.Welcome().SessionID
	s.WaitFor("replayEnd", e2etest.IsType(protocol.TypeReplayEnd))
	answerAsks := func(until func(protocol.Message) bool, what string) {
		t.Helper()
		s.WaitLong(what, func(m protocol.Message) bool {
			if a, ok := m.(*protocol.AskRequest); ok {
				for _, ch := range a.Choices {
					if ch.Description == "allow_once" {
						c.Send(&protocol.AskResponse{ID: a.ID, Text: ch.Value})
						break
					}
				}
			}
			if cr, ok := m.(*protocol.ConfirmRequest); ok {
				c.Send(&protocol.ConfirmResponse{ID: cr.ID, Approve: true})
			}
			return until(m)
		})
	}
	text := func(agent, want string) func(protocol.Message) bool {
		return func(m protocol.Message) bool {
			tr, ok := m.(*protocol.Transcript)
			return ok && tr.Agent == agent && tr.Text == want
		}
	}
	c.Send(&protocol.Prompt{Text: "remember the word banana"})
	if r := s.WaitLong("the coordinator's reply", e2etest.IsType(protocol.TypeReply)).(*protocol.Reply); r.Text != "Noted: banana." {
		t.Fatalf("reply %q", r.Text)
	}
	c.Send(&protocol.Prompt{Text: "/spawn direct: do it"})
	answerAsks(text("w1", "Direct work done."), "the direct worker's text")
	s.WaitLong("w1 settles", func(m protocol.Message) bool {
		h, ok := m.(*protocol.HubEvent)
		return ok && h.From == "w1" && h.Kind == protocol.HubCompleted
	})
	c.Send(&protocol.Prompt{Text: "/tell w1 follow-up: and this"})
	answerAsks(text("w1", "Followed up."), "the follow-up's text")
	resumed := false
	for _, r := range ae.Mock.Requests() {
		if r.Rule == "follow-up" && strings.Contains(string(r.Body), "Direct work done.") {
			resumed = true
		}
	}
	if !resumed {
		t.Fatal("the /tell turn did not continue the worker's thread")
	}

	c.Send(&protocol.Prompt{Text: "/spawn slow: wait"})
	deadline := time.Now().Add(3 * time.Minute)
	for len(sleepers(session)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the agent's sleep never started")
		}
		select {
		case f := <-s.Frames:
			if a, ok := f.Msg.(*protocol.AskRequest); ok && len(a.Choices) > 0 {
				c.Send(&protocol.AskResponse{ID: a.ID, Text: a.Choices[0].Value})
			}
			if cr, ok := f.Msg.(*protocol.ConfirmRequest); ok {
				c.Send(&protocol.ConfirmResponse{ID: cr.ID, Approve: true})
			}
		case <-time.After(50 * time.Millisecond):
		}
	}
	c.Send(&protocol.Prompt{Text: "/cancel w2"})
	s.WaitLong("w2 fails as cancelled", func(m protocol.Message) bool {
		h, ok := m.(*protocol.HubEvent)
		return ok && h.From == "w2" && h.Kind == protocol.HubFailed && strings.Contains(h.Text, "cancelled")
	})
	if left := sleepers(session); len(left) > 0 {
		t.Fatalf("the cancelled command still runs: %v", left)
	}

	d.Cmd.Process.Kill()
	<-d.Done
	d2 := ae.Start("--control-socket", "--provider", name, "--resume", session)
	s2 := e2etest.Watch(t, d2.Dial(protocol.ClientOther, "w2"))
	c2 := d2.Dial(protocol.ClientOther, "op2")
	s2.WaitFor("replayEnd", e2etest.IsType(protocol.TypeReplayEnd))
	c2.Send(&protocol.Prompt{Text: "which word did I ask you to remember?"})
	if r := s2.WaitLong("the resumed reply", e2etest.IsType(protocol.TypeReply)).(*protocol.Reply); r.Text != "banana" {
		t.Fatalf("reply %q", r.Text)
	}
	found := false
	for _, r := range ae.Mock.Requests() {
		if r.Rule == "second" && strings.Contains(string(r.Body), "Noted: banana.") {
			found = true
		}
	}
	if !found {
		t.Fatalf("the resumed %s coordinator did not continue its conversation", name)
	}
	d2.Stop()
}

// In a native session, an agent's tool request that the confirm policy
// names (here `git push`) waits for a native approve or deny pinned to
// that very request (a reservation <task>.p1 whose evidence hash covers
// the tool and its input), not for a legacy confirm.
func TestClaudeNativeSessionApprovesToolRequests(t *testing.T) {
	script := coordinatorScript()
	script.Rules = append(script.Rules, modelmock.Rule{Name: "push", Match: "pusher:", Turns: []modelmock.Turn{
		{Usage: modelmock.Usage{Input: 10, Output: 1}, ToolCalls: []modelmock.ToolCall{{Name: "Bash", Input: map[string]any{"command": "git push origin main", "description": "push"}}}},
		{Text: "push attempted"},
	}})
	for _, verdict := range []string{"approve", "deny"} {
		t.Run(verdict, func(t *testing.T) {
			ae := e2etest.NewAgentEnv(t, "claude", script)
			d := ae.Start("--control-socket", "--provider", "claude", "--native-root")
			s := e2etest.Watch(t, d.Dial(protocol.ClientOther, "w"))
			c := d.Dial(protocol.ClientOther, "op")
			s.WaitFor("replayEnd", e2etest.IsType(protocol.TypeReplayEnd))
			c.Send(&protocol.Prompt{Text: "/spawn pusher: push it"})
			var root string
			var rev float64
			testwait.For(t, 3*time.Minute, "the tool request to reach the native root", func() bool {
				st, _ := rootJSON(ae.Env, "status")
				r, _ := st["root"].(map[string]any)
				tasks, _ := r["tasks"].([]any)
				for _, x := range tasks {
					if x.(map[string]any)["id"] == "t1.p1" && x.(map[string]any)["evidenceHash"] != "" {
						root, rev = r["id"].(string), r["revision"].(float64)
					}
				}
				return root != ""
			})
			res, code := rootJSON(ae.Env, verdict, root, "--task", "t1.p1", "--rationale", "reviewed the push",
				"--revision", strconv.Itoa(int(rev)), "--operation-id", "op-"+verdict)
			if code != 0 || res["kind"] != "receipt" {
				t.Fatalf("%s: %d %v", verdict, code, res)
			}
			done := s.WaitLong("the Bash call ends", func(m protocol.Message) bool {
				switch m := m.(type) {
				case *protocol.ConfirmRequest:
					t.Fatalf("a legacy confirm in a native session: %q", m.Summary)
				case *protocol.ToolCall:
					return m.Tool == "Bash" && m.Phase == protocol.PhaseComplete
				}
				return false
			}).(*protocol.ToolCall)
			denied := strings.Contains(done.Result, "denied by the operator")
			if denied != (verdict == "deny") {
				t.Fatalf("after %s the Bash call ended with %q", verdict, done.Result)
			}
			d.Stop()
		})
	}
}

// The coordinator scenario with the real Codex CLI (codex app-server): the
// coordinator spawns two workers through the fleet's MCP tools, each runs
// a command that needs approval, a second console allows one and denies
// the other, and the tokens are what the endpoint reported.
func TestCodexCoordinatorSpawnsWorkersAndRelaysApprovals(t *testing.T) {
	coordinatorAllowsOneDeniesOther(t, "codex", "mcp__fleet__spawn_worker", func(cmd string) modelmock.ToolCall {
		return modelmock.ToolCall{Name: "exec_command", Input: map[string]any{"cmd": cmd}}
	})
}

// The same with the real Copilot CLI (copilot --acp, BYOK).
func TestCopilotCoordinatorSpawnsWorkersAndRelaysPermissions(t *testing.T) {
	coordinatorAllowsOneDeniesOther(t, "copilot", "fleet-spawn_worker", func(cmd string) modelmock.ToolCall {
		return modelmock.ToolCall{Name: "bash", Input: map[string]any{"command": cmd, "description": "write a file"}}
	})
}

// coordinatorAllowsOneDeniesOther: a prompt to the coordinator spawns two
// workers (spawnTool is how the CLI names the fleet's spawn_worker); worker
// a runs a command writing hello.txt, which a second console allows,
// worker b one writing bye.txt, which it denies.
func coordinatorAllowsOneDeniesOther(t *testing.T, name, spawnTool string, command func(string) modelmock.ToolCall) {
	u := func(in, out int64) modelmock.Usage { return modelmock.Usage{Input: in, Output: out} }
	script := modelmock.Script{Rules: []modelmock.Rule{
		{Name: "coordinator", Match: "Add a greeting and a farewell", Turns: []modelmock.Turn{
			{Usage: u(300, 30), ToolCalls: []modelmock.ToolCall{{Name: spawnTool, Input: map[string]any{"task": "worker-a: create hello.txt"}}}},
			{Usage: u(320, 25), ToolCalls: []modelmock.ToolCall{{Name: spawnTool, Input: map[string]any{"task": "worker-b: create bye.txt"}}}},
			{Text: "Two workers are on it.", Usage: u(340, 20)},
		}},
		{Name: "a", Match: "worker-a:", Turns: []modelmock.Turn{
			{Usage: u(200, 15), ToolCalls: []modelmock.ToolCall{command("echo hello > hello.txt")}},
			{Text: "Wrote hello.txt.", Usage: u(210, 5)},
		}},
		{Name: "b", Match: "worker-b:", Turns: []modelmock.Turn{
			{Usage: u(200, 15), ToolCalls: []modelmock.ToolCall{command("echo bye > bye.txt")}},
			{Text: "Done with bye.txt.", Usage: u(210, 5)},
		}},
	}}
	ae := e2etest.NewAgentEnv(t, name, script)
	d := ae.Start("--control-socket", "--provider", name, "--workers", "2")
	watcher := e2etest.Watch(t, d.Dial(protocol.ClientOther, "watcher"))
	op := d.Dial(protocol.ClientOther, "op")
	watcher.WaitFor("replayEnd", e2etest.IsType(protocol.TypeReplayEnd))
	op.Send(&protocol.Prompt{Text: "Add a greeting and a farewell to the repo"})
	reply := watcher.WaitLong("the coordinator's reply", e2etest.IsType(protocol.TypeReply)).(*protocol.Reply)
	if reply.Text != "Two workers are on it." {
		t.Fatalf("reply %q", reply.Text)
	}
	answered := 0
	settled := map[string]string{}
	changes := map[string]protocol.FileChangeEntry{}
	deadline := time.Now().Add(3 * time.Minute) // in all: frames come all along
	for answered < 2 || len(settled) < 2 {
		m := watcher.WaitWithin(time.Until(deadline), "approvals and settlements (3 minutes in all)", func(protocol.Message) bool { return true })
		switch m := m.(type) {
		case *protocol.AskRequest, *protocol.ConfirmRequest:
			var id, question string
			var allowValue, denyValue string
			if a, ok := m.(*protocol.AskRequest); ok {
				id, question = a.ID, a.Question
				for _, c := range a.Choices {
					if c.Description == "allow_once" && allowValue == "" {
						allowValue = c.Value
					}
					if c.Description == "reject" && denyValue == "" {
						denyValue = c.Value
					}
				}
			} else {
				c := m.(*protocol.ConfirmRequest)
				id, question = c.ID, c.Summary
			}
			allow := strings.Contains(question, "hello.txt")
			if !allow && !strings.Contains(question, "bye.txt") {
				t.Fatalf("unexpected request %q", question)
			}
			if allowValue == "" && denyValue == "" {
				op.Send(&protocol.ConfirmResponse{ID: id, Approve: allow})
			} else if allow {
				op.Send(&protocol.AskResponse{ID: id, Text: allowValue})
			} else {
				op.Send(&protocol.AskResponse{ID: id, Text: denyValue})
			}
			answered++
		case *protocol.FileChange:
			for _, c := range m.Changes {
				changes[c.Path] = c
			}
		case *protocol.HubEvent:
			if m.Kind == protocol.HubCompleted || m.Kind == protocol.HubFailed {
				settled[m.From] = m.Kind
			}
		}
	}
	if _, ok := changes["hello.txt"]; !ok {
		t.Fatalf("no fileChange for the allowed command: %+v", changes)
	}
	if _, ok := changes["bye.txt"]; ok {
		t.Fatalf("the denied command changed a file: %+v", changes)
	}
	fs := watcher.WaitLong("token counts", func(m protocol.Message) bool {
		fs, ok := m.(*protocol.FleetState)
		return ok && fs.WorkerStatusCounts != nil && fs.WorkerStatusCounts.Completed+fs.WorkerStatusCounts.Failed == 2 && !fs.Coordinator.IsProcessing
	}).(*protocol.FleetState)
	// Exactly what the endpoint reported, each request once.
	in, out := e2etest.AnsweredUsage(script, ae.Mock.Requests())
	if *fs.Tokens.InputTokens != in || *fs.Tokens.OutputTokens != out || in < 960+410 {
		t.Fatalf("session tokens %d/%d, the endpoint reported %d/%d", *fs.Tokens.InputTokens, *fs.Tokens.OutputTokens, in, out)
	}
	d.Stop()
}
