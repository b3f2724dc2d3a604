//go:build linux

// Package unattended tests what issue 26 asks of a fleet left alone, with
// the built binary and the real CLIs on the scripted endpoint: memory
// admission and caps, stalls healed, rate limits waited out, states that
// tell the truth. It is apart from package e2e, which is near go test's
// 10-minute bound already.
package unattended

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/e2e/e2etest"
	"github.com/agents-fleet/fleet/internal/modelmock"
	"github.com/agents-fleet/fleet/protocol"
)

// workerOf waits for a fleetState in which worker id satisfies ok.
func workerOf(s *e2etest.Stream, what, id string, ok func(protocol.FleetWorkerSummary) bool) protocol.FleetWorkerSummary {
	s.T.Helper()
	var got protocol.FleetWorkerSummary
	s.WaitLong(what, func(m protocol.Message) bool {
		fs, isState := m.(*protocol.FleetState)
		if !isState {
			return false
		}
		for _, w := range fs.Workers {
			if w.ID == id && ok(w) {
				got = w
				return true
			}
		}
		return false
	})
	return got
}

// taskWaits waits for a fleetState in which task id waits with a reason
// containing want.
func taskWaits(s *e2etest.Stream, id, want string) string {
	s.T.Helper()
	var reason string
	s.WaitLong(id+" waiting: "+want, func(m protocol.Message) bool {
		fs, ok := m.(*protocol.FleetState)
		if !ok {
			return false
		}
		for _, it := range fs.Tasks.Items {
			if it.ID == id && strings.Contains(it.WaitReason, want) {
				reason = it.WaitReason
				return true
			}
		}
		return false
	})
	return reason
}

// Admission by memory (issue 26): with limits.minFreeMemoryMiB above what
// the machine has, a task waits and says why; /limits lists the session's
// limits, and lowering the bar with /limits starts it.
func TestTasksWaitForMemoryUntilTheLimitIsLowered(t *testing.T) {
	e := e2etest.NewEnv(t)
	os.WriteFile(filepath.Join(e.Home, "config.json"), []byte(`{"limits": {"stallGraceMs": 5000, "minFreeMemoryMiB": 1048576}}`), 0o600)
	d := start(e, "--control-socket")
	c := d.Dial(protocol.ClientREPL, "op")
	s := e2etest.Watch(t, c)
	s.WaitLong("replayEnd", e2etest.IsType(protocol.TypeReplayEnd))
	c.Prompt("$ echo ran-at-last")
	reason := taskWaits(s, "t1", "waiting for memory: ")
	if !strings.HasSuffix(reason, "MiB free, keeping 1048576") {
		t.Fatalf("wait reason %q", reason)
	}
	c.Prompt("/tasks")
	s.WaitLong("/tasks shows the wait", e2etest.ReplyContaining("(waits: waiting for memory: "))
	c.Prompt("/limits")
	r := s.WaitLong("/limits", e2etest.ReplyContaining("minFreeMemoryMiB")).(*protocol.Reply)
	if !strings.Contains(r.Text, "1048576 MiB") || !strings.Contains(r.Text, "workerMemoryMiB") || !strings.Contains(r.Text, "Memory the fleet may use now:") {
		t.Fatalf("/limits: %s", r.Text)
	}
	c.Prompt("/limits minFreeMemoryMiB 64")
	s.WaitLong("the change", e2etest.ReplyContaining("minFreeMemoryMiB is 64 for this session."))
	s.WaitLong("t1 done", e2etest.HubIs("w1", protocol.HubCompleted))
	c.Prompt("/limits minFreeMemoryMiB lots")
	s.WaitLong("a bad value refused", e2etest.ReplyContaining("must be a whole number"))
	c.Prompt("/limits")
	s.WaitLong("/limits after the change", e2etest.ReplyContaining("64 MiB"))
	stop(d)
}

