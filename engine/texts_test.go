package engine

import (
	"strings"
	"testing"

	"github.com/agents-fleet/fleet/protocol"
	"github.com/agents-fleet/fleet/provider"
	"github.com/agents-fleet/fleet/provider/local"
)

// worstCommand returns a shell command whose prompt ("$ " + it) is as
// long as a prompt may be once JSON-encoded (protocol.MaxPromptText), made
// of the characters escaping grows the most: quotes, backslashes, control
// characters, U+2028/9, invalid UTF-8 and multi-byte runes, inside single
// quotes (so the shell runs it), then word.
func worstCommand(word string) string {
	head, tail := "echo start; : '", "'; echo "+word
	pieces := []string{`"`, `\`, "\x01", "\x1f", "\u2028", "\u2029", "\xff", "é", "中", "🚀", "<&>"}
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
	return head + b.String() + tail
}

func marked(s string) bool { return strings.Contains(s, "… [truncated ") }

// TestPromptAtTheLimitDerivesFramesThatFit: a prompt as long as the
// control server admits, of the worst characters, becomes a task whose
// every frame (the recorder encodes each one, so one over the frame cap
// fails the test) is far below the cap, its long texts cut and marked; the
// command, longer than the kernel lets an argument be, runs.
func TestPromptAtTheLimitDerivesFramesThatFit(t *testing.T) {
	policy, err := provider.NewPolicy([]string{`\bconfirm-me\b`})
	if err != nil {
		t.Fatal(err)
	}
	e, rec := newEngine(t, func(c *Config) { c.Provider = &local.Provider{Policy: policy} })
	cmd := worstCommand("confirm-me")
	if err := protocol.CheckPromptText("$ " + cmd); err != nil {
		t.Fatal(err)
	}
	e.Prompt("test", "$ "+cmd)
	req := rec.waitFor("confirm", func(m protocol.Message) bool { _, ok := m.(*protocol.ConfirmRequest); return ok }).(*protocol.ConfirmRequest)
	if protocol.EncodedLen(req.Summary) > maxRequestText || !marked(req.Summary) {
		t.Errorf("confirm summary of %d bytes", protocol.EncodedLen(req.Summary))
	}
	if err := e.AnswerConfirm(req.ID, true, "answered"); err != nil {
		t.Fatal(err)
	}
	rec.waitFor("t1 done", activity("task.updated", "t1 done"))
	rec.waitFor("its last line", transcript("confirm-me"))

	sawSubject := false
	for _, m := range rec.all() {
		switch m := m.(type) {
		case *protocol.HubEvent:
			if protocol.EncodedLen(m.Text) > maxActivityText || m.Kind == "task.created" && !marked(m.Text) {
				t.Errorf("activity %s text of %d bytes", m.Kind, protocol.EncodedLen(m.Text))
			}
		case *protocol.FleetState:
			for _, it := range m.Tasks.Items {
				sawSubject = true
				if protocol.EncodedLen(it.Subject) > maxSubject || !marked(it.Subject) {
					t.Errorf("task subject of %d bytes", protocol.EncodedLen(it.Subject))
				}
			}
		case *protocol.ToolCall:
			if m.Phase == protocol.PhaseStart {
				c, _ := m.Input["command"].(string)
				if protocol.EncodedLen(m.Detail) > maxToolDetail || !marked(m.Detail) || protocol.EncodedLen(c) > maxToolInput || !marked(c) {
					t.Errorf("toolCall detail %d bytes, input command %d bytes", protocol.EncodedLen(m.Detail), protocol.EncodedLen(c))
				}
			}
		case *protocol.Reply:
			if protocol.EncodedLen(m.Text) > 2*maxSubject {
				t.Errorf("reply of %d bytes", protocol.EncodedLen(m.Text))
			}
		}
	}
	if !sawSubject {
		t.Error("no fleetState listed the task")
	}

	// /tasks and /pending list it cut too.
	e.Prompt("test", "/tasks")
	r := rec.waitFor("/tasks", func(m protocol.Message) bool {
		r, ok := m.(*protocol.Reply)
		return ok && strings.Contains(r.Text, "t1")
	}).(*protocol.Reply)
	if protocol.EncodedLen(r.Text) > 2*maxSubject || !marked(r.Text) {
		t.Errorf("/tasks reply of %d bytes", protocol.EncodedLen(r.Text))
	}
}

func TestCutInputLeavesTheOriginal(t *testing.T) {
	long := strings.Repeat("\x00", maxToolInput)
	in := map[string]any{"a": long, "b": "short", "n": 1.5, "m": map[string]any{"c": long}, "l": []any{"x", long}}
	out := cutInput(in)
	if in["a"] != long || in["m"].(map[string]any)["c"] != long || in["l"].([]any)[1] != long {
		t.Fatal("cutInput wrote to its argument")
	}
	if !marked(out["a"].(string)) || !marked(out["m"].(map[string]any)["c"].(string)) || !marked(out["l"].([]any)[1].(string)) ||
		out["b"] != "short" || out["n"] != 1.5 || out["l"].([]any)[0] != "x" {
		t.Fatalf("%v", out)
	}
	small := map[string]any{"a": "x"}
	if got := cutInput(small); len(got) != 1 || got["a"] != "x" {
		t.Fatal(got)
	}
}
