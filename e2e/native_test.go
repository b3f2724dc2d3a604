package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/client"
	"github.com/agents-fleet/fleet/e2e/e2etest"
	"github.com/agents-fleet/fleet/internal/testwait"
	"github.com/agents-fleet/fleet/protocol"
)

// rootJSON runs `fleet root ... --json` and decodes the result object.
func rootJSON(e *e2etest.Env, args ...string) (map[string]any, int) {
	e.T.Helper()
	out, errOut, code := e.Fleet("", append(append([]string{"root"}, args...), "--json")...)
	var res map[string]any
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		e.T.Fatalf("fleet root %v: exit %d, output %q, stderr %q", args, code, out, errOut)
	}
	return res, code
}

// The retry story of docs/native-roots.md, end to end through the CLI.
func TestNativeRootStoryFromTheCLI(t *testing.T) {
	e := e2etest.NewEnv(t)
	d := e.Start("--control-socket", "--native-root")
	c := d.Dial(protocol.ClientREPL, "op")
	s := e2etest.Watch(t, c)
	s.WaitFor("replayEnd", e2etest.IsType(protocol.TypeReplayEnd))

	roots, code := rootJSON(e, "list")
	list, _ := roots["roots"].([]any)
	if code != 0 || roots["kind"] != "roots" || len(list) != 1 {
		t.Fatalf("list: %d %v", code, roots)
	}
	root := list[0].(map[string]any)["id"].(string)

	// Pause, then the operator's retry of the same operation: same receipt.
	first, code := rootJSON(e, "pause", root, "--operation-id", "op-1", "--revision", "1")
	if code != 0 || first["kind"] != "receipt" || first["acknowledgmentOnly"] != true {
		t.Fatalf("pause: %d %v", code, first)
	}
	again, code := rootJSON(e, "pause", root, "--operation-id", "op-1", "--revision", "1")
	if code != 0 || !jsonEqual(first["receipt"], again["receipt"]) {
		t.Fatalf("retry gave another receipt:\n%v\n%v", first, again)
	}
	// A fresh operation at the stale revision is a conflict (exit 3).
	conflict, code := rootJSON(e, "stop", root, "--operation-id", "op-2", "--revision", "1")
	if code != 3 || conflict["code"] != "revision_conflict" {
		t.Fatalf("stale revision: %d %v", code, conflict)
	}
	// The same id with another body is refused.
	reused, code := rootJSON(e, "stop", root, "--operation-id", "op-1", "--revision", "2")
	if code != 3 || reused["code"] != "operation_id_reused" {
		t.Fatalf("reused id: %d %v", code, reused)
	}

	// While paused, a task is reserved but does not start. The fleet
	// reserves it in the root after the prompt, on its own goroutine: wait
	// for the reservation, not for the prompt to have been sent.
	c.Prompt("$ echo after-resume")
	st := waitRoot(e, root, "the task reserved in the root", func(r map[string]any) bool {
		tasks, _ := r["tasks"].([]any)
		return len(tasks) > 0
	})
	if r := st["root"].(map[string]any); r["intent"] != "pause" || len(r["tasks"].([]any)) != 1 ||
		r["tasks"].([]any)[0].(map[string]any)["state"] != "reserved" {
		t.Fatalf("status while paused: %v", st)
	}
	if _, code := rootJSON(e, "resume", root, "--operation-id", "op-3", "--revision", "2"); code != 0 {
		t.Fatal("resume failed")
	}
	s.WaitFor("task ran after resume", func(m protocol.Message) bool {
		tr, ok := m.(*protocol.Transcript)
		return ok && tr.Text == "after-resume"
	})

	// A failed task holds itself; a made-up proof is refused.
	c.Prompt("$ exit 5")
	s.WaitFor("t2 failed", func(m protocol.Message) bool {
		h, ok := m.(*protocol.HubEvent)
		return ok && h.Kind == "failed" && strings.Contains(h.Text, "t2")
	})
	// The hold is recorded when the fleet settles the task in the root,
	// which may come after the hub event.
	st = waitRoot(e, root, "a hold on the failed task", func(r map[string]any) bool {
		hs, _ := r["holds"].([]any)
		return len(hs) > 0
	})
	hs := st["root"].(map[string]any)["holds"].([]any)
	hold := hs[0].(map[string]any)
	if len(hs) != 1 || hold["taskId"] != "t2" {
		t.Fatalf("not one hold on the failed task: %v", st)
	}
	for _, proof := range []string{"ws-made-up", "/etc/passwd", "0123456789abcdef0123456789abcdef01234567"} {
		if res, code := rootJSON(e, "reconcile", root, "--proof", proof, "--operation-id", "op-r-"+proof[:3], "--revision", "3"); code != 1 || res["code"] != "invalid_proof" {
			t.Fatalf("proof %q: %d %v", proof, code, res)
		}
	}
	if res, code := rootJSON(e, "release", root, "--hold-hash", hold["holdHash"].(string), "--operation-id", "op-4", "--revision", "3"); code != 0 || res["kind"] != "receipt" {
		t.Fatalf("release: %d %v", code, res)
	}
	d.Stop()

	// The mode is kept with the session; the opposite flag is refused.
	out, _, _ := e.Fleet("", "sessions", "--json")
	var sessions []struct {
		ID   string `json:"id"`
		Mode string `json:"mode"`
	}
	json.Unmarshal([]byte(out), &sessions)
	if len(sessions) != 1 || sessions[0].Mode != "native" {
		t.Fatalf("sessions %s", out)
	}
	if _, errOut, code := e.Fleet("", "run", "--headless", "--resume", sessions[0].ID, "--no-native-root"); code == 0 || !strings.Contains(errOut, "the session is native") {
		t.Fatalf("opposite flag: %d %s", code, errOut)
	}
	d2 := e.Start("--control-socket", "--resume", sessions[0].ID)
	res, code := rootJSON(e, "status", root)
	if code != 0 || res["root"].(map[string]any)["revision"].(float64) != 4 {
		t.Fatalf("after resume: %d %v", code, res)
	}
	d2.Stop()
}

