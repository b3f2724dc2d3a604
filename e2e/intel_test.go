package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agents-fleet/fleet/e2e/e2etest"
	"github.com/agents-fleet/fleet/protocol"
)

// The intel walk-through with the local provider: runs are recorded,
// /fleet-intel re-broadcasts fleetIntel with the right figures, a skill
// gets a shadow from the operator, tasks alternate between the version
// and the shadow, applying it records the evolution, a late console's
// replay has all four snapshots in order, and fleet intel --json reads
// the same without a fleet.
func TestIntelWithTheLocalProvider(t *testing.T) {
	e := e2etest.NewEnv(t)
	e.GitRepo()
	skills := filepath.Join(e.Dir, ".fleet", "skills")
	os.MkdirAll(skills, 0o755)
	os.WriteFile(filepath.Join(skills, "greet.md"), []byte("printf 'hello\\n' > greeting.txt && {task}\n"), 0o644)

	d := e.Start("--control-socket", "--workers", "1")
	c := d.Dial(protocol.ClientREPL, "op")
	s := e2etest.Watch(t, c)
	s.WaitFor("replayEnd", e2etest.IsType(protocol.TypeReplayEnd))
	// 4 runs: 2 complete, one exits 3, one exits 1.
	c.Prompt("$ true\n$ exit 3\n$ echo ok\n$ false")
	for _, w := range []string{"w1", "w2", "w3", "w4"} {
		s.WaitLong(w+" settles", func(m protocol.Message) bool {
			h, ok := m.(*protocol.HubEvent)
			return ok && h.From == w && (h.Kind == protocol.HubCompleted || h.Kind == protocol.HubFailed)
		})
	}
	c.Prompt("/fleet-intel")
	r := s.WaitLong("/fleet-intel", e2etest.ReplyContaining("agent run(s)")).(*protocol.Reply)
	if !strings.Contains(r.Text, "4 agent run(s), 2 failed (success rate 50%)") {
		t.Fatalf("/fleet-intel: %s", r.Text)
	}
	in := s.WaitLong("fleetIntel after /fleet-intel", func(m protocol.Message) bool {
		fi, ok := m.(*protocol.FleetIntel)
		return ok && fi.Summary.TotalAgentRuns == 4
	}).(*protocol.FleetIntel)
	if in.Summary.SessionCount != 1 || in.Summary.FailedRuns != 2 || in.Summary.SuccessRate != 0.5 || in.Summary.TotalTokens != 0 ||
		len(in.Summary.TopErrors) != 1 || in.Summary.TopErrors[0].Count != 2 {
		t.Fatalf("summary: %+v", in.Summary)
	}

	// A skill: its first use is v1; it fails; the operator writes a
	// shadow; the next two tasks alternate v1 and the shadow.
	c.Prompt("/spawn --skill greet false")
	s.WaitLong("w5 fails", e2etest.HubIs("w5", protocol.HubFailed))
	c.Prompt("/learn greet")
	r = s.WaitLong("/learn greet", e2etest.ReplyContaining("greet's recent failures")).(*protocol.Reply)
	if !strings.Contains(r.Text, "--from FILE") {
		t.Fatalf("/learn with local: %s", r.Text)
	}
	os.WriteFile(filepath.Join(e.Dir, "greet-v2.md"), []byte("printf 'hello\\n' > greeting.txt; {task}; true\n"), 0o644)
	c.Prompt("/learn greet --from greet-v2.md")
	r = s.WaitLong("shadow", e2etest.ReplyContaining("Shadow sh-")).(*protocol.Reply)
	shadow := strings.Fields(strings.TrimPrefix(r.Text, "Shadow "))[0]
	c.Prompt("/spawn --skill greet false")
	s.WaitLong("w6 runs v1", e2etest.ReplyContaining("skill greet v1"))
	s.WaitLong("w6 fails", e2etest.HubIs("w6", protocol.HubFailed))
	c.Prompt("/spawn --skill greet false")
	s.WaitLong("w7 runs the shadow", e2etest.ReplyContaining("shadow "+shadow))
	s.WaitLong("w7 completes", e2etest.HubIs("w7", protocol.HubCompleted))
	ev := s.WaitLong("fleetEvolution with the shadow's trial", func(m protocol.Message) bool {
		fe, ok := m.(*protocol.FleetEvolution)
		return ok && len(fe.Shadows) == 1 && fe.Shadows[0].Trials != nil && *fe.Shadows[0].Trials == 1
	}).(*protocol.FleetEvolution)
	if sh := ev.Shadows[0]; sh.CandidateSuccessRate == nil || *sh.CandidateSuccessRate != 1 || sh.BaselineSuccessRate == nil || *sh.BaselineSuccessRate != 0 {
		t.Fatalf("shadow: %+v", sh)
	}
	// 4 runs have failed with "exit status N" now: the recurring-error rule
	// fires. Dismissed, it is gone from fleetIntel and stays gone.
	c.Prompt("/fleet-intel")
	r = s.WaitLong("/fleet-intel with a suggestion", e2etest.ReplyContaining("[recurring-error")).(*protocol.Reply)
	_, after, _ := strings.Cut(r.Text, "Suggestions (/fleet-intel accept|dismiss ID):\n  ")
	id := strings.Fields(after)[0]
	c.Prompt("/fleet-intel dismiss " + id)
	s.WaitLong("dismissed", e2etest.ReplyContaining("Dismissed "+id))
	s.WaitLong("fleetIntel without it", func(m protocol.Message) bool {
		fi, ok := m.(*protocol.FleetIntel)
		if !ok {
			return false
		}
		for _, sg := range fi.Suggestions {
			if sg.ID == id {
				return false
			}
		}
		return true
	})
	c.Prompt("$ false")
	s.WaitLong("w8 fails", e2etest.HubIs("w8", protocol.HubFailed))
	c.Prompt("/fleet-intel")
	if r := s.WaitLong("/fleet-intel again", e2etest.ReplyContaining("agent run(s)")).(*protocol.Reply); strings.Contains(r.Text, id) {
		t.Fatalf("a dismissed suggestion came back: %s", r.Text)
	}

	c.Prompt("/learn apply " + shadow)
	s.WaitLong("applied", e2etest.ReplyContaining("Applied "+shadow))
	if got, _ := os.ReadFile(filepath.Join(skills, "greet.md")); !strings.Contains(string(got), "; true") {
		t.Fatalf("skill file after apply: %q", got)
	}
	s.WaitLong("the evolution on the timeline", func(m protocol.Message) bool {
		fe, ok := m.(*protocol.FleetEvolution)
		return ok && len(fe.Timeline) == 1 && fe.Timeline[0].Skill == "greet"
	})

	// A late console gets the four snapshots in its replay, in order.
	late := e2etest.Watch(t, d.Dial(protocol.ClientOther, "late"))
	var order []string
	late.WaitFor("replayEnd", func(m protocol.Message) bool {
		switch m.MessageType() {
		case protocol.TypeCommandCatalog, protocol.TypeFleetIntel, protocol.TypeFleetEvolution, protocol.TypeFleetStore, protocol.TypeFleetExperiment:
			order = append(order, m.MessageType())
		}
		if cc, ok := m.(*protocol.CommandCatalog); ok {
			var names []string
			for _, c := range cc.Commands {
				names = append(names, c.Name)
			}
			if !slices.Contains(names, "/fleet-intel") || !slices.Contains(names, "/learn") {
				t.Errorf("catalog lacks the intel commands: %v", names)
			}
		}
		return m.MessageType() == protocol.TypeReplayEnd
	})
	want := []string{protocol.TypeCommandCatalog, protocol.TypeFleetIntel, protocol.TypeFleetEvolution, protocol.TypeFleetStore, protocol.TypeFleetExperiment}
	if !slices.Equal(order, want) {
		t.Fatalf("replay order %v, want %v", order, want)
	}
	d.Stop()

	out, errOut, code := e.Fleet("", "intel", "--json")
	if code != 0 {
		t.Fatalf("fleet intel --json (%d): %s", code, errOut)
	}
	var got struct {
		FleetIntel protocol.FleetIntel `json:"fleetIntel"`
		FleetStore protocol.FleetStore `json:"fleetStore"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if got.FleetIntel.Summary.TotalAgentRuns != 8 || got.FleetIntel.Summary.FailedRuns != 5 || len(got.FleetIntel.Skills) != 1 || got.FleetIntel.Skills[0].Uses != 3 {
		t.Fatalf("fleet intel --json: %+v", got.FleetIntel)
	}
	steered := false
	for _, st := range got.FleetStore.Steering {
		if st.Source == "prompt" && strings.Contains(st.Text, "exit 3") {
			steered = true
		}
	}
	if !steered {
		t.Fatalf("the prompt is not in the steering: %+v", got.FleetStore.Steering)
	}
}

// A corrupt intel database leaves the fleet working without intel, and
// the file as it was.
func TestCorruptIntelStoreDegrades(t *testing.T) {
	e := e2etest.NewEnv(t)
	db := filepath.Join(e.Home, "intel", "fleet-intel.db")
	os.MkdirAll(filepath.Dir(db), 0o700)
	garbage := []byte(strings.Repeat("not a database ", 500))
	os.WriteFile(db, garbage, 0o600)
	d := e.Start("--control-socket")
	c := d.Dial(protocol.ClientREPL, "op")
	s := e2etest.Watch(t, c)
	s.WaitFor("replayEnd", e2etest.IsType(protocol.TypeReplayEnd))
	c.Prompt("$ echo still works")
	s.WaitLong("the task runs", e2etest.HubIs("w1", protocol.HubCompleted))
	c.Prompt("/fleet-intel")
	s.WaitLong("unavailable", e2etest.ReplyContaining("Intel is unavailable"))
	d.Stop()
	if b, _ := os.ReadFile(db); string(b) != string(garbage) {
		t.Fatal("the corrupt intel database was written to")
	}
	if !strings.Contains(d.Stderr.String(), "Intel is unavailable") && !strings.Contains(d.Stderr.String(), "intel") {
		t.Logf("stderr: %s", d.Stderr)
	}
}