// A worker whose process tree holds more than limits.workerMemoryMiB is
// stopped with that reason; the fleet and the other workers go on; its
// memory is in fleetState (rssBytes); the task's processes have a higher
// oom_score_adj than the fleet.
func TestWorkerOverMemoryIsStopped(t *testing.T) {
	e := e2etest.NewEnv(t)
	e.GitRepo()
	os.WriteFile(filepath.Join(e.Home, "config.json"), []byte(`{"limits": {"stallGraceMs": 5000, "workerMemoryMiB": 100}}`), 0o600)
	d := start(e, "--control-socket")
	c := d.Dial(protocol.ClientREPL, "op")
	s := e2etest.Watch(t, c)
	s.WaitLong("replayEnd", e2etest.IsType(protocol.TypeReplayEnd))
	session := c.Welcome().SessionID
	// w1 runs on while w2 is stopped.
	c.Prompt("$ sleep 600")
	w1 := workerOf(s, "w1 measured", "w1", func(w protocol.FleetWorkerSummary) bool { return w.RSSBytes > 0 })
	if w1.State != protocol.WorkerStateWorking {
		t.Fatalf("w1: state %q", w1.State)
	}
	daemonAdj := oomScoreAdj(t, d.Cmd.Process.Pid)
	pids := markedPids(t, "AGENTS_FLEET_SESSION="+session, "AGENTS_FLEET_WORKER=w1")
	if len(pids) == 0 {
		t.Fatal("no process of w1 found")
	}
	seen := 0
	for _, pid := range pids {
		cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if !strings.Contains(string(cmdline), "sleep") {
			continue // the fleet's own git reading the worktree, say
		}
		seen++
		if adj := oomScoreAdj(t, pid); adj <= daemonAdj {
			t.Fatalf("w1's process %d (%q) has oom_score_adj %d, the fleet %d; want it higher", pid, cmdline, adj, daemonAdj)
		}
	}
	if seen == 0 {
		t.Fatalf("none of w1's processes %v is its command", pids)
	}
	// w2 holds about 200 MiB in a shell variable.
	c.Prompt(`$ echo started > big.txt; x=$(head -c 200000000 /dev/zero | tr '\0' a); sleep 600`)
	s.WaitLong("w2 stopped", func(m protocol.Message) bool {
		h, ok := m.(*protocol.HubEvent)
		return ok && h.From == "w2" && h.Kind == protocol.HubFailed && strings.Contains(h.Text, "over limits.workerMemoryMiB (100 MiB)")
	})
	w2 := workerOf(s, "w2 failed with the reason", "w2", func(w protocol.FleetWorkerSummary) bool { return w.State == protocol.WorkerStateFailed })
	if !strings.HasPrefix(w2.StateReason, "stopped: its processes held ") || !strings.HasSuffix(w2.StateReason, "over limits.workerMemoryMiB (100 MiB)") {
		t.Fatalf("w2's reason: %q", w2.StateReason)
	}
	// Its work is kept: committed on its branch when it settled.
	e2etest.GitOf(s, "w2's work kept", "w2", func(g *protocol.WorkerGit) bool { return g.FilesChanged > 0 })
	// w1 and the fleet go on.
	workerOf(s, "w1 still working", "w1", func(w protocol.FleetWorkerSummary) bool { return w.State == protocol.WorkerStateWorking })
	c.Prompt("/workers")
	s.WaitLong("/workers shows the failure", e2etest.ReplyContaining("[failed: stopped: its processes held"))
	c.Prompt("/cancel w1")
	s.WaitLong("w1 cancelled", e2etest.HubIs("w1", protocol.HubFailed))
	stop(d)
}

func oomScoreAdj(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/oom_score_adj")
	if err != nil {
		t.Fatal(err)
	}
	v, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return v
}

