package codex

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agents-fleet/fleet/internal/modelmock"
	"github.com/agents-fleet/fleet/provider"
	"github.com/agents-fleet/fleet/provider/agentcli/agentclitest"
)

const addNotes = "*** Begin Patch\n*** Add File: notes.md\n+hello from codex\n*** End Patch"

// shellAndPatch runs a shell command, then adds a file with apply_patch,
// then answers; each request reports its own usage.
func shellAndPatch(match string) modelmock.Rule {
	return modelmock.Rule{Name: "work", Match: match, Turns: []modelmock.Turn{
		{Text: "I'll run it", ToolCalls: []modelmock.ToolCall{{Name: "exec_command", Input: map[string]any{"cmd": "echo hi > x.txt"}}},
			Usage: modelmock.Usage{Input: 100, Output: 20}},
		{Reasoning: "Now the notes.", ToolCalls: []modelmock.ToolCall{{Name: "apply_patch", Input: addNotes}},
			Usage: modelmock.Usage{Input: 110, Output: 10, CacheRead: 30}},
		{Text: "done", Usage: modelmock.Usage{Input: 130, Output: 5}},
	}}
}

var workUsage = provider.Usage{InputTokens: 340, OutputTokens: 35, CacheReadTokens: 30}

// (1) A shell command and a patch that need permission, allowed.
func TestTurnWithPermissionAllowed(t *testing.T) {
	r := newRig(t, modelmock.Script{Rules: []modelmock.Rule{shellAndPatch("do the work")}})
	h := agentclitest.NewHost(allow)
	s := r.start(t, r.Spec(), h)
	send(t, s, "do the work")
	evs := h.WaitTurns(t, 1, wait)
	_, perms := h.Snapshot()

	te := agentclitest.All[provider.TurnEnded](evs)[0]
	if te.Err != nil || te.Interrupted || te.Result != "done" {
		t.Fatalf("TurnEnded = %+v, want success with result done", te)
	}
	if len(perms) != 2 {
		t.Fatalf("Permission called %d times, want 2 (command, patch): %+v", len(perms), perms)
	}
	if p := perms[0]; p.Tool != "exec_command" || !strings.Contains(p.Input["command"].(string), "echo hi > x.txt") || len(p.Options) == 0 {
		t.Errorf("first permission = %+v, want exec_command with the command and options", p)
	}
	if p := perms[1]; p.Tool != "apply_patch" || !strings.Contains(strings.ToLower(fmtAny(p.Input["changes"])), "notes.md") {
		t.Errorf("second permission = %+v, want apply_patch naming notes.md", p)
	}
	for _, f := range []string{"x.txt", "notes.md"} {
		if _, err := os.Stat(filepath.Join(r.Dir, f)); err != nil {
			t.Errorf("%s was not written: %v", f, err)
		}
	}

	// Order: SessionStarted, the command's start and end, the patch's start,
	// end and file edit, the final text, TurnEnded last.
	i := index(evs, 0, is[provider.SessionStarted])
	cmdStart := index(evs, i+1, func(ev provider.Event) bool {
		e, ok := ev.(provider.ToolStarted)
		return ok && e.Name == "exec_command"
	})
	cmdEnd := index(evs, cmdStart+1, func(ev provider.Event) bool {
		e, ok := ev.(provider.ToolCompleted)
		return ok && e.Name == "exec_command"
	})
	patchStart := index(evs, cmdEnd+1, func(ev provider.Event) bool { e, ok := ev.(provider.ToolStarted); return ok && e.Name == "apply_patch" })
	patchEnd := index(evs, patchStart+1, func(ev provider.Event) bool {
		e, ok := ev.(provider.ToolCompleted)
		return ok && e.Name == "apply_patch"
	})
	edit := index(evs, patchEnd+1, is[provider.FileEdited])
	text := index(evs, edit+1, func(ev provider.Event) bool { e, ok := ev.(provider.Text); return ok && e.Text == "done" })
	end := index(evs, text+1, is[provider.TurnEnded])
	if i < 0 || cmdStart < 0 || cmdEnd < 0 || patchStart < 0 || patchEnd < 0 || edit < 0 || text < 0 || end != len(evs)-1 {
		t.Fatalf("events out of order (%d %d %d %d %d %d %d %d):\n%s", i, cmdStart, cmdEnd, patchStart, patchEnd, edit, text, end, agentclitest.Dump(evs))
	}
	ss := evs[i].(provider.SessionStarted)
	if ss.ID == "" || ss.ID != s.ResumeID() || ss.Model != "gpt-5.5" {
		t.Errorf("SessionStarted = %+v, ResumeID %q", ss, s.ResumeID())
	}
	st, ct := evs[cmdStart].(provider.ToolStarted), evs[cmdEnd].(provider.ToolCompleted)
	if st.ID == "" || st.ID != ct.ID || st.Detail != "echo hi > x.txt" || ct.IsError || ct.Duration <= 0 {
		t.Errorf("command events = %+v / %+v", st, ct)
	}
	fe := evs[edit].(provider.FileEdited)
	if fe.Path != filepath.Join(r.Dir, "notes.md") || fe.Change != provider.Created || fe.Tool != "apply_patch" {
		t.Errorf("FileEdited = %+v", fe)
	}
	if n := agentclitest.Count[provider.FileEdited](evs); n != 1 {
		t.Errorf("%d FileEdited events, want 1 (the shell's redirect is no edit tool)", n)
	}
	if reasoning := agentclitest.All[provider.Text](evs); !hasText(reasoning, "Now the notes.", true) || !hasText(reasoning, "I'll run it", false) {
		t.Errorf("texts = %+v, want the reasoning and both messages", reasoning)
	}
	if got := agentclitest.SumUsage(evs); got != workUsage {
		t.Errorf("usage = %+v, want exactly what the endpoint reported %+v", got, workUsage)
	}
	if u := agentclitest.All[provider.Usage](evs); len(u) != 3 || u[2].ContextWindow == 0 || u[2].ContextTokens != 135 {
		t.Errorf("usage events = %+v, want one per request with the context", u)
	}
	if s.rd.unknown != 0 || s.rd.garbage != 0 || s.rd.badItems != 0 {
		t.Errorf("unknown %d (%v), garbage %d, bad items %d", s.rd.unknown, s.rd.unknownMethods, s.rd.garbage, s.rd.badItems)
	}
}

