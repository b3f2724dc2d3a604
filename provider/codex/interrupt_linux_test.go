//go:build linux

package codex

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/internal/modelmock"
	"github.com/agents-fleet/fleet/internal/proctree"
	"github.com/agents-fleet/fleet/internal/testwait"
	"github.com/agents-fleet/fleet/provider"
	"github.com/agents-fleet/fleet/provider/agentcli/agentclitest"
)

// (5) Interrupt during `sleep 300`: the turn ends interrupted, the command
// is gone, the session takes another turn, and after Close nothing carrying
// the tree's mark is left. Codex itself kills a command that is still in
// the foreground, but keeps one that yielded to the background (the model
// got "process running with session ID …") running after turn/interrupt:
// the adapter ends it.
func TestInterruptEndsTheRunningCommand(t *testing.T) {
	cases := []struct {
		name  string
		call  map[string]any
		turn1 modelmock.Turn
		ready func(r *rig) bool
	}{
		{"foreground", map[string]any{"cmd": "sleep 300"}, modelmock.Turn{Text: "woke up"}, nil},
		{"background", map[string]any{"cmd": "sleep 300", "yield_time_ms": 300}, modelmock.Turn{Hang: true},
			func(r *rig) bool { return len(r.Srv.Requests()) >= 2 }}, // the model is asked again: the command yielded
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, modelmock.Script{Rules: []modelmock.Rule{
				{Name: "sleep", Match: "take a nap", Turns: []modelmock.Turn{
					{Text: "sleeping", ToolCalls: []modelmock.ToolCall{{Name: "exec_command", Input: c.call}}},
					c.turn1,
				}},
				{Name: "after", Match: "still there", Turns: []modelmock.Turn{{Text: "yes"}}},
			}})
			h := agentclitest.NewHost(allow)
			s := r.start(t, r.Spec(), h)
			send(t, s, "take a nap")
			h.WaitFor(t, wait, "the command to start", func(evs []provider.Event, _ []provider.PermissionRequest) bool {
				return agentclitest.Count[provider.ToolStarted](evs) == 1
			})
			sleeping := func() []int {
				var out []int
				for _, pid := range proctree.FindMarked(commandEnv, s.mark) {
					if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline"); err == nil && strings.HasPrefix(string(b), "sleep\x00300") {
						out = append(out, pid)
					}
				}
				return out
			}
			testwait.For(t, wait, "sleep 300 to run with the command mark", func() bool {
				return len(sleeping()) > 0 && (c.ready == nil || c.ready(r))
			})

			ctx, cancel := context.WithTimeout(t.Context(), wait)
			defer cancel()
			if err := s.Interrupt(ctx); err != nil {
				t.Fatalf("Interrupt: %v", err)
			}
			evs := h.WaitTurns(t, 1, wait)
			te := agentclitest.All[provider.TurnEnded](evs)[0]
			if !te.Interrupted || te.Err != nil {
				t.Fatalf("TurnEnded = %+v, want interrupted", te)
			}
			if left := sleeping(); len(left) != 0 {
				for _, pid := range left {
					st, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
					t.Logf("left: %s", st)
				}
				t.Errorf("sleep 300 still running after the interrupt: %v", left)
			}
			if done := agentclitest.All[provider.ToolCompleted](evs); len(done) != 1 || !done[0].IsError {
				t.Errorf("ToolCompleted = %+v, want the command completed as interrupted", done)
			}
			if err := s.Interrupt(ctx); err != nil {
				t.Errorf("Interrupt between turns = %v, want a no-op", err)
			}

			send(t, s, "still there")
			evs = h.WaitTurns(t, 2, wait)
			if te := agentclitest.All[provider.TurnEnded](evs)[1]; te.Err != nil || te.Result != "yes" {
				t.Fatalf("turn after the interrupt = %+v", te)
			}

			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatalf("second Close: %v", err)
			}
			if left := agentclitest.Alive(s.cli); len(left) != 0 {
				t.Errorf("processes left after Close: %v", left)
			}
			if s.Err() != nil {
				t.Errorf("Err after Close = %v", s.Err())
			}
		})
	}
}

// Close during a running tool interrupts the turn (one TurnEnded) and
// leaves nothing behind.
func TestCloseDuringTurn(t *testing.T) {
	r := newRig(t, modelmock.Script{Rules: []modelmock.Rule{
		{Name: "sleep", Match: "take a nap", Turns: []modelmock.Turn{
			{ToolCalls: []modelmock.ToolCall{{Name: "exec_command", Input: map[string]any{"cmd": "setsid sleep 300 & sleep 300"}}}},
			{Text: "woke up"},
		}},
	}})
	h := agentclitest.NewHost(allow)
	s := r.start(t, r.Spec(), h)
	send(t, s, "take a nap")
	h.WaitFor(t, wait, "the command to start", func(evs []provider.Event, _ []provider.PermissionRequest) bool {
		return agentclitest.Count[provider.ToolStarted](evs) == 1
	})
	testwait.For(t, wait, "the command to run", func() bool { return len(proctree.FindMarked(commandEnv, s.mark)) >= 2 })
	start := time.Now()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("Close took %v", time.Since(start))
	select {
	case <-s.Done():
	default:
		t.Fatal("Done not closed after Close")
	}
	evs, _ := h.Snapshot()
	if ends := agentclitest.All[provider.TurnEnded](evs); len(ends) != 1 || !ends[0].Interrupted {
		t.Errorf("TurnEnded = %+v, want one, interrupted", ends)
	}
	if left := agentclitest.Alive(s.cli); len(left) != 0 {
		t.Errorf("processes left after Close: %v", left)
	}
	if err := s.Send(t.Context(), provider.Turn{Text: "again"}); err != provider.ErrClosed {
		t.Errorf("Send after Close = %v, want ErrClosed", err)
	}
}