// markedPids lists the processes whose environment has every one of marks.
func markedPids(t *testing.T, marks ...string) []int {
	t.Helper()
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, en := range entries {
		pid, err := strconv.Atoi(en.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile("/proc/" + en.Name() + "/environ")
		if err != nil {
			continue
		}
		have := 0
		for _, kv := range strings.Split(string(env), "\x00") {
			for _, m := range marks {
				if kv == m {
					have++
				}
			}
		}
		if have == len(marks) {
			out = append(out, pid)
		}
	}
	return out
}

// With an agent coordinator, processing means the coordinator is working
// on a prompt (issue 26): true from the prompt until its reply, false
// while only its workers run — here while both wait for permission.
func TestClaudeCoordinatorProcessingEndsWithItsReply(t *testing.T) {
	ae := e2etest.NewAgentEnv(t, "claude", coordinatorScript())
	d := start(ae.Env, "--control-socket", "--provider", "claude", "--workers", "2")
	s := e2etest.Watch(t, d.Dial(protocol.ClientOther, "watcher"))
	c := d.Dial(protocol.ClientOther, "op")
	s.WaitLong("replayEnd", e2etest.IsType(protocol.TypeReplayEnd))
	c.Send(&protocol.Prompt{Text: "Add a greeting and a farewell to the repo"})
	s.WaitLong("the coordinator's reply", e2etest.IsType(protocol.TypeReply))
	var asks []*protocol.AskRequest
	for len(asks) < 2 {
		asks = append(asks, s.WaitLong("permission prompts", e2etest.IsType(protocol.TypeAskRequest)).(*protocol.AskRequest))
	}
	// Both workers are live, each waiting for the operator; the
	// coordinator has answered: it is not processing.
	fs := s.WaitLong("fleetState with the workers waiting and the coordinator done", func(m protocol.Message) bool {
		fs, ok := m.(*protocol.FleetState)
		if !ok || fs.Coordinator.IsProcessing {
			return false
		}
		waiting := 0
		for _, w := range fs.Workers {
			if w.State == protocol.WorkerStateWaitingForOperator {
				waiting++
			}
		}
		return waiting == 2
	}).(*protocol.FleetState)
	if fs.Coordinator.StaleMs != nil {
		t.Fatalf("staleMs %d while the coordinator is not processing", *fs.Coordinator.StaleMs)
	}
	s.WaitLong("status not processing", func(m protocol.Message) bool {
		st, ok := m.(*protocol.Status)
		return ok && !st.Processing
	})
	for _, a := range asks {
		c.Send(&protocol.AskResponse{ID: a.ID, Text: "allow"})
	}
	s.WaitLong("a worker settles", e2etest.HubIs("w1", protocol.HubCompleted))
	stop(d)
}

// A hung model request is healed (issue 26): the turn is interrupted and
// the same session told to continue; when that hangs too, the CLI is
// stopped and a new one resumes the session; that one completes. Each
// attempt is a hubEvent, and the worker shows as stalled meanwhile.
func TestClaudeStallIsHealed(t *testing.T) {
	u := modelmock.Usage{Input: 10, Output: 1}
	script := modelmock.Script{Rules: []modelmock.Rule{
		{Name: "resumed", Match: "previous attempt stalled", Turns: []modelmock.Turn{{Text: "recovered after the resume", Usage: u}}},
		{Name: "nudged", Match: "continue", Turns: []modelmock.Turn{{Hang: true}}},
		{Name: "hang-once", Match: "hang-once:", Turns: []modelmock.Turn{{Hang: true}}},
	}}
	ae := e2etest.NewAgentEnv(t, "claude", script, map[string]any{"agentStallTimeoutMs": 3000})
	d := start(ae.Env, "--control-socket", "--provider", "claude")
	s := e2etest.Watch(t, d.Dial(protocol.ClientOther, "w"))
	c := d.Dial(protocol.ClientOther, "op")
	s.WaitLong("replayEnd", e2etest.IsType(protocol.TypeReplayEnd))
	c.Send(&protocol.Prompt{Text: "/spawn hang-once: do the thing"})
	first := s.WaitLong("the first healing", e2etest.HubIs("w1", protocol.HubStalled)).(*protocol.HubEvent)
	if !strings.Contains(first.Text, "told it to continue (attempt 1 of 2)") || !strings.Contains(first.Text, "agentStallTimeoutMs") {
		t.Fatalf("first healing: %q", first.Text)
	}
	workerOf(s, "w1 shown stalled", "w1", func(w protocol.FleetWorkerSummary) bool {
		return w.State == protocol.WorkerStateStalled && strings.Contains(w.StateReason, "attempt 1 of 2")
	})
	second := s.WaitLong("the second healing", e2etest.HubIs("w1", protocol.HubStalled)).(*protocol.HubEvent)
	if !strings.Contains(second.Text, "resumed its session in a new one (attempt 2 of 2)") {
		t.Fatalf("second healing: %q", second.Text)
	}
	s.WaitLong("the resumed session's answer", func(m protocol.Message) bool {
		tr, ok := m.(*protocol.Transcript)
		return ok && tr.Agent == "w1" && tr.Text == "recovered after the resume"
	})
	s.WaitLong("w1 completes", e2etest.HubIs("w1", protocol.HubCompleted))
	stop(d)
}

// A rate limit is waited out (issue 26): the endpoint answers 429 with
// retry-after 8; the CLI says it waits (Claude with the delay, Codex
// without), the worker shows rate-limited, a console sees the provider
// held and released, and a task for the same provider waits, saying why,
// and starts only after the limit ended. The limited worker completes.
func TestRateLimitIsWaitedOut(t *testing.T) {
	for _, name := range []string{"claude", "codex"} {
		t.Run(name, func(t *testing.T) {
			u := modelmock.Usage{Input: 10, Output: 1}
			script := modelmock.Script{Rules: []modelmock.Rule{
				{Name: "limited", Match: "limited:", Turns: []modelmock.Turn{
					{Status: 429, ErrorMessage: "rate limited", Times: 1, Headers: map[string]string{"retry-after": "8"}},
					{Text: "through after the limit", Usage: u},
				}},
				{Name: "second", Match: "second:", Turns: []modelmock.Turn{{Text: "second done", Usage: u}}},
			}}
			ae := e2etest.NewAgentEnv(t, name, script)
			d := start(ae.Env, "--control-socket", "--provider", name)
			s := e2etest.Watch(t, d.Dial(protocol.ClientOther, "w"))
			c := d.Dial(protocol.ClientOther, "op")
			s.WaitLong("replayEnd", e2etest.IsType(protocol.TypeReplayEnd))
			c.Send(&protocol.Prompt{Text: "/spawn limited: do it"})
			held := s.WaitLong(name+" held", func(m protocol.Message) bool {
				h, ok := m.(*protocol.HubEvent)
				return ok && h.Kind == protocol.HubRateLimited
			}).(*protocol.HubEvent)
			if !strings.Contains(held.Text, name+" is rate-limited until") || !strings.Contains(held.Text, "429") {
				t.Fatalf("held: %q", held.Text)
			}
			w1 := workerOf(s, "w1 rate-limited", "w1", func(w protocol.FleetWorkerSummary) bool { return w.State == protocol.WorkerStateRateLimited })
			if w1.RateLimitedUntil == 0 || !strings.Contains(w1.StateReason, "429") {
				t.Fatalf("w1: %+v", w1)
			}
			c.Send(&protocol.Prompt{Text: "/workers"})
			s.WaitLong("/workers shows the limit", e2etest.ReplyContaining("[rate-limited until "+time.UnixMilli(w1.RateLimitedUntil).Format("15:04")))
			// Another task of the provider waits for the limit to end.
			c.Send(&protocol.Prompt{Text: "/spawn second: then this"})
			if reason := taskWaits(s, "t2", "rate-limited"); !strings.HasPrefix(reason, "waiting: "+name+" is rate-limited until ") {
				t.Fatalf("t2 waits: %q", reason)
			}
			resumed, spawnedEarly := false, false
			answered, done := false, map[string]bool{}
			s.WaitLong("w1 through, the limit ended, w2 started after it, both done", func(m protocol.Message) bool {
				switch m := m.(type) {
				case *protocol.Transcript:
					answered = answered || m.Agent == "w1" && m.Text == "through after the limit"
				case *protocol.HubEvent:
					switch {
					case m.Kind == protocol.HubResumed:
						resumed = true
					case m.From == "w2" && m.Kind == protocol.HubSpawned:
						spawnedEarly = !resumed
					case m.Kind == protocol.HubCompleted:
						done[m.From] = true
					}
				}
				return answered && done["w1"] && done["w2"]
			})
			if spawnedEarly {
				t.Fatal("w2 started before the provider's limit ended")
			}
			stop(d)
		})
	}
}

// A limit the CLI gives up on, with no reset time (Claude's 429 result
// after its retries), that the fleet would wait out longer than
// limits.rateLimitMaxWaitMs: the worker fails, saying so.
func TestRateLimitPastTheMaxWaitFails(t *testing.T) {
	script := modelmock.Script{Rules: []modelmock.Rule{
		{Name: "limited", Match: "limited:", Turns: []modelmock.Turn{{Status: 429, ErrorMessage: "rate limited, no reset given"}}},
	}}
	ae := e2etest.NewAgentEnv(t, "claude", script, map[string]any{"rateLimitMaxWaitMs": 30000})
	d := start(ae.Env, "--control-socket", "--provider", "claude")
	s := e2etest.Watch(t, d.Dial(protocol.ClientOther, "w"))
	c := d.Dial(protocol.ClientOther, "op")
	s.WaitLong("replayEnd", e2etest.IsType(protocol.TypeReplayEnd))
	c.Send(&protocol.Prompt{Text: "/spawn limited: do it"})
	failed := s.WaitLong("w1 fails", e2etest.HubIs("w1", protocol.HubFailed)).(*protocol.HubEvent)
	if !strings.Contains(failed.Text, "429") || !strings.Contains(failed.Text, "past limits.rateLimitMaxWaitMs (30s)") {
		t.Fatalf("w1 failed: %q", failed.Text)
	}
	stop(d)
}

// The model API failing after the CLI's own retries (503 three times:
// Claude's first try and its two retries) is resumed after a backoff, in
// the same session, and the worker completes.
func TestClaudeServerErrorIsResumed(t *testing.T) {
	u := modelmock.Usage{Input: 10, Output: 1}
	script := modelmock.Script{Rules: []modelmock.Rule{
		{Name: "resumed", Match: "continue", Turns: []modelmock.Turn{{Text: "recovered after the outage", Usage: u}}},
		{Name: "flaky", Match: "flaky:", Turns: []modelmock.Turn{{Status: 503, ErrorMessage: "upstream is down"}}},
	}}
	ae := e2etest.NewAgentEnv(t, "claude", script)
	d := start(ae.Env, "--control-socket", "--provider", "claude")
	s := e2etest.Watch(t, d.Dial(protocol.ClientOther, "w"))
	c := d.Dial(protocol.ClientOther, "op")
	s.WaitLong("replayEnd", e2etest.IsType(protocol.TypeReplayEnd))
	c.Send(&protocol.Prompt{Text: "/spawn flaky: do it"})
	healed := s.WaitLong("the outage healed", e2etest.HubIs("w1", protocol.HubStalled)).(*protocol.HubEvent)
	if !strings.Contains(healed.Text, "503") || !strings.Contains(healed.Text, "resuming it in 5s (attempt 1 of 2)") {
		t.Fatalf("healing: %q", healed.Text)
	}
	s.WaitLong("the resumed answer", func(m protocol.Message) bool {
		tr, ok := m.(*protocol.Transcript)
		return ok && tr.Agent == "w1" && tr.Text == "recovered after the outage"
	})
	s.WaitLong("w1 completes", e2etest.HubIs("w1", protocol.HubCompleted))
	stop(d)
}

// coordinatorScript: the coordinator spawns two workers through the
// fleet's MCP tool and answers; each worker's tool call needs the
// operator's permission.
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
	}}
}

