package copilot

import (
	"bytes"
	"os"
	"strconv"
	"testing"

	"github.com/agents-fleet/fleet/internal/modelmock"
	"github.com/agents-fleet/fleet/provider"
	"github.com/agents-fleet/fleet/provider/agentcli/agentclitest"
)

// sleepers are the tree's processes running `sleep 300`.
func sleepers(s *session) []int {
	var out []int
	for _, pid := range agentclitest.Alive(s.cli) {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if err == nil && bytes.Contains(b, []byte("sleep\x00300")) {
			out = append(out, pid)
		}
	}
	return out
}

// sleepRule's command sleeps, and leaves a sleep behind in a session of
// its own, as a detached server would.
func sleepRule(match string) modelmock.Rule {
	return modelmock.Rule{Name: match, Match: match, Turns: []modelmock.Turn{
		{Text: "sleeping", ToolCalls: []modelmock.ToolCall{{Name: "bash", Input: map[string]any{"command": "(setsid sleep 300 &); sleep 300", "description": "nap"}}}},
		{Text: "woke up"},
	}}
}

func TestInterruptDuringTool(t *testing.T) {
	t.Parallel()
	r := newRig(t, modelmock.Script{Rules: []modelmock.Rule{sleepRule("fleet-nap"), {Name: "next", Match: "fleet-next", Turns: []modelmock.Turn{{Text: "still here"}}}}})
	h := agentclitest.NewHost(allow)
	s := r.start(t, r.Spec(), h)
	send(t, s, "fleet-nap: sleep a while")
	h.WaitFor(t, wait, "the tool to start", func(evs []provider.Event, _ []provider.PermissionRequest) bool {
		return agentclitest.Count[provider.ToolStarted](evs) == 1 && len(sleepers(s)) == 2
	})
	if err := s.Interrupt(t.Context()); err != nil {
		t.Fatalf("Interrupt: %v", err)
	}
	evs := h.WaitTurns(t, 1, wait)
	te := agentclitest.Last[provider.TurnEnded](t, evs)
	if !te.Interrupted || te.Err != nil {
		t.Errorf("TurnEnded %+v", te)
	}
	if done := agentclitest.Last[provider.ToolCompleted](t, evs); !done.IsError {
		t.Errorf("ToolCompleted %+v", done)
	}
	if left := sleepers(s); len(left) > 0 {
		t.Errorf("sleep 300 still running after the interrupt: %v", left)
	}
	for _, n := range agentclitest.All[provider.Note](evs) {
		t.Log(n.Text)
	}
	// The session goes on after an interrupt.
	send(t, s, "fleet-next: are you there?")
	evs = h.WaitTurns(t, 2, wait)
	if te := agentclitest.Last[provider.TurnEnded](t, evs); te.Err != nil || te.Result != "still here" {
		t.Errorf("turn after the interrupt %+v", te)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if left := agentclitest.Alive(s.cli); len(left) > 0 {
		t.Errorf("processes left after Close: %v", left)
	}
}

func TestInterruptDuringPermission(t *testing.T) {
	t.Parallel()
	r := newRig(t, modelmock.Script{Rules: []modelmock.Rule{sleepRule("fleet-ask")}})
	h := agentclitest.NewHost(agentclitest.Block)
	s := r.start(t, r.Spec(), h)
	send(t, s, "fleet-ask: sleep a while")
	h.WaitFor(t, wait, "the permission prompt", func(_ []provider.Event, perms []provider.PermissionRequest) bool { return len(perms) == 1 })
	if err := s.Interrupt(t.Context()); err != nil {
		t.Fatalf("Interrupt: %v", err)
	}
	evs := h.WaitTurns(t, 1, wait)
	if te := agentclitest.Last[provider.TurnEnded](t, evs); !te.Interrupted {
		t.Errorf("TurnEnded %+v", te)
	}
	if len(sleepers(s)) > 0 {
		t.Error("the command ran after its prompt was cancelled")
	}
}

func TestCloseDuringTool(t *testing.T) {
	t.Parallel()
	r := newRig(t, modelmock.Script{Rules: []modelmock.Rule{sleepRule("fleet-close")}})
	h := agentclitest.NewHost(allow)
	s := r.start(t, r.Spec(), h)
	send(t, s, "fleet-close: sleep a while")
	h.WaitFor(t, wait, "the command to run", func([]provider.Event, []provider.PermissionRequest) bool { return len(sleepers(s)) > 0 })
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	evs, _ := h.Snapshot()
	if te := agentclitest.Last[provider.TurnEnded](t, evs); !te.Interrupted || te.Err != nil {
		t.Errorf("TurnEnded %+v", te)
	}
	if agentclitest.Count[provider.TurnEnded](evs) != 1 {
		t.Errorf("%d TurnEnded", agentclitest.Count[provider.TurnEnded](evs))
	}
	if left := agentclitest.Alive(s.cli); len(left) > 0 {
		t.Errorf("processes left after Close: %v", left)
	}
	if s.Err() != nil {
		t.Errorf("Err after Close: %v", s.Err())
	}
	if err := s.Send(t.Context(), provider.Turn{Text: "more"}); err != provider.ErrClosed {
		t.Errorf("Send after Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}
