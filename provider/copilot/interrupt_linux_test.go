package copilot

import (
	"bytes"
	"os"
	"strconv"
	"testing"

	"github.com/agents-fleet/fleet/internal/modelmock"
	"github.com/agents-fleet/fleet/provider"
)

// sleepers are the tree's processes running `sleep 300`.
func sleepers(s *session) []int {
	var out []int
	for _, pid := range s.cfg.tree.Alive() {
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
	h := newHost(allow)
	s := r.start(t, r.spec(), h)
	send(t, s, "fleet-nap: sleep a while")
	h.waitFor(t, "the tool to start", func(evs []provider.Event, _ []provider.PermissionRequest) bool {
		return count[provider.ToolStarted](evs) == 1 && len(sleepers(s)) == 2
	})
	if err := s.Interrupt(t.Context()); err != nil {
		t.Fatalf("Interrupt: %v", err)
	}
	evs := h.waitTurns(t, 1)
	te := last[provider.TurnEnded](t, evs)
	if !te.Interrupted || te.Err != nil {
		t.Errorf("TurnEnded %+v", te)
	}
	if done := last[provider.ToolCompleted](t, evs); !done.IsError {
		t.Errorf("ToolCompleted %+v", done)
	}
	if left := sleepers(s); len(left) > 0 {
		t.Errorf("sleep 300 still running after the interrupt: %v", left)
	}
	for _, n := range all[provider.Note](evs) {
		t.Log(n.Text)
	}
	// The session goes on after an interrupt.
	send(t, s, "fleet-next: are you there?")
	evs = h.waitTurns(t, 2)
	if te := last[provider.TurnEnded](t, evs); te.Err != nil || te.Result != "still here" {
		t.Errorf("turn after the interrupt %+v", te)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if left := s.cfg.tree.Alive(); len(left) > 0 {
		t.Errorf("processes left after Close: %v", left)
	}
}

func TestInterruptDuringPermission(t *testing.T) {
	t.Parallel()
	r := newRig(t, modelmock.Script{Rules: []modelmock.Rule{sleepRule("fleet-ask")}})
	h := newHost(block)
	s := r.start(t, r.spec(), h)
	send(t, s, "fleet-ask: sleep a while")
	h.waitFor(t, "the permission prompt", func(_ []provider.Event, perms []provider.PermissionRequest) bool { return len(perms) == 1 })
	if err := s.Interrupt(t.Context()); err != nil {
		t.Fatalf("Interrupt: %v", err)
	}
	evs := h.waitTurns(t, 1)
	if te := last[provider.TurnEnded](t, evs); !te.Interrupted {
		t.Errorf("TurnEnded %+v", te)
	}
	if len(sleepers(s)) > 0 {
		t.Error("the command ran after its prompt was cancelled")
	}
}

func TestCloseDuringTool(t *testing.T) {
	t.Parallel()
	r := newRig(t, modelmock.Script{Rules: []modelmock.Rule{sleepRule("fleet-close")}})
	h := newHost(allow)
	s := r.start(t, r.spec(), h)
	send(t, s, "fleet-close: sleep a while")
	h.waitFor(t, "the command to run", func([]provider.Event, []provider.PermissionRequest) bool { return len(sleepers(s)) > 0 })
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	evs, _ := h.snapshot()
	if te := last[provider.TurnEnded](t, evs); !te.Interrupted || te.Err != nil {
		t.Errorf("TurnEnded %+v", te)
	}
	if count[provider.TurnEnded](evs) != 1 {
		t.Errorf("%d TurnEnded", count[provider.TurnEnded](evs))
	}
	if left := s.cfg.tree.Alive(); len(left) > 0 {
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