// waitRoot polls `fleet root status` until cond holds for the root's
// status, and returns the whole result. The bound is for a loaded machine:
// it is only reached when the condition never comes.
func waitRoot(e *e2etest.Env, root, what string, cond func(root map[string]any) bool) map[string]any {
	e.T.Helper()
	var st map[string]any
	var code int
	if !testwait.Until(time.Minute, func() bool {
		st, code = rootJSON(e, "status", root)
		r, _ := st["root"].(map[string]any)
		return code == 0 && r != nil && cond(r)
	}) {
		e.T.Fatalf("waited a minute for %s; the last status: %d %v", what, code, st)
	}
	return st
}

func TestLegacySessionRefusesNativeRequests(t *testing.T) {
	e := e2etest.NewEnv(t)
	d := e.Start("--control-socket")
	res, code := rootJSON(e, "list")
	if code != 1 || res["code"] != "native_mode_required" {
		t.Fatalf("%d %v", code, res)
	}
	d.Stop()
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// nativeCall sends one nativeRoot request on a fresh connection and waits
// for its result.
func nativeCall(d *e2etest.Daemon, req map[string]any) (protocol.NativeResult, error) {
	c, err := client.Dial(context.Background(), d.Desc, client.Options{ClientKind: protocol.ClientBot, ClientName: "racer"})
	if err != nil {
		return protocol.NativeResult{}, err
	}
	defer c.Close()
	body, _ := json.Marshal(req)
	id := client.NewRequestID()
	if err := c.Send(&protocol.NativeRoot{ID: id, Request: body}); err != nil {
		return protocol.NativeResult{}, err
	}
	for {
		m, _, _, err := c.Next()
		if err != nil {
			return protocol.NativeResult{}, err
		}
		if r, ok := m.(*protocol.NativeRootResult); ok && r.ID != nil && *r.ID == id {
			return r.Result, nil
		}
	}
}

func TestFiftyClientsRaceOneRevision(t *testing.T) {
	e := e2etest.NewEnv(t)
	d := e.Start("--control-socket", "--native-root")
	list, err := nativeCall(d, map[string]any{"action": "list"})
	if err != nil || len(list.Roots) != 1 {
		t.Fatalf("%v %+v", err, list)
	}
	root := list.Roots[0].ID
	results := make(chan protocol.NativeResult, 50)
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := nativeCall(d, map[string]any{"action": "pause", "rootId": root, "operationId": fmt.Sprintf("race-%d", i), "expectedRevision": 1})
			if err != nil {
				t.Error(err)
				return
			}
			results <- r
		}()
	}
	wg.Wait()
	close(results)
	won, conflicts := 0, 0
	for r := range results {
		switch {
		case r.Kind == protocol.NativeKindReceipt && r.Receipt.Revision == 2:
			won++
		case r.Code == "revision_conflict":
			conflicts++
		default:
			t.Errorf("unexpected %+v", r)
		}
	}
	if won != 1 || conflicts != 49 {
		t.Fatalf("won %d, conflicts %d", won, conflicts)
	}
	// Then a chain: revisions gap-free.
	for rev := int64(2); rev < 12; rev++ {
		action := "resume"
		if rev%2 == 1 {
			action = "pause"
		}
		r, err := nativeCall(d, map[string]any{"action": action, "rootId": root, "operationId": fmt.Sprintf("chain-%d", rev), "expectedRevision": rev})
		if err != nil || r.Receipt == nil || r.Receipt.Revision != rev+1 {
			t.Fatalf("rev %d: %v %+v", rev, err, r)
		}
	}
	d.Stop()
}

