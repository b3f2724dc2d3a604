package claude

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/internal/modelmock"
	"github.com/agents-fleet/fleet/provider"
	"github.com/agents-fleet/fleet/provider/agentcli/agentclitest"
)

// Bounds for the real CLI on a loaded machine under -race: a turn against
// the scripted endpoint takes about a second when idle.
const (
	turnBound  = 90 * time.Second
	startLimit = 90 * time.Second
)

// harness is one scripted endpoint, the real CLI, and a private HOME and
// working directory.
type harness struct {
	*agentclitest.Rig
	t *testing.T
}

func newHarness(t *testing.T, rules ...modelmock.Rule) *harness {
	t.Helper()
	hs := &harness{agentclitest.NewRig(t, "claude", modelmock.Script{Rules: rules}), t}
	hs.Env = append(hs.Env,
		"TMPDIR="+os.TempDir(),
		"ANTHROPIC_BASE_URL="+hs.Srv.URL(),
		"ANTHROPIC_API_KEY=sk-test",
		"DISABLE_TELEMETRY=1",
		"DISABLE_ERROR_REPORTING=1",
	)
	return hs
}

// start starts a session and closes it at cleanup.
func (hs *harness) start(spec provider.Spec, h *agentclitest.Host, opts provider.Options) *session {
	hs.t.Helper()
	if opts.Path == "" {
		opts.Path = hs.CLI
	}
	ctx, cancel := context.WithTimeout(context.Background(), startLimit)
	defer cancel()
	ps, err := New(opts).Start(ctx, spec, h)
	if err != nil {
		hs.t.Fatalf("Start: %v", err)
	}
	s := ps.(*session)
	hs.t.Cleanup(func() { s.Close() })
	return s
}

func send(t *testing.T, s *session, text string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Send(ctx, provider.Turn{Text: text}); err != nil {
		t.Fatalf("Send(%q): %v", text, err)
	}
}

// requestsOf is the endpoint's requests answered by rule.
func requestsOf(srv *modelmock.Server, rule string) []modelmock.Request {
	var out []modelmock.Request
	for _, r := range srv.Requests() {
		if r.Rule == rule {
			out = append(out, r)
		}
	}
	return out
}

func bash(cmd string) modelmock.ToolCall {
	return modelmock.ToolCall{Name: "Bash", Input: map[string]any{"command": cmd, "description": "run " + cmd}}
}

