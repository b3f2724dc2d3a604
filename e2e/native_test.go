package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agents-fleet/fleet/protocol"
)

// rootJSON runs `fleet root ... --json` and decodes the result object.
func (e *env) rootJSON(args ...string) (map[string]any, int) {
	e.t.Helper()
	out, errOut, code := e.fleet("", append(append([]string{"root"}, args...), "--json")...)
	var res map[string]any
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		e.t.Fatalf("fleet root %v: exit %d, output %q, stderr %q", args, code, out, errOut)
	}
	return res, code
}

// The retry story of docs/native-roots.md, end to end through the CLI.
func TestNativeRootStoryFromTheCLI(t *testing.T) {
	e := newEnv(t)
	d := e.start("--control-socket", "--native-root")
	c := d.dial(protocol.ClientREPL, "op")
	s := watch(t, c)
	s.waitFor("replayEnd", isType(protocol.TypeReplayEnd))

	roots, code := e.rootJSON("list")
	list, _ := roots["roots"].([]any)
	if code != 0 || roots["kind"] != "roots" || len(list) != 1 {
		t.Fatalf("list: %d %v", code, roots)
	}
	root := list[0].(map[string]any)["id"].(string)

	// Pause, then the operator's retry of the same operation: same receipt.
	first, code := e.rootJSON("pause", root, "--operation-id", "op-1", "--revision", "1")
	if code != 0 || first["kind"] != "receipt" || first["acknowledgmentOnly"] != true {
		t.Fatalf("pause: %d %v", code, first)
	}
	again, code := e.rootJSON("pause", root, "--operation-id", "op-1", "--revision", "1")
	if code != 0 || !jsonEqual(first["receipt"], again["receipt"]) {
		t.Fatalf("retry gave another receipt:\n%v\n%v", first, again)
	}
	// A fresh operation at the stale revision is a conflict (exit 3).
	conflict, code := e.rootJSON("stop", root, "--operation-id", "op-2", "--revision", "1")
	if code != 3 || conflict["code"] != "revision_conflict" {
		t.Fatalf("stale revision: %d %v", code, conflict)
	}
	// The same id with another body is refused.
	reused, code := e.rootJSON("stop", root, "--operation-id", "op-1", "--revision", "2")
	if code != 3 || reused["code"] != "operation_id_reused" {
		t.Fatalf("reused id: %d %v", code, reused)
	}

	// While paused, a task is reserved but does not start.
	c.Prompt("$ echo after-resume")
	st, _ := e.rootJSON("status", root)
	if r := st["root"].(map[string]any); r["intent"] != "pause" || len(r["tasks"].([]any)) != 1 {
		t.Fatalf("status while paused: %v", st)
	}
	if _, code := e.rootJSON("resume", root, "--operation-id", "op-3", "--revision", "2"); code != 0 {
		t.Fatal("resume failed")
	}
	s.waitFor("task ran after resume", func(m protocol.Message) bool {
		tr, ok := m.(*protocol.Transcript)
		return ok && tr.Text == "after-resume"
	})

	// A failed task holds itself; a made-up proof is refused.
	c.Prompt("$ exit 5")
	s.waitFor("t2 failed", func(m protocol.Message) bool {
		h, ok := m.(*protocol.HubEvent)
		return ok && h.Kind == "failed" && strings.Contains(h.Text, "t2")
	})
	var hold map[string]any
	for range 100 {
		st, _ = e.rootJSON("status", root)
		if hs, _ := st["root"].(map[string]any)["holds"].([]any); len(hs) == 1 {
			hold = hs[0].(map[string]any)
			break
		}
	}
	if hold == nil || hold["taskId"] != "t2" {
		t.Fatalf("no hold on the failed task: %v", st)
	}
	for _, proof := range []string{"ws-made-up", "/etc/passwd", "0123456789abcdef0123456789abcdef01234567"} {
		if res, code := e.rootJSON("reconcile", root, "--proof", proof, "--operation-id", "op-r-"+proof[:3], "--revision", "3"); code != 1 || res["code"] != "invalid_proof" {
			t.Fatalf("proof %q: %d %v", proof, code, res)
		}
	}
	if res, code := e.rootJSON("release", root, "--hold-hash", hold["holdHash"].(string), "--operation-id", "op-4", "--revision", "3"); code != 0 || res["kind"] != "receipt" {
		t.Fatalf("release: %d %v", code, res)
	}
	d.stop()

	// The mode is kept with the session; the opposite flag is refused.
	out, _, _ := e.fleet("", "sessions", "--json")
	var sessions []struct {
		ID   string `json:"id"`
		Mode string `json:"mode"`
	}
	json.Unmarshal([]byte(out), &sessions)
	if len(sessions) != 1 || sessions[0].Mode != "native" {
		t.Fatalf("sessions %s", out)
	}
	if _, errOut, code := e.fleet("", "run", "--headless", "--resume", sessions[0].ID, "--no-native-root"); code == 0 || !strings.Contains(errOut, "the session is native") {
		t.Fatalf("opposite flag: %d %s", code, errOut)
	}
	d2 := e.start("--control-socket", "--resume", sessions[0].ID)
	res, code := e.rootJSON("status", root)
	if code != 0 || res["root"].(map[string]any)["revision"].(float64) != 4 {
		t.Fatalf("after resume: %d %v", code, res)
	}
	d2.stop()
}

func TestLegacySessionRefusesNativeRequests(t *testing.T) {
	e := newEnv(t)
	d := e.start("--control-socket")
	res, code := e.rootJSON("list")
	if code != 1 || res["code"] != "native_mode_required" {
		t.Fatalf("%d %v", code, res)
	}
	d.stop()
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}