func hasText(ts []provider.Text, text string, reasoning bool) bool {
	for _, t := range ts {
		if t.Text == text && t.Reasoning == reasoning {
			return true
		}
	}
	return false
}

func fmtAny(v any) string {
	var b strings.Builder
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case []any:
			for _, x := range v {
				walk(x)
			}
		case map[string]any:
			for _, x := range v {
				walk(x)
			}
		case string:
			b.WriteString(v + " ")
		}
	}
	walk(v)
	return b.String()
}

// (2) The same, denied: nothing is written and the model is told.
func TestTurnWithPermissionDenied(t *testing.T) {
	r := newRig(t, modelmock.Script{Rules: []modelmock.Rule{shellAndPatch("do the work")}})
	h := agentclitest.NewHost(deny)
	s := r.start(t, r.Spec(), h)
	send(t, s, "do the work")
	evs := h.WaitTurns(t, 1, wait)
	_, perms := h.Snapshot()
	if te := agentclitest.All[provider.TurnEnded](evs)[0]; te.Err != nil {
		t.Fatalf("TurnEnded.Err = %v", te.Err)
	}
	if len(perms) != 2 {
		t.Fatalf("Permission called %d times, want 2", len(perms))
	}
	for _, f := range []string{"x.txt", "notes.md"} {
		if _, err := os.Stat(filepath.Join(r.Dir, f)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s exists after a denial (%v)", f, err)
		}
	}
	for _, c := range agentclitest.All[provider.ToolCompleted](evs) {
		if !c.IsError || !strings.Contains(c.Result, "declined") {
			t.Errorf("ToolCompleted = %+v, want a declined error", c)
		}
	}
	if n := agentclitest.Count[provider.FileEdited](evs); n != 0 {
		t.Errorf("%d FileEdited after a denial", n)
	}
	if body := r.lastRequestBody(t); !strings.Contains(body, "rejected by user") {
		t.Errorf("the model was not told of the denial: %s", body)
	}
	if got := agentclitest.SumUsage(evs); got != workUsage {
		t.Errorf("usage = %+v, want %+v", got, workUsage)
	}
}

