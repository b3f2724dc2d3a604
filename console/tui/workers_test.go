package tui

import (
	"strings"
	"testing"

	"github.com/agents-fleet/fleet/protocol"
)

func TestWorkerKeys(t *testing.T) {
	prompts := []struct {
		keys []string
		want string
	}{
		{[]string{"d"}, "/diff router"},
		{[]string{"down", "d"}, "/diff docs"},
		{[]string{"m", "y"}, "/merge router"},
		{[]string{"p", "y"}, "/pr router"},
		{[]string{"x", "y"}, "/cancel router"},
		{[]string{"enter", "m", "y"}, "/merge router"}, // from the transcript too
		{[]string{"down", "up", "x", "Y"}, "/cancel router"},
	}
	for _, c := range prompts {
		t.Run(strings.Join(c.keys, " "), func(t *testing.T) {
			m, _ := loaded(false)
			acts := press(m, c.keys...)
			if p := sentPrompt(t, acts); p.Text != c.want {
				t.Errorf("sent %q, want %q", p.Text, c.want)
			}
		})
	}
	t.Run("confirmation asks first", func(t *testing.T) {
		m, _ := loaded(false)
		for _, k := range []string{"m", "p", "x"} {
			if acts := press(m, k); len(acts) != 0 {
				t.Fatalf("%s sent without confirmation: %v", k, acts)
			}
			want := map[string]string{"m": "merge router? y/n", "p": "open a pull request for router? y/n", "x": "cancel worker router? y/n"}[k]
			mustContain(t, m.View(), want)
			if acts := press(m, "n"); len(acts) != 0 {
				t.Fatalf("n sent %v", acts)
			}
			mustContain(t, m.View(), "cancelled")
		}
		press(m, "m")
		if acts := press(m, "esc"); len(acts) != 0 {
			t.Fatalf("esc sent %v", acts)
		}
	})
	t.Run("tell", func(t *testing.T) {
		m, _ := loaded(false)
		press(m, "down", "t")
		mustContain(t, m.View(), "› /tell docs █")
		typeText(m, "fix the conflict")
		if p := sentPrompt(t, press(m, "enter")); p.Text != "/tell docs fix the conflict" {
			t.Errorf("sent %q", p.Text)
		}
	})
	t.Run("selection", func(t *testing.T) {
		m, _ := loaded(false)
		m.Resize(80, 24)
		press(m, "down")
		mustContain(t, m.View(), "▸ docs", "── docs ─", "conflicts: docs/endpoints.md")
		press(m, "down") // stays on the last row
		mustContain(t, m.View(), "▸ docs")
		press(m, "up", "up")
		mustContain(t, m.View(), "▸ router")
	})
}

func TestNarrowTablesKeepNameStatusTask(t *testing.T) {
	for _, w := range []int{120, 80, 60, 45, 30} {
		m, _ := loaded(false)
		m.Resize(w, 24)
		s := m.View()
		header := lines(s)[3]
		for _, col := range []string{"NAME", "STATUS", "TASK"} {
			if !strings.Contains(header, col) {
				t.Errorf("width %d: header %q lacks %s", w, header, col)
			}
		}
		mustContain(t, s, "router", "running", "t-2")
		if w < 80 && strings.Contains(header, "TOKENS") {
			t.Errorf("width %d keeps TOKENS: %q", w, header)
		}
		if w >= 120 && !strings.Contains(header, "TOKENS") {
			t.Errorf("width %d drops TOKENS: %q", w, header)
		}
	}
}

// a applies the selected worker's change to the operator's work tree, by
// running fleet apply in the fleet's folder, after a y.
func TestApplyRunsFleetApply(t *testing.T) {
	m, _ := connected(false)
	m.Apply("f1", fleetState(), false)
	m.Key(Key{Text: "1"})
	if acts := m.Key(Key{Text: "a"}); len(acts) != 0 {
		t.Fatalf("a ran before the confirmation: %+v", acts)
	}
	acts := m.Key(Key{Text: "y"})
	if len(acts) != 1 {
		t.Fatalf("after y: %+v", acts)
	}
	run, ok := acts[0].(RunFleet)
	w := welcome()
	if !ok || run.Dir != w.Cwd || len(run.Args) != 2 || run.Args[0] != "apply" || !strings.HasPrefix(run.Args[1], w.SessionID+"/") {
		t.Errorf("a y → %+v, want fleet apply SESSION/WORKER in %s", acts[0], w.Cwd)
	}
	m.Note("f1", "fleet apply: applied 1 file")
	mustContain(t, screen(m, viewConversation, 100, 24), "console: fleet apply: applied 1 file")
	// n cancels.
	m.Key(Key{Text: "a"})
	if acts := m.Key(Key{Text: "n"}); len(acts) != 0 {
		t.Errorf("n still ran: %+v", acts)
	}
}

// The HOST column appears only when some worker runs on a worker host
// (every other golden has none and no such column); the selected remote
// worker's details say where it runs.
func TestHostColumnOnlyWithHosts(t *testing.T) {
	m, _ := loaded(false)
	m.Resize(120, 40)
	mustNotContain(t, m.View(), "HOST")

	fs := fleetState()
	fs.Workers[0].Host = "gpu-1"
	m.Apply("f1", fs, false)
	s := golden(t, "workers_hosts_120x40", m, 120, 40)
	header := lines(s)[3]
	if a, h, tk := strings.Index(header, "AGENT"), strings.Index(header, "HOST"), strings.Index(header, "TASK"); !(a >= 0 && a < h && h < tk) {
		t.Errorf("header %q: want AGENT, HOST, TASK in that order", header)
	}
	mustContain(t, s, "coder  gpu-1 t-2", "coder · on gpu-1 · task t-2")
	for _, w := range []int{80, 60, 45, 30} { // narrower: NAME, STATUS and TASK stay
		m.Resize(w, 24)
		header := lines(m.View())[3]
		for _, col := range []string{"NAME", "STATUS", "TASK"} {
			if !strings.Contains(header, col) {
				t.Errorf("width %d: header %q lacks %s", w, header, col)
			}
		}
	}
}

// TestWorkerStateShown: a worker's state says more than its status — one
// waiting for the operator reads "needs you" in the table, and its panel
// gives the state with its reason and its memory.
func TestWorkerStateShown(t *testing.T) {
	m, _ := loaded(false)
	fs := fleetState()
	fs.Workers[0].State = protocol.WorkerStateWaitingForOperator
	fs.Workers[0].StateReason = "a request of its waits for an answer"
	fs.Workers[0].RSSBytes = 512 << 20
	fs.Workers[1].Status, fs.Workers[1].State, fs.Workers[1].StateReason = "failed", protocol.WorkerStateFailed, "stopped: its processes held 2100 MiB, over limits.workerMemoryMiB (2048 MiB)"
	m.Apply("f1", fs, false)
	s := screen(m, viewWorkers, 140, 40)
	mustContain(t, s, "needs you", "state waiting-for-operator: a request of its waits for an answer", "memory 512 MiB")
	press(m, "down")
	s = screen(m, viewWorkers, 140, 40)
	mustContain(t, s, "state failed: stopped: its processes held 2100 MiB")
}
