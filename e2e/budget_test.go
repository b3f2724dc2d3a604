package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/client"
	"github.com/agents-fleet/fleet/e2e/e2etest"
	"github.com/agents-fleet/fleet/internal/modelmock"
	"github.com/agents-fleet/fleet/internal/testwait"
	"github.com/agents-fleet/fleet/protocol"
)

// budgetScript: a worker's turn makes two model requests (400, then 300
// input tokens), each with a shell call; the budget's continuation turn
// finishes.
//
// Each shell call writes a file, so Claude Code asks before it runs it (a
// bare `echo` is read-only, and it ran without asking): the second call
// waits for an answer that never comes, so the turn cannot go on to its
// third request however fast it runs; only the budget's interrupt ends it.
// With the bare echo the turn raced the fleet's interrupt, and under load
// it made its third request first (or even finished).
func budgetScript() modelmock.Script {
	bash := func(cmd string) []modelmock.ToolCall {
		return []modelmock.ToolCall{{Name: "Bash", Input: map[string]any{"command": cmd, "description": "step"}}}
	}
	return modelmock.Script{Rules: []modelmock.Rule{
		{Name: "work", Match: "budget-work:", Turns: []modelmock.Turn{
			{Usage: modelmock.Usage{Input: 400, Output: 10}, ToolCalls: bash("echo step-one > step-one.txt")},
			{Usage: modelmock.Usage{Input: 300, Output: 10}, ToolCalls: bash("echo step-two > step-two.txt")},
			{Text: "All steps done.", Usage: modelmock.Usage{Input: 10, Output: 1}},
		}},
		{Name: "continue", Match: "You were paused at your token budget", Turns: []modelmock.Turn{
			{Text: "Resumed and finished.", Usage: modelmock.Usage{Input: 50, Output: 5}},
		}},
	}}
}