// A Permission error (expiry, shutdown) denies.
func TestPermissionErrorDenies(t *testing.T) {
	r := newRig(t, modelmock.Script{Rules: []modelmock.Rule{shellAndPatch("do the work")}})
	h := agentclitest.NewHost(func(context.Context, provider.PermissionRequest) (provider.Decision, error) {
		return provider.Decision{}, provider.ErrNoAnswer
	})
	s := r.start(t, r.Spec(), h)
	send(t, s, "do the work")
	h.WaitTurns(t, 1, wait)
	if _, err := os.Stat(filepath.Join(r.Dir, "x.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("x.txt exists after an unanswered prompt (%v)", err)
	}
}

// (3) Two turns on one session; each counts only its own requests.
func TestMultiTurn(t *testing.T) {
	r := newRig(t, modelmock.Script{Rules: []modelmock.Rule{
		{Name: "one", Match: "first question", Turns: []modelmock.Turn{{Text: "first answer", Usage: modelmock.Usage{Input: 50, Output: 7}}}},
		{Name: "two", Match: "second question", Turns: []modelmock.Turn{{Text: "second answer", Usage: modelmock.Usage{Input: 80, Output: 9, CacheRead: 40}}}},
	}})
	h := agentclitest.NewHost(allow)
	s := r.start(t, r.Spec(), h)
	send(t, s, "first question")
	if err := s.Send(t.Context(), provider.Turn{Text: "too soon"}); err != nil && !errors.Is(err, provider.ErrBusy) {
		t.Fatalf("Send during a turn = %v, want ErrBusy or nil", err)
	}
	first := h.WaitTurns(t, 1, wait)
	send(t, s, "second question")
	evs := h.WaitTurns(t, 2, wait)
	ends := agentclitest.All[provider.TurnEnded](evs)
	if ends[0].Result != "first answer" || ends[1].Result != "second answer" || ends[0].Err != nil || ends[1].Err != nil {
		t.Fatalf("turns = %+v", ends)
	}
	if got := agentclitest.SumUsage(first); got != (provider.Usage{InputTokens: 50, OutputTokens: 7}) {
		t.Errorf("first turn usage = %+v", got)
	}
	if got := agentclitest.SumUsage(evs[len(first):]); got != (provider.Usage{InputTokens: 80, OutputTokens: 9, CacheReadTokens: 40}) {
		t.Errorf("second turn usage = %+v", got)
	}
	if body := r.lastRequestBody(t); !strings.Contains(body, "first question") || !strings.Contains(body, "first answer") {
		t.Errorf("the second turn's request lacks the first turn: %.300s", body)
	}
}

// (4) Close, then resume the thread in a new process: the history goes
// with the next request, and the usage the CLI replays is not counted.
func TestResume(t *testing.T) {
	r := newRig(t, modelmock.Script{Rules: []modelmock.Rule{
		{Name: "one", Match: "remember alpha", Turns: []modelmock.Turn{{Text: "remembered", Usage: modelmock.Usage{Input: 60, Output: 6}}}},
		{Name: "two", Match: "what was it", Turns: []modelmock.Turn{{Text: "alpha", Usage: modelmock.Usage{Input: 90, Output: 3}}}},
	}})
	h := agentclitest.NewHost(allow)
	s := r.start(t, r.Spec(), h)
	send(t, s, "remember alpha")
	h.WaitTurns(t, 1, wait)
	id := s.ResumeID()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s.Err() != nil {
		t.Errorf("Err after Close = %v", s.Err())
	}

	h2 := agentclitest.NewHost(allow)
	spec := r.Spec()
	spec.ResumeID = id
	s2 := r.start(t, spec, h2)
	if s2.ResumeID() != id {
		t.Fatalf("resumed thread %q, want %q", s2.ResumeID(), id)
	}
	send(t, s2, "what was it")
	evs := h2.WaitTurns(t, 1, wait)
	if te := agentclitest.All[provider.TurnEnded](evs)[0]; te.Err != nil || te.Result != "alpha" {
		t.Fatalf("TurnEnded = %+v", te)
	}
	if ss := agentclitest.All[provider.SessionStarted](evs); len(ss) == 0 || ss[0].ID != id {
		t.Errorf("SessionStarted = %+v, want the resumed id", ss)
	}
	body := r.lastRequestBody(t)
	if !strings.Contains(body, "remember alpha") || !strings.Contains(body, "remembered") {
		t.Errorf("the resumed request lacks the first turn's history: %.300s", body)
	}
	if got := agentclitest.SumUsage(evs); got != (provider.Usage{InputTokens: 90, OutputTokens: 3}) {
		t.Errorf("usage after resume = %+v, want only the new request's", got)
	}
}

// (6) Endpoint failures end the turn in bounded time with the CLI's words.
func TestEndpointErrors(t *testing.T) {
	cases := []struct {
		name string
		turn modelmock.Turn
		want []string
	}{
		{"500", modelmock.Turn{Status: 500}, []string{"internalServerError"}},
		{"401", modelmock.Turn{Status: 401, ErrorMessage: "bad key"}, []string{"401", "Unauthorized"}},
		{"malformed", modelmock.Turn{Malformed: true}, []string{"stream"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, modelmock.Script{Rules: []modelmock.Rule{{Name: "fail", Match: "fail please", Turns: []modelmock.Turn{c.turn}}}})
			h := agentclitest.NewHost(allow)
			s := r.start(t, r.Spec(), h)
			start := time.Now()
			send(t, s, "fail please")
			evs := h.WaitTurns(t, 1, wait)
			took := time.Since(start)
			te := agentclitest.All[provider.TurnEnded](evs)[0]
			if te.Err == nil {
				t.Fatalf("TurnEnded without error: %+v", te)
			}
			for _, w := range c.want {
				if !strings.Contains(te.Err.Error(), w) {
					t.Errorf("Err = %q, want it to contain %q", te.Err, w)
				}
			}
			if strings.Contains(te.Err.Error(), "exit status") {
				t.Errorf("Err = %q: an exit status is not the CLI's error", te.Err)
			}
			if took > 60*time.Second {
				t.Errorf("the failure took %v, want it bounded under 60s", took)
			}
			t.Logf("%s: %v after %v and %d requests", c.name, te.Err, took.Round(time.Millisecond), len(r.Srv.Requests()))
			// The session survives a failed turn.
			select {
			case <-s.Done():
				t.Fatalf("session ended: %v", s.Err())
			default:
			}
		})
	}
}