// Copilot never gives a reset time and gives up on a persisting 429 after
// five retries of its own; the fleet then chooses the wait (a minute for
// the first limit), holds copilot work meanwhile, and continues the
// session, which completes.
func TestCopilotLimitWaitedOutByTheFleet(t *testing.T) {
	u := modelmock.Usage{Input: 10, Output: 1}
	script := modelmock.Script{Rules: []modelmock.Rule{
		{Name: "continue", Match: "continue", Turns: []modelmock.Turn{{Text: "carried on after the limit", Usage: u}}},
		{Name: "limited", Match: "limited:", Turns: []modelmock.Turn{
			{Status: 429, ErrorMessage: "rate limited", Times: 6, Headers: map[string]string{"retry-after": "1"}},
			{Text: "through", Usage: u},
		}},
	}}
	ae := e2etest.NewAgentEnv(t, "copilot", script)
	d := start(ae.Env, "--control-socket", "--provider", "copilot")
	s := e2etest.Watch(t, d.Dial(protocol.ClientOther, "w"))
	c := d.Dial(protocol.ClientOther, "op")
	s.WaitLong("replayEnd", e2etest.IsType(protocol.TypeReplayEnd))
	c.Send(&protocol.Prompt{Text: "/spawn limited: do it"})
	held := s.WaitLong("copilot held", func(m protocol.Message) bool {
		h, ok := m.(*protocol.HubEvent)
		return ok && h.Kind == protocol.HubRateLimited
	}).(*protocol.HubEvent)
	if !strings.Contains(held.Text, "copilot is rate-limited until") || !strings.Contains(held.Text, "429") {
		t.Fatalf("held: %q", held.Text)
	}
	w1 := workerOf(s, "w1 rate-limited", "w1", func(w protocol.FleetWorkerSummary) bool { return w.State == protocol.WorkerStateRateLimited })
	if wait := time.Until(time.UnixMilli(w1.RateLimitedUntil)); wait < 30*time.Second || wait > 61*time.Second {
		t.Fatalf("w1 rate-limited for %s; want the fleet's first wait, a minute", wait)
	}
	s.WaitLong("the session continued", func(m protocol.Message) bool {
		tr, ok := m.(*protocol.Transcript)
		return ok && tr.Agent == "w1" && strings.Contains(tr.Text, "carried on after the limit")
	})
	s.WaitLong("w1 completes", e2etest.HubIs("w1", protocol.HubCompleted))
	stop(d)
}