// newBudgetEnv is newAgentEnv for claude with config.json's budgets set.
func newBudgetEnv(t *testing.T, budgets map[string]any) *e2etest.AgentEnv {
	t.Helper()
	ae := e2etest.NewAgentEnv(t, "claude", budgetScript())
	path := filepath.Join(ae.Home, "config.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["budgets"] = budgets
	if b, err = json.Marshal(cfg); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return ae
}

// answering waits like WaitLong and allows the first step's shell call
// on the way, setting *asked. The second step's is never answered: only
// the budget's interrupt can end that turn (see budgetScript).
func answering(s *e2etest.Stream, c *client.Conn, asked *bool, what string, pred func(protocol.Message) bool) protocol.Message {
	s.T.Helper()
	return s.WaitLong(what, func(m protocol.Message) bool {
		if a, ok := m.(*protocol.AskRequest); ok && strings.Contains(a.Question, "step-one") {
			*asked = true
			c.Send(&protocol.AskResponse{ID: a.ID, Text: "allow"})
			return false
		}
		return pred(m)
	})
}

// cutShort fails the test when the scripted turn went on past the budget,
// or when the CLI ran the first step's shell call without asking: then it
// would not wait for the second's either, and the test would race the
// fleet's interrupt (see budgetScript).
func cutShort(t *testing.T, ae *e2etest.AgentEnv, asked bool) {
	t.Helper()
	if !asked {
		t.Fatal("the CLI ran the first step's shell call without asking the operator; the script's calls must need approval")
	}
	for _, r := range ae.Mock.Requests() {
		if r.Rule == "work" && r.Turn >= 2 {
			t.Fatalf("the turn went on past the budget: request %d of the turn was made", r.Turn+1)
		}
	}
}

func budgetNotice(part string) func(protocol.Message) bool {
	return func(m protocol.Message) bool {
		h, ok := m.(*protocol.HubEvent)
		return ok && h.Kind == "budget" && strings.Contains(h.Text, part)
	}
}

// A Claude Code worker with a 500-token budget: the first response
// (400 input tokens) is announced at 80% (hubEvent and reply); the second
// takes it over, and its turn is interrupted and a confirm asks to raise
// the budget. Approved, the worker continues in the same CLI session and
// completes; denied, the task fails with the budget's reason.
func TestClaudeWorkerTokenBudget(t *testing.T) {
	for _, approve := range []bool{true, false} {
		name := "deny"
		if approve {
			name = "approve"
		}
		t.Run(name, func(t *testing.T) {
			ae := newBudgetEnv(t, map[string]any{"workerTokens": 500})
			d := ae.Start("--control-socket", "--provider", "claude")
			s := e2etest.Watch(t, d.Dial(protocol.ClientOther, "w"))
			c := d.Dial(protocol.ClientOther, "op")
			s.WaitFor("replayEnd", e2etest.IsType(protocol.TypeReplayEnd))
			c.Send(&protocol.Prompt{Text: "/spawn budget-work: do the steps"})

			warn := "w1 used 80% of its token budget (400 of 500 tokens)"
			sawReply, asked := false, false
			answering(s, c, &asked, "the 80% notice", func(m protocol.Message) bool {
				if r, ok := m.(*protocol.Reply); ok && r.Text == warn {
					sawReply = true
				}
				return budgetNotice(warn)(m)
			})
			var cr *protocol.ConfirmRequest
			var interrupted bool
			answering(s, c, &asked, "the budget confirm", func(m protocol.Message) bool {
				switch m := m.(type) {
				case *protocol.Reply:
					sawReply = sawReply || m.Text == warn
				case *protocol.HubEvent:
					interrupted = interrupted || (m.Kind == "budget" && strings.Contains(m.Text, "w1 reached its token budget"))
				case *protocol.ConfirmRequest:
					cr = m
					return true
				}
				return false
			})
			if !sawReply || !interrupted {
				t.Fatalf("reply with the notice %v, exhaustion notice %v", sawReply, interrupted)
			}
			if !strings.HasPrefix(cr.Summary, "w1 reached its token budget (") || !strings.HasSuffix(cr.Summary, "of 500 tokens). Continue with the budget raised to 1,000?") {
				t.Fatalf("confirm %q", cr.Summary)
			}
			c.Send(&protocol.ConfirmResponse{ID: cr.ID, Approve: approve})
			settled := answering(s, c, &asked, "w1 settles", func(m protocol.Message) bool {
				h, ok := m.(*protocol.HubEvent)
				return ok && h.From == "w1" && (h.Kind == protocol.HubCompleted || h.Kind == protocol.HubFailed)
			}).(*protocol.HubEvent)
			// The turn was cut short: the script's last answer of the turn
			// was never asked for.
			cutShort(t, ae, asked)
			if !approve {
				if settled.Kind != protocol.HubFailed || !strings.Contains(settled.Text, "token budget exhausted (") {
					t.Fatalf("after a deny: %s %q", settled.Kind, settled.Text)
				}
				d.Stop()
				return
			}
			if settled.Kind != protocol.HubCompleted {
				t.Fatalf("after the approval: %s %q", settled.Kind, settled.Text)
			}
			// The continuation was a turn of the same conversation.
			resumed := false
			for _, r := range ae.Mock.Requests() {
				if r.Rule == "continue" && strings.Contains(string(r.Body), "step-one") {
					resumed = true
				}
			}
			if !resumed {
				t.Fatal("the continuation did not carry the worker's conversation")
			}
			c.Send(&protocol.Prompt{Text: "/budget"})
			rep := s.WaitLong("the /budget report", func(m protocol.Message) bool {
				r, ok := m.(*protocol.Reply)
				return ok && strings.HasPrefix(r.Text, "Token budgets")
			}).(*protocol.Reply)
			if !strings.Contains(rep.Text, "workers' default budget: 500 tokens") {
				t.Fatalf("/budget: %q", rep.Text)
			}
			d.Stop()
		})
	}
}

// In a native session the exhausted budget is a hold on the task's budget
// reservation (t1.b1), seen in `fleet root status`; `fleet root release`
// lets the worker go on in the same session.
func TestClaudeNativeTokenBudgetHold(t *testing.T) {
	ae := newBudgetEnv(t, map[string]any{"workerTokens": 500})
	d := ae.Start("--control-socket", "--provider", "claude", "--native-root")
	s := e2etest.Watch(t, d.Dial(protocol.ClientOther, "w"))
	c := d.Dial(protocol.ClientOther, "op")
	s.WaitFor("replayEnd", e2etest.IsType(protocol.TypeReplayEnd))
	c.Send(&protocol.Prompt{Text: "/spawn budget-work: do the steps"})
	asked := false
	answering(s, c, &asked, "the hold's reply", func(m protocol.Message) bool {
		if cr, ok := m.(*protocol.ConfirmRequest); ok {
			t.Fatalf("a confirm in a native session: %q", cr.Summary)
		}
		r, ok := m.(*protocol.Reply)
		return ok && strings.Contains(r.Text, "held in the native root")
	})
	var root, hash string
	var rev float64
	testwait.For(t, time.Minute, "a budget hold in fleet root status", func() bool {
		st, _ := rootJSON(ae.Env, "status")
		r, _ := st["root"].(map[string]any)
		holds, _ := r["holds"].([]any)
		for _, x := range holds {
			h := x.(map[string]any)
			if h["taskId"] == "t1.b1" && strings.Contains(h["reason"].(string), "token budget exhausted (") {
				root, rev, hash = r["id"].(string), r["revision"].(float64), h["holdHash"].(string)
			}
		}
		return hash != ""
	})
	if res, code := rootJSON(ae.Env, "release", root, "--hold-hash", hash, "--operation-id", "op-budget", "--revision", strconv.Itoa(int(rev))); code != 0 || res["kind"] != "receipt" {
		t.Fatalf("release: %d %v", code, res)
	}
	done := answering(s, c, &asked, "w1 settles", func(m protocol.Message) bool {
		h, ok := m.(*protocol.HubEvent)
		return ok && h.From == "w1" && (h.Kind == protocol.HubCompleted || h.Kind == protocol.HubFailed)
	}).(*protocol.HubEvent)
	if done.Kind != protocol.HubCompleted {
		t.Fatalf("after the release: %q", done.Text)
	}
	cutShort(t, ae, asked)
	continued := false
	for _, r := range ae.Mock.Requests() {
		continued = continued || (r.Rule == "continue" && strings.Contains(string(r.Body), "step-one"))
	}
	if !continued {
		t.Fatal("the worker did not continue its conversation after the release")
	}
	d.Stop()
}