// (8) The fleet's MCP tool runs without asking the operator.
func TestFleetMCPToolNeedsNoPermission(t *testing.T) {
	var (
		mu    sync.Mutex
		calls []string
		auth  []string
	)
	type pingIn struct {
		Text string `json:"text" jsonschema:"what to echo"`
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "fleet", Version: "test"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "ping", Description: "echo text back"},
		func(ctx context.Context, req *mcp.CallToolRequest, in pingIn) (*mcp.CallToolResult, any, error) {
			mu.Lock()
			calls = append(calls, in.Text)
			mu.Unlock()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "pong " + in.Text}}}, nil, nil
		})
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)

	r := newRig(t, modelmock.Script{Rules: []modelmock.Rule{{Name: "mcp", Match: "ping the fleet", Turns: []modelmock.Turn{
		{ToolCalls: []modelmock.ToolCall{{Name: "mcp__fleet__ping", Input: map[string]any{"text": "yo"}}}},
		{Text: "pinged"},
	}}}})
	h := agentclitest.NewHost(allow)
	spec := r.Spec()
	// gpt-5.5 defers MCP tools behind tool_search; a model name without
	// metadata gets them listed directly (docs/providers/codex.md).
	spec.Model = "mock-model"
	spec.MCP = []provider.MCPServer{{Name: "fleet", URL: hs.URL + "/mcp", Headers: map[string]string{"Authorization": "Bearer fleet-token"}, Tools: []string{"ping"}}}
	s := r.start(t, spec, h)
	send(t, s, "ping the fleet")
	evs := h.WaitTurns(t, 1, wait)
	_, perms := h.Snapshot()
	if te := agentclitest.All[provider.TurnEnded](evs)[0]; te.Err != nil || te.Result != "pinged" {
		t.Fatalf("TurnEnded = %+v", te)
	}
	if len(perms) != 0 {
		t.Errorf("Permission was called for the fleet's own tool: %+v", perms)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(calls) != 1 || calls[0] != "yo" {
		t.Errorf("tool calls = %v, want one with yo", calls)
	}
	for _, a := range auth {
		if a != "Bearer fleet-token" {
			t.Errorf("MCP request with Authorization %q", a)
		}
	}
	started, done := agentclitest.All[provider.ToolStarted](evs), agentclitest.All[provider.ToolCompleted](evs)
	if len(started) != 1 || started[0].Name != "mcp__fleet__ping" || started[0].Input["text"] != "yo" ||
		len(done) != 1 || done[0].Result != "pong yo" || done[0].IsError {
		t.Errorf("tool events = %+v / %+v", started, done)
	}
	for _, a := range agentclitest.Proc(s.cli).Args() {
		if strings.Contains(a, "fleet-token") {
			t.Errorf("the MCP token is on the command line: %q", a)
		}
	}
}