// kill -9 in the middle of a storm of mutations from several clients: after
// a restart every acknowledged receipt is there, and the root's revision is
// exactly 1 + the receipts it holds.
func TestKill9DuringMutationStorm(t *testing.T) {
	e := e2etest.NewEnv(t)
	d := e.Start("--control-socket", "--native-root")
	list, _ := nativeCall(d, map[string]any{"action": "list"})
	root := list.Roots[0].ID
	var mu sync.Mutex
	type ack struct {
		body     map[string]any
		revision int64
	}
	acked := map[string]ack{} // operationId → its request and acknowledged revision
	stop := make(chan struct{})
	wg := mutationStorm(d, root, "storm", 4, stop, func(op string, body map[string]any, rev int64) {
		mu.Lock()
		acked[op] = ack{body, rev}
		mu.Unlock()
	})
	// Kill after 40 acknowledgements, or after 10 s with at least 10 (a
	// loaded machine acknowledges slower); give up only after two minutes.
	start := time.Now()
	var n int
	if !testwait.Until(2*time.Minute, func() bool {
		mu.Lock()
		n = len(acked)
		mu.Unlock()
		return n >= 40 || n >= 10 && time.Since(start) > 10*time.Second
	}) {
		t.Fatalf("only %d acknowledged in two minutes", n)
	}
	d.Cmd.Process.Signal(syscall.SIGKILL)
	<-d.Done
	close(stop)
	wg.Wait()

	out, _, _ := e.Fleet("", "sessions", "--json")
	var sessions []struct{ ID string }
	json.Unmarshal([]byte(out), &sessions)
	d2 := e.Start("--control-socket", "--resume", sessions[0].ID)
	// Every acknowledged operation, retried with its original body, returns
	// its stored receipt with the revision it was acknowledged at.
	for op, a := range acked {
		r, err := nativeCall(d2, a.body)
		if err != nil || r.Receipt == nil || r.Receipt.OperationID != op || r.Receipt.Revision != a.revision {
			t.Fatalf("acknowledged %s at revision %d; after the restart: %v %+v", op, a.revision, err, r)
		}
	}
	st, err := nativeCall(d2, map[string]any{"action": "status", "rootId": root})
	if err != nil || st.Root == nil {
		t.Fatalf("%v %+v", err, st)
	}
	maxAcked := int64(0)
	for _, a := range acked {
		maxAcked = max(maxAcked, a.revision)
	}
	if st.Root.Revision < maxAcked {
		t.Fatalf("root at revision %d after restart, but revision %d was acknowledged", st.Root.Revision, maxAcked)
	}
	d2.Stop()
}

// An operator's connection drops right after sending a mutation: whether the
// fleet committed it or not, retrying with the original operation id and
// body gives one receipt and one effect.
func TestRetryAfterDroppedConnection(t *testing.T) {
	e := e2etest.NewEnv(t)
	d := e.Start("--control-socket", "--native-root")
	list, _ := nativeCall(d, map[string]any{"action": "list"})
	root := list.Roots[0].ID
	body := map[string]any{"action": "stop", "rootId": root, "operationId": "op-drop", "expectedRevision": 1}

	// Send and hang up without reading the answer.
	c, err := client.Dial(context.Background(), d.Desc, client.Options{ClientKind: protocol.ClientBot, ClientName: "flaky"})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(body)
	c.Send(&protocol.NativeRoot{ID: "lost", Request: raw})
	c.Close()

	first, err := nativeCall(d, body)
	if err != nil || first.Receipt == nil || first.Receipt.Revision != 2 {
		t.Fatalf("first retry: %v %+v", err, first)
	}
	second, _ := nativeCall(d, body)
	if second.Receipt == nil || *second.Receipt != *first.Receipt {
		t.Fatalf("second retry: %+v vs %+v", second.Receipt, first.Receipt)
	}
	st, _ := nativeCall(d, map[string]any{"action": "status", "rootId": root})
	if st.Root.Revision != 2 || st.Root.Intent != "stop" {
		t.Fatalf("one effect expected: %+v", st.Root)
	}
	d.Stop()
}

// mutationStorm runs clients goroutines that each read the root's status
// and toggle its intent (pause ⇄ resume) at the revision they saw, until
// stop closes or the daemon goes away. acked is called for every receipt.
func mutationStorm(d *e2etest.Daemon, root, prefix string, clients int, stop <-chan struct{}, acked func(op string, body map[string]any, revision int64)) *sync.WaitGroup {
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				st, err := nativeCall(d, map[string]any{"action": "status", "rootId": root})
				if err != nil || st.Root == nil {
					return // the daemon is gone
				}
				action := "pause"
				if st.Root.Intent == "pause" {
					action = "resume"
				}
				op := fmt.Sprintf("%s-%d-%d", prefix, c, i)
				body := map[string]any{"action": action, "rootId": root, "operationId": op, "expectedRevision": st.Root.Revision}
				r, err := nativeCall(d, body)
				if err != nil {
					return
				}
				if r.Receipt != nil {
					acked(op, body, r.Receipt.Revision)
				}
			}
		}()
	}
	return &wg
}