// TestTurnsAndResume: a turn whose shell and Write calls need permission
// (allowed), a second turn on the same process, then a resumed session
// that sends the first turns' history.
func TestTurnsAndResume(t *testing.T) {
	hs := newHarness(t)
	newFile := filepath.Join(hs.Dir, "new.txt")
	hs.Srv.SetScript(modelmock.Script{Rules: []modelmock.Rule{
		{Name: "first", Match: "write x please", Turns: []modelmock.Turn{
			{Reasoning: "thinking first", Text: "I'll run it", ToolCalls: []modelmock.ToolCall{bash("echo hi > x.txt")},
				Usage: modelmock.Usage{Input: 100, Output: 20, CacheRead: 7, CacheWrite: 3}},
			{ToolCalls: []modelmock.ToolCall{{Name: "Write", Input: map[string]any{"file_path": newFile, "content": "hello\n"}}},
				Usage: modelmock.Usage{Input: 110, Output: 10}},
			{Text: "done", Usage: modelmock.Usage{Input: 130, Output: 5}},
		}},
		{Name: "second", Match: "now edit it", Turns: []modelmock.Turn{
			{ToolCalls: []modelmock.ToolCall{{Name: "Edit", Input: map[string]any{"file_path": newFile, "old_string": "hello", "new_string": "bye"}}},
				Usage: modelmock.Usage{Input: 150, Output: 12}},
			{Text: "edited", Usage: modelmock.Usage{Input: 200, Output: 9}},
		}},
		{Name: "third", Match: "what did we do", Turns: []modelmock.Turn{
			{Text: "we wrote files", Usage: modelmock.Usage{Input: 50, Output: 5}},
		}},
	}})
	h := newHost()
	s := hs.start(hs.Spec(), h, provider.Options{})

	send(t, s, "write x please")
	if te := h.TurnEnded(t, 1, turnBound); te.Err != nil || te.Interrupted || te.Result != "done" {
		t.Fatalf("turn 1 ended with %+v", te)
	}
	if b, err := os.ReadFile(filepath.Join(hs.Dir, "x.txt")); err != nil || string(b) != "hi\n" {
		t.Fatalf("x.txt = %q, %v; want the allowed command to have run", b, err)
	}
	evs, perms := h.Snapshot()
	if len(perms) != 2 || perms[0].Tool != "Bash" || perms[0].Input["command"] != "echo hi > x.txt" || perms[1].Tool != "Write" {
		t.Fatalf("permission requests = %+v; want Bash with the command, then Write", perms)
	}
	if perms[0].Description == "" || perms[0].ToolCallID == "" || len(perms[0].Options) < 2 {
		t.Fatalf("permission request lacks the CLI's description, call id or options: %+v", perms[0])
	}
	want := []string{"SessionStarted", "Text", "Text", "ToolStarted", "ToolCompleted", "ToolStarted", "ToolCompleted", "FileEdited", "Text", "Usage", "TurnEnded"}
	if got := agentclitest.Kinds(evs); !agentclitest.InOrder(got, want) {
		t.Fatalf("event order %v; want %v as a subsequence\n%s", got, want, agentclitest.Dump(evs))
	}
	texts := agentclitest.All[provider.Text](evs)
	if len(texts) != 3 || !texts[0].Reasoning || texts[0].Text != "thinking first" || texts[1].Text != "I'll run it" || texts[2].Text != "done" {
		t.Fatalf("texts = %+v", texts)
	}
	started := agentclitest.All[provider.ToolStarted](evs)
	done := agentclitest.All[provider.ToolCompleted](evs)
	if len(started) != 2 || started[0].Name != "Bash" || started[0].Detail != "echo hi > x.txt" || started[0].ID == "" || started[0].ID != perms[0].ToolCallID {
		t.Fatalf("tool starts = %+v", started)
	}
	if len(done) != 2 || done[0].ID != started[0].ID || done[0].IsError || done[1].Name != "Write" || done[0].Duration <= 0 {
		t.Fatalf("tool completions = %+v", done)
	}
	edits := agentclitest.All[provider.FileEdited](evs)
	if len(edits) != 1 || edits[0] != (provider.FileEdited{Path: newFile, Change: provider.Created, Tool: "Write"}) {
		t.Fatalf("file edits = %+v", edits)
	}
	// One Usage per response (its input side, as it arrives) and one
	// with the result (the output): together exactly the turn's.
	if ev := agentclitest.All[provider.Usage](evs); len(ev) != 4 || ev[0].InputTokens != 100 || ev[0].OutputTokens != 0 || ev[3].OutputTokens != 35 {
		t.Fatalf("usage events = %+v; want one per response, then the result's", ev)
	}
	usage := agentclitest.TurnUsage(evs)
	if len(usage) != 1 {
		t.Fatalf("turn usage = %+v; want one turn", usage)
	}
	u := usage[0]
	if u.InputTokens != 340 || u.OutputTokens != 35 || u.CacheReadTokens != 7 || u.CacheWriteTokens != 3 {
		t.Fatalf("usage = %+v; want exactly what the script reported (340 in, 35 out, 7 cache read, 3 cache write)", u)
	}
	if u.ContextTokens != 130 || u.ContextWindow <= 0 {
		t.Fatalf("usage context = %d of %d; want the last request's 130 of a known window", u.ContextTokens, u.ContextWindow)
	}
	ss := agentclitest.All[provider.SessionStarted](evs)
	id := s.ResumeID()
	if len(ss) != 1 || ss[0].ID == "" || ss[0].ID != id || ss[0].Model == "" {
		t.Fatalf("SessionStarted = %+v, ResumeID %q", ss, id)
	}

	// A second turn on the same process: its usage is its own, not the
	// session's running total.
	send(t, s, "now edit it")
	if te := h.TurnEnded(t, 2, turnBound); te.Err != nil || te.Result != "edited" {
		t.Fatalf("turn 2 ended with %+v", te)
	}
	evs, _ = h.Snapshot()
	if b, _ := os.ReadFile(newFile); string(b) != "bye\n" {
		t.Fatalf("new.txt = %q after the Edit", b)
	}
	edits = agentclitest.All[provider.FileEdited](evs)
	if len(edits) != 2 || edits[1] != (provider.FileEdited{Path: newFile, Change: provider.Edited, Tool: "Edit"}) {
		t.Fatalf("file edits = %+v", edits)
	}
	usage = agentclitest.TurnUsage(evs)
	if len(usage) != 2 || usage[1].InputTokens != 350 || usage[1].OutputTokens != 21 {
		t.Fatalf("turn 2 usage = %+v; want exactly 350 in, 21 out", usage)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s.Err() != nil {
		t.Fatalf("Err after a clean Close = %v", s.Err())
	}

	// Resume: the endpoint sees the first session's history.
	h2 := newHost()
	spec := hs.Spec()
	spec.ResumeID = id
	s2 := hs.start(spec, h2, provider.Options{})
	send(t, s2, "what did we do")
	if te := h2.TurnEnded(t, 1, turnBound); te.Err != nil || te.Result != "we wrote files" {
		t.Fatalf("resumed turn ended with %+v", te)
	}
	reqs := requestsOf(hs.Srv, "third")
	if len(reqs) != 1 {
		t.Fatalf("requests for the resumed turn: %d", len(reqs))
	}
	body := string(reqs[0].Body)
	for _, w := range []string{"write x please", "now edit it", "I'll run it", "edited"} {
		if !strings.Contains(body, w) {
			t.Fatalf("the resumed request does not carry %q from the first session's history", w)
		}
	}
	evs2, _ := h2.Snapshot()
	if got := agentclitest.All[provider.SessionStarted](evs2); len(got) != 1 || got[0].ID != id || s2.ResumeID() != id {
		t.Fatalf("resumed session id = %+v / %q; want %q", got, s2.ResumeID(), id)
	}
}

// TestDeny: the denied command does not run and the model sees the
// operator's message.
func TestDeny(t *testing.T) {
	hs := newHarness(t, modelmock.Rule{Name: "deny", Match: "write y please", Turns: []modelmock.Turn{
		{ToolCalls: []modelmock.ToolCall{bash("echo hi > y.txt")}},
		{Text: "ok, not writing"},
	}})
	h := newHost()
	h.Decide = func(ctx context.Context, r provider.PermissionRequest) (provider.Decision, error) {
		return provider.Decision{Allow: false, OptionID: optDeny, Message: "not today"}, nil
	}
	s := hs.start(hs.Spec(), h, provider.Options{})
	send(t, s, "write y please")
	if te := h.TurnEnded(t, 1, turnBound); te.Err != nil || te.Result != "ok, not writing" {
		t.Fatalf("turn ended with %+v", te)
	}
	if _, err := os.Stat(filepath.Join(hs.Dir, "y.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("y.txt exists after the denial (%v)", err)
	}
	evs, perms := h.Snapshot()
	if len(perms) != 1 || perms[0].Input["command"] != "echo hi > y.txt" {
		t.Fatalf("permission requests = %+v", perms)
	}
	done := agentclitest.All[provider.ToolCompleted](evs)
	if len(done) != 1 || !done[0].IsError || !strings.Contains(done[0].Result, "not today") {
		t.Fatalf("tool completions = %+v; want the denial", done)
	}
	reqs := requestsOf(hs.Srv, "deny")
	if len(reqs) != 2 || !strings.Contains(string(reqs[1].Body), "not today") {
		t.Fatalf("the model was not told of the denial (%d requests)", len(reqs))
	}
}

// TestAllowForSession: the allow-for-this-session option answers with the
// CLI's suggested rules scoped to the session, so the same command is not
// asked about again, and nothing is written into the worktree.
func TestAllowForSession(t *testing.T) {
	hs := newHarness(t, modelmock.Rule{Name: "touch", Match: "touch please", Turns: []modelmock.Turn{
		{ToolCalls: []modelmock.ToolCall{bash("touch y.txt")}},
		{Text: "touched"},
	}})
	h := newHost()
	h.Decide = func(ctx context.Context, r provider.PermissionRequest) (provider.Decision, error) {
		for _, o := range r.Options {
			if o.Kind == provider.AllowAlways {
				return provider.Decision{Allow: true, OptionID: o.ID}, nil
			}
		}
		return provider.Decision{}, errors.New("no allow-always option offered")
	}
	s := hs.start(hs.Spec(), h, provider.Options{})
	send(t, s, "touch please")
	if te := h.TurnEnded(t, 1, turnBound); te.Err != nil {
		t.Fatalf("turn 1: %v", te.Err)
	}
	send(t, s, "touch please, again")
	if te := h.TurnEnded(t, 2, turnBound); te.Err != nil {
		t.Fatalf("turn 2: %v", te.Err)
	}
	_, perms := h.Snapshot()
	if len(perms) != 1 {
		t.Fatalf("permission requests = %d; want 1 (the second call allowed by the session rule)", len(perms))
	}
	if !strings.Contains(perms[0].Options[1].Label, "Bash(touch y.txt)") {
		t.Fatalf("allow-always label %q does not say what it allows", perms[0].Options[1].Label)
	}
	if _, err := os.Stat(filepath.Join(hs.Dir, ".claude")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the session rule was written into the worktree (%v)", err)
	}
}

// markedSleep reports whether a process of the tree runs `sleep <arg>`.
func markedSleep(s *session, arg string) bool {
	for _, pid := range agentclitest.Alive(s.cli) {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if string(b) == "sleep\x00"+arg+"\x00" {
			return true
		}
	}
	return false
}

// TestInterrupt: an interrupt during `sleep 300` ends the turn as
// interrupted and the CLI kills the command; a detached process the turn
// left behind goes at Close, and nothing of the tree is left.
func TestInterrupt(t *testing.T) {
	hs := newHarness(t,
		modelmock.Rule{Name: "detach", Match: "detach please", Turns: []modelmock.Turn{
			{ToolCalls: []modelmock.ToolCall{bash("setsid sleep 301 > /dev/null 2>&1 < /dev/null &")}},
			{Text: "detached"},
		}},
		modelmock.Rule{Name: "sleep", Match: "sleep please", Turns: []modelmock.Turn{
			{Text: "sleeping", ToolCalls: []modelmock.ToolCall{bash("sleep 300")}},
			{Text: "slept"},
		}},
	)
	h := newHost()
	s := hs.start(hs.Spec(), h, provider.Options{})

	send(t, s, "detach please")
	if te := h.TurnEnded(t, 1, turnBound); te.Err != nil {
		t.Fatalf("turn 1: %v", te.Err)
	}
	agentclitest.Eventually(t, 30*time.Second, "the detached sleep 301", func() bool { return markedSleep(s, "301") })

	send(t, s, "sleep please")
	agentclitest.Eventually(t, turnBound, "sleep 300 running", func() bool { return markedSleep(s, "300") })
	ictx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Interrupt(ictx); err != nil {
		t.Fatal(err)
	}
	te := h.TurnEnded(t, 2, 30*time.Second)
	if !te.Interrupted || te.Err != nil {
		t.Fatalf("interrupted turn ended with %+v", te)
	}
	agentclitest.Eventually(t, 30*time.Second, "the CLI to kill sleep 300", func() bool { return !markedSleep(s, "300") })
	evs, _ := h.Snapshot()
	done := agentclitest.All[provider.ToolCompleted](evs)
	if len(done) != 2 || !done[1].IsError {
		t.Fatalf("tool completions = %+v; want the interrupted call completed as an error", done)
	}

	// The session goes on after an interrupt.
	// (Claude puts this prompt into the user message that carries the
	// interrupted call's tool_result, and modelmock routes by the newest
	// user message without one, so the answer comes from the "sleep" rule:
	// only the turn's success is checked.)
	send(t, s, "and now")
	if te := h.TurnEnded(t, 3, turnBound); te.Err != nil || te.Interrupted {
		t.Fatalf("turn after the interrupt: %+v", te)
	}
	if !markedSleep(s, "301") {
		t.Fatal("the detached sleep 301 is gone before Close; the test no longer shows that Close ends it")
	}
	s.Close()
	if left := agentclitest.Alive(s.cli); len(left) != 0 {
		t.Fatalf("after Close, processes of the tree are alive: %v (%s)", left, agentclitest.Cmdlines(left))
	}
}

// TestCloseDuringTurn: Close interrupts the running turn, which ends with
// TurnEnded, and leaves nothing behind.
func TestCloseDuringTurn(t *testing.T) {
	hs := newHarness(t, modelmock.Rule{Name: "sleep", Match: "sleep please", Turns: []modelmock.Turn{
		{ToolCalls: []modelmock.ToolCall{bash("sleep 300")}},
		{Text: "slept"},
	}})
	h := newHost()
	s := hs.start(hs.Spec(), h, provider.Options{})
	send(t, s, "sleep please")
	agentclitest.Eventually(t, turnBound, "sleep 300 running", func() bool { return markedSleep(s, "300") })
	start := time.Now()
	s.Close()
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("Close took %v", d)
	}
	if te := h.TurnEnded(t, 1, time.Second); !te.Interrupted {
		t.Fatalf("turn ended with %+v; want Interrupted", te)
	}
	if left := agentclitest.Alive(s.cli); len(left) != 0 {
		t.Fatalf("after Close: %v (%s)", left, agentclitest.Cmdlines(left))
	}
	if err := s.Send(context.Background(), provider.Turn{Text: "x"}); !errors.Is(err, provider.ErrClosed) {
		t.Fatalf("Send after Close = %v", err)
	}
	if s.Err() != nil {
		t.Fatalf("Err after Close = %v", s.Err())
	}
}

// TestEndpointErrors: a 500, a 401 and a malformed stream each fail their
// turn in bounded time with the CLI's own error text; the session goes on.
func TestEndpointErrors(t *testing.T) {
	// Claude merges a prompt sent after a failed turn into the user
	// message of the failed prompt, so each request carries the prompts of
	// the failed turns before it: the rules go newest first.
	hs := newHarness(t,
		modelmock.Rule{Name: "ok", Match: "be fine", Turns: []modelmock.Turn{{Text: "fine"}}},
		modelmock.Rule{Name: "bad", Match: "fail with garbage", Turns: []modelmock.Turn{{Malformed: true}}},
		modelmock.Rule{Name: "401", Match: "fail with 401", Turns: []modelmock.Turn{{Status: 401, ErrorMessage: "scripted bad key"}}},
		modelmock.Rule{Name: "500", Match: "fail with 500", Turns: []modelmock.Turn{{Status: 500, ErrorMessage: "scripted overload"}}},
	)
	h := newHost()
	s := hs.start(hs.Spec(), h, provider.Options{})
	cases := []struct {
		prompt string
		want   []string
	}{
		{"fail with 500", []string{"500", "scripted overload"}},
		{"fail with 401", []string{"401", "scripted bad key"}},
		{"fail with garbage", nil},
	}
	for i, c := range cases {
		start := time.Now()
		send(t, s, c.prompt)
		te := h.TurnEnded(t, i+1, 60*time.Second)
		t.Logf("%s: %v after %v", c.prompt, te.Err, time.Since(start).Round(time.Millisecond))
		if te.Err == nil {
			t.Fatalf("%s: the turn succeeded", c.prompt)
		}
		msg := te.Err.Error()
		for _, w := range c.want {
			if !strings.Contains(msg, w) {
				t.Fatalf("%s: error %q lacks %q", c.prompt, msg, w)
			}
		}
		if strings.Contains(msg, "exit status") {
			t.Fatalf("%s: error %q is about the process, not the CLI's words", c.prompt, msg)
		}
	}
	evs, _ := h.Snapshot()
	notes := agentclitest.All[provider.Note](evs)
	if len(notes) == 0 || !strings.Contains(notes[0].Text, "500") {
		t.Fatalf("notes = %+v; want the CLI's retries reported", notes)
	}
	// The CLI's retry bound came from the adapter's default.
	if n := len(requestsOf(hs.Srv, "500")); n != 3 {
		t.Fatalf("the 500 was requested %d times; want 3 (CLAUDE_CODE_MAX_RETRIES=2)", n)
	}
	send(t, s, "be fine")
	if te := h.TurnEnded(t, 4, turnBound); te.Err != nil || te.Result != "fine" {
		t.Fatalf("turn after the errors: %+v", te)
	}
}

// TestUserRetryBound: a CLAUDE_CODE_MAX_RETRIES the user set is kept.
func TestUserRetryBound(t *testing.T) {
	hs := newHarness(t, modelmock.Rule{Name: "500", Match: "fail", Turns: []modelmock.Turn{{Status: 500}}})
	h := newHost()
	spec := hs.Spec()
	spec.Env = append(spec.Env, "CLAUDE_CODE_MAX_RETRIES=0")
	s := hs.start(spec, h, provider.Options{})
	send(t, s, "fail")
	if te := h.TurnEnded(t, 1, 60*time.Second); te.Err == nil {
		t.Fatal("the turn succeeded")
	}
	if n := len(requestsOf(hs.Srv, "500")); n != 1 {
		t.Fatalf("%d requests; want 1 with the user's CLAUDE_CODE_MAX_RETRIES=0", n)
	}
}

// TestAskUserQuestion: Claude's AskUserQuestion goes to Host.Ask, and the
// answer reaches the model.
func TestAskUserQuestion(t *testing.T) {
	hs := newHarness(t, modelmock.Rule{Name: "ask", Match: "ask me", Turns: []modelmock.Turn{
		{ToolCalls: []modelmock.ToolCall{{Name: "AskUserQuestion", Input: map[string]any{"questions": []any{map[string]any{
			"question": "Which env?", "header": "Env", "multiSelect": false,
			"options": []any{map[string]any{"label": "staging", "description": "test"}, map[string]any{"label": "prod", "description": "live"}},
		}}}}}},
		{Text: "thanks"},
	}})
	h := newHost()
	h.Answer = func(ctx context.Context, q provider.Question) (string, error) { return "prod", nil }
	s := hs.start(hs.Spec(), h, provider.Options{})
	send(t, s, "ask me")
	if te := h.TurnEnded(t, 1, turnBound); te.Err != nil {
		t.Fatalf("turn: %v", te.Err)
	}
	asked := h.Asked()
	_, perms := h.Snapshot()
	if len(perms) != 0 || len(asked) != 1 || asked[0].Text != "Which env?" || len(asked[0].Choices) != 2 || asked[0].Choices[1].Value != "prod" {
		t.Fatalf("asked %+v, permissions %+v", asked, perms)
	}
	reqs := requestsOf(hs.Srv, "ask")
	if len(reqs) != 2 || !strings.Contains(string(reqs[1].Body), `\"Which env?\"=\"prod\"`) {
		t.Fatalf("the model did not get the answer (%d requests)", len(reqs))
	}
}