// Instructions reach the model as developer instructions.
func TestInstructions(t *testing.T) {
	r := newRig(t, modelmock.Script{})
	h := agentclitest.NewHost(allow)
	spec := r.Spec()
	spec.Instructions = "You are the fleet's coordinator, codename heron."
	s := r.start(t, spec, h)
	send(t, s, "hello")
	h.WaitTurns(t, 1, wait)
	if body := r.lastRequestBody(t); !strings.Contains(body, "codename heron") {
		t.Errorf("the instructions are not in the request")
	}
}

// Inspect finds the CLI and its version and describes the endpoint.
func TestInspect(t *testing.T) {
	r := newRig(t, modelmock.Script{})
	in := New(provider.Options{Path: r.CLI}).Inspect(t.Context(), r.Env)
	if in.Err != nil || in.Path != r.CLI || !strings.Contains(in.Version, "codex-cli") {
		t.Fatalf("Inspect = %+v", in)
	}
	if versionOf(in.Version) == VerifiedVersion && !in.Verified {
		t.Errorf("Verified false for %s", in.Version)
	}
	if !strings.Contains(in.Endpoint, r.Srv.URL()) || in.Credentials != "MOCK_API_KEY set" {
		t.Errorf("Endpoint %q, Credentials %q", in.Endpoint, in.Credentials)
	}
	if strings.Contains(in.Endpoint+in.Credentials, "sk-test") {
		t.Error("Inspect printed the secret")
	}
	missing := New(provider.Options{Path: filepath.Join(t.TempDir(), "nope")}).Inspect(t.Context(), r.Env)
	var me *provider.MissingCLIError
	if !errors.As(missing.Err, &me) || me.Package != Package || me.ConfigKey != ConfigKey {
		t.Errorf("missing CLI: %v", missing.Err)
	}
}

// Close while the operator has not answered a prompt: the prompt's context
// ends, the turn ends once, Close is bounded.
func TestCloseDuringPermission(t *testing.T) {
	r := newRig(t, modelmock.Script{Rules: []modelmock.Rule{shellAndPatch("do the work")}})
	h := agentclitest.NewHost(nil) // never answers: waits for its context
	s := r.start(t, r.Spec(), h)
	send(t, s, "do the work")
	h.WaitFor(t, wait, "the prompt", func([]provider.Event, []provider.PermissionRequest) bool { _, p := h.Snapshot(); return len(p) == 1 })
	start := time.Now()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("Close took %v", d)
	}
	evs, _ := h.Snapshot()
	if ends := agentclitest.All[provider.TurnEnded](evs); len(ends) != 1 || !ends[0].Interrupted {
		t.Errorf("TurnEnded = %+v", ends)
	}
	if _, err := os.Stat(filepath.Join(r.Dir, "x.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("x.txt exists (%v)", err)
	}
}

// Resuming a thread the CLI does not know fails Start with its words.
func TestResumeUnknownThread(t *testing.T) {
	r := newRig(t, modelmock.Script{})
	spec := r.Spec()
	spec.ResumeID = "01a23127-0000-7000-8000-000000000000"
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	_, err := New(provider.Options{Path: r.CLI}).Start(ctx, spec, agentclitest.NewHost(allow))
	if err == nil || !strings.Contains(err.Error(), "thread/resume") {
		t.Fatalf("Start = %v, want a thread/resume error", err)
	}
	t.Logf("Start: %v", err)
}
