package fleetmcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"

	"github.com/agents-fleet/fleet/internal/testwait"
	"github.com/agents-fleet/fleet/provider"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitTimeout bounds every wait on a condition; nothing here should take
// more than a fraction of it.
const waitTimeout = 10 * time.Second

// call is one Fleet method call the fake recorded.
type call struct {
	Method string
	Caller string
	Worker string
	Text   string // task, message, summary or question text
	Lines  int
	Spawn  SpawnRequest
	Q      provider.Question
}

// fakeFleet records every call. AskOperator and ConfirmOperator block until
// ctx ends when block is set.
type fakeFleet struct {
	mu    sync.Mutex
	calls []call
	block bool
	ended []error // ctx.Err() of blocked calls, when they ended

	workers []WorkerInfo
	tasks   []TaskInfo
	output  map[string][]string
	answer  string
	approve bool
}

func newFake() *fakeFleet {
	return &fakeFleet{
		workers: []WorkerInfo{{ID: "w1", Status: "running", TaskID: "t1", Task: "fix the parser", Provider: "claude", Model: "opus", Branch: "fleet/w1", InputTokens: 120, OutputTokens: 30, LastActivity: "edited parse.go"}},
		tasks:   []TaskInfo{{ID: "t1", Status: "running", Worker: "w1", Text: "fix the parser"}},
		output:  map[string][]string{"w1": {"one", "two", "three"}},
		answer:  "blue",
		approve: true,
	}
}

func (f *fakeFleet) record(c call) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, c)
}

func (f *fakeFleet) snapshot() ([]call, []error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls), slices.Clone(f.ended)
}

// waitFor waits until cond holds over the recorded calls and ended errors.
func (f *fakeFleet) waitFor(t *testing.T, what string, cond func([]call, []error) bool) {
	t.Helper()
	var calls []call
	if !testwait.Until(waitTimeout, func() bool {
		var ended []error
		calls, ended = f.snapshot()
		return cond(calls, ended)
	}) {
		t.Fatalf("timed out waiting for %s; calls: %+v", what, calls)
	}
}

func (f *fakeFleet) lastCall(t *testing.T) call {
	t.Helper()
	calls, _ := f.snapshot()
	if len(calls) == 0 {
		t.Fatal("Fleet was not called")
	}
	return calls[len(calls)-1]
}

func (f *fakeFleet) numCalls() int {
	calls, _ := f.snapshot()
	return len(calls)
}

func (f *fakeFleet) knows(worker string) error {
	if _, ok := f.output[worker]; !ok {
		return fmt.Errorf("no worker %q", worker)
	}
	return nil
}

func (f *fakeFleet) wait(ctx context.Context) error {
	f.mu.Lock()
	block := f.block
	f.mu.Unlock()
	if !block {
		return nil
	}
	<-ctx.Done()
	f.mu.Lock()
	f.ended = append(f.ended, ctx.Err())
	f.mu.Unlock()
	return provider.ErrNoAnswer
}

func (f *fakeFleet) SpawnWorker(_ context.Context, caller string, r SpawnRequest) (SpawnResult, error) {
	f.record(call{Method: "SpawnWorker", Caller: caller, Text: r.Task, Spawn: r})
	return SpawnResult{WorkerID: "w2", TaskID: "t2"}, nil
}

func (f *fakeFleet) Workers(context.Context) []WorkerInfo {
	f.record(call{Method: "Workers"})
	return f.workers
}

func (f *fakeFleet) Tasks(context.Context) []TaskInfo {
	f.record(call{Method: "Tasks"})
	return f.tasks
}

func (f *fakeFleet) WorkerOutput(_ context.Context, worker string, maxLines int) ([]string, error) {
	f.record(call{Method: "WorkerOutput", Worker: worker, Lines: maxLines})
	if err := f.knows(worker); err != nil {
		return nil, err
	}
	out := f.output[worker]
	return out[max(0, len(out)-maxLines):], nil
}

func (f *fakeFleet) TellWorker(_ context.Context, caller, worker, text string) error {
	f.record(call{Method: "TellWorker", Caller: caller, Worker: worker, Text: text})
	return f.knows(worker)
}

func (f *fakeFleet) CancelWorker(_ context.Context, caller, worker string) error {
	f.record(call{Method: "CancelWorker", Caller: caller, Worker: worker})
	return f.knows(worker)
}

func (f *fakeFleet) AskOperator(ctx context.Context, caller string, q provider.Question) (string, error) {
	f.record(call{Method: "AskOperator", Caller: caller, Text: q.Text, Q: q})
	if err := f.wait(ctx); err != nil {
		return "", err
	}
	return f.answer, nil
}

func (f *fakeFleet) ConfirmOperator(ctx context.Context, caller, summary string) (bool, error) {
	f.record(call{Method: "ConfirmOperator", Caller: caller, Text: summary})
	if err := f.wait(ctx); err != nil {
		return false, err
	}
	return f.approve, nil
}

// start starts a Server on f, closed at the test's end.
func start(t *testing.T, f *fakeFleet) *Server {
	t.Helper()
	s := New(slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := s.Start(f); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// headerTransport adds fixed headers to every request.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.headers {
		r.Header.Set(k, v)
	}
	return h.base.RoundTrip(r)
}

// dial connects the SDK's own client to url, sending headers.
func dial(t *testing.T, url string, headers map[string]string) (*mcp.ClientSession, error) {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	c := mcp.NewClient(&mcp.Implementation{Name: "fleetmcp-test", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   url,
		HTTPClient: &http.Client{Transport: headerTransport{tr, headers}},
		MaxRetries: -1,
	}, nil)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { cs.Close() })
	return cs, nil
}

// connect connects as agent, with the endpoint the server gave it.
func connect(t *testing.T, s *Server, agent string) *mcp.ClientSession {
	t.Helper()
	ep := s.Endpoint(agent)
	cs, err := dial(t, ep.URL, ep.Headers)
	if err != nil {
		t.Fatalf("connect as %s: %v", agent, err)
	}
	return cs
}

func callTool(t *testing.T, cs *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s(%v): protocol error %v", name, args, err)
	}
	return res
}

func resultText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// okResult fails unless res is a success; it returns its text.
func okResult(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if res.IsError {
		t.Fatalf("error result: %s", resultText(res))
	}
	return resultText(res)
}

func structured(t *testing.T, res *mcp.CallToolResult, v any) {
	t.Helper()
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("structured content %s: %v", b, err)
	}
}

func TestListToolsAndSchemas(t *testing.T) {
	s := start(t, newFake())
	cs := connect(t, s, "coordinator")
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	schemas := map[string]map[string]any{}
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		if len(tool.Description) < 80 {
			t.Errorf("%s: description too thin for a model: %q", tool.Name, tool.Description)
		}
		b, _ := json.Marshal(tool.InputSchema)
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s: input schema %s: %v", tool.Name, b, err)
		}
		if m["type"] != "object" {
			t.Errorf("%s: input schema type %v, want object", tool.Name, m["type"])
		}
		schemas[tool.Name] = m
	}
	slices.Sort(names)
	want := ToolNames()
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Fatalf("tools %v, want %v", names, want)
	}
	if ep := s.Endpoint("coordinator"); !slices.Equal(ep.Tools, ToolNames()) {
		t.Errorf("Endpoint tools %v, want %v", ep.Tools, ToolNames())
	}

	required := func(tool string) []string {
		var r []string
		for _, v := range schemas[tool]["required"].([]any) {
			r = append(r, v.(string))
		}
		slices.Sort(r)
		return r
	}
	prop := func(tool, name string) map[string]any {
		p, _ := schemas[tool]["properties"].(map[string]any)[name].(map[string]any)
		if p == nil {
			t.Fatalf("%s: no property %q in %v", tool, name, schemas[tool])
		}
		return p
	}
	for tool, want := range map[string][]string{
		ToolSpawnWorker:      {"task"},
		ToolReadWorkerOutput: {"worker"},
		ToolTellWorker:       {"text", "worker"},
		ToolCancelWorker:     {"worker"},
		ToolAskOperator:      {"question"},
		ToolConfirm:          {"summary"},
	} {
		if got := required(tool); !slices.Equal(got, want) {
			t.Errorf("%s: required %v, want %v", tool, got, want)
		}
	}
	for _, tool := range []string{ToolListWorkers, ToolListTasks} {
		if p := schemas[tool]["properties"].(map[string]any); len(p) != 0 {
			t.Errorf("%s takes no arguments, schema has %v", tool, p)
		}
	}
	if p := prop(ToolSpawnWorker, "task"); p["type"] != "string" || p["minLength"] != 1.0 || !strings.Contains(p["description"].(string), "64 KiB") {
		t.Errorf("spawn_worker task schema: %v", p)
	}
	for _, name := range []string{"provider", "model", "skill", "host", "label"} {
		if p := prop(ToolSpawnWorker, name); p["type"] != "string" || p["maxLength"] != float64(maxNameBytes) {
			t.Errorf("spawn_worker %s schema: %v", name, p)
		}
	}
	if p := prop(ToolReadWorkerOutput, "lines"); p["type"] != "integer" || p["default"] != float64(defaultLines) || p["maximum"] != float64(maxLines) || p["minimum"] != 1.0 {
		t.Errorf("read_worker_output lines schema: %v", p)
	}
	if p := prop(ToolAskOperator, "choices"); p["type"] != "array" || p["items"].(map[string]any)["type"] != "string" {
		t.Errorf("ask_operator choices schema: %v", p)
	}
	if p := prop(ToolAskOperator, "allow_freeform"); p["type"] != "boolean" {
		t.Errorf("ask_operator allow_freeform schema: %v", p)
	}
}

func TestToolsCallFleetAsTheTokensAgent(t *testing.T) {
	f := newFake()
	s := start(t, f)
	for _, agent := range []string{"coordinator", "w3"} {
		t.Run(agent, func(t *testing.T) {
			cs := connect(t, s, agent)

			res := callTool(t, cs, ToolSpawnWorker, map[string]any{"task": "write the docs", "provider": "codex", "model": "gpt-6"})
			if text := okResult(t, res); !strings.Contains(text, "w2") || !strings.Contains(text, "t2") {
				t.Errorf("spawn_worker text %q", text)
			}
			var so spawnOut
			structured(t, res, &so)
			if so != (spawnOut{Worker: "w2", Task: "t2"}) {
				t.Errorf("spawn_worker structured %+v", so)
			}
			if c := f.lastCall(t); c.Caller != agent || c.Spawn != (SpawnRequest{Task: "write the docs", Provider: "codex", Model: "gpt-6"}) {
				t.Errorf("SpawnWorker call %+v", c)
			}
			// Pinned to a worker host, or to a host label.
			okResult(t, callTool(t, cs, ToolSpawnWorker, map[string]any{"task": "train it", "host": " gpu-1 "}))
			if c := f.lastCall(t); c.Spawn != (SpawnRequest{Task: "train it", Host: "gpu-1"}) {
				t.Errorf("SpawnWorker call with a host %+v", c)
			}
			okResult(t, callTool(t, cs, ToolSpawnWorker, map[string]any{"task": "train it", "label": "gpu"}))
			if c := f.lastCall(t); c.Spawn != (SpawnRequest{Task: "train it", Label: "gpu"}) {
				t.Errorf("SpawnWorker call with a label %+v", c)
			}

			res = callTool(t, cs, ToolListWorkers, nil)
			okResult(t, res)
			var wo workersOut
			structured(t, res, &wo)
			if !slices.Equal(wo.Workers, f.workers) {
				t.Errorf("list_workers %+v, want %+v", wo.Workers, f.workers)
			}
			var fromText workersOut // the text is the same JSON, for clients that ignore structured content
			if err := json.Unmarshal([]byte(resultText(res)), &fromText); err != nil || !slices.Equal(fromText.Workers, f.workers) {
				t.Errorf("list_workers text %q: %v", resultText(res), err)
			}

			res = callTool(t, cs, ToolListTasks, map[string]any{})
			okResult(t, res)
			var to tasksOut
			structured(t, res, &to)
			if !slices.Equal(to.Tasks, f.tasks) {
				t.Errorf("list_tasks %+v, want %+v", to.Tasks, f.tasks)
			}

			res = callTool(t, cs, ToolReadWorkerOutput, map[string]any{"worker": "w1"})
			if text := okResult(t, res); text != "one\ntwo\nthree" {
				t.Errorf("read_worker_output text %q", text)
			}
			if c := f.lastCall(t); c.Worker != "w1" || c.Lines != defaultLines {
				t.Errorf("WorkerOutput call %+v, want w1 and the default %d lines", c, defaultLines)
			}
			res = callTool(t, cs, ToolReadWorkerOutput, map[string]any{"worker": "w1", "lines": 2})
			var ro readOut
			structured(t, res, &ro)
			if !slices.Equal(ro.Lines, []string{"two", "three"}) || ro.Worker != "w1" {
				t.Errorf("read_worker_output 2 lines: %+v", ro)
			}

			res = callTool(t, cs, ToolTellWorker, map[string]any{"worker": "w1", "text": "also add tests"})
			okResult(t, res)
			if c := f.lastCall(t); c.Method != "TellWorker" || c.Caller != agent || c.Worker != "w1" || c.Text != "also add tests" {
				t.Errorf("TellWorker call %+v", c)
			}

			res = callTool(t, cs, ToolCancelWorker, map[string]any{"worker": "w1"})
			okResult(t, res)
			if c := f.lastCall(t); c.Method != "CancelWorker" || c.Caller != agent || c.Worker != "w1" {
				t.Errorf("CancelWorker call %+v", c)
			}

			res = callTool(t, cs, ToolAskOperator, map[string]any{"question": "which colour?", "choices": []string{"red", "blue"}, "allow_freeform": true})
			if text := okResult(t, res); text != "blue" {
				t.Errorf("ask_operator answer %q", text)
			}
			wantQ := provider.Question{Text: "which colour?", Kind: "choice", AllowFreeform: true, Choices: []provider.Choice{{Label: "red", Value: "red"}, {Label: "blue", Value: "blue"}}}
			if c := f.lastCall(t); c.Method != "AskOperator" || c.Caller != agent || !questionsEqual(c.Q, wantQ) {
				t.Errorf("AskOperator call %+v, want %+v", c, wantQ)
			}
			callTool(t, cs, ToolAskOperator, map[string]any{"question": "why?"})
			if c := f.lastCall(t); c.Q.Kind != "freeform" || len(c.Q.Choices) != 0 {
				t.Errorf("a question without choices: %+v", c.Q)
			}

			res = callTool(t, cs, ToolConfirm, map[string]any{"summary": "merge w1's branch"})
			if text := okResult(t, res); text != "approved" {
				t.Errorf("confirm %q", text)
			}
			if c := f.lastCall(t); c.Method != "ConfirmOperator" || c.Caller != agent || c.Text != "merge w1's branch" {
				t.Errorf("ConfirmOperator call %+v", c)
			}
		})
	}
}

func questionsEqual(a, b provider.Question) bool {
	return a.Text == b.Text && a.Kind == b.Kind && a.AllowFreeform == b.AllowFreeform && slices.Equal(a.Choices, b.Choices)
}

func TestConfirmDenied(t *testing.T) {
	f := newFake()
	f.approve = false
	s := start(t, f)
	cs := connect(t, s, "coordinator")
	res := callTool(t, cs, ToolConfirm, map[string]any{"summary": "delete the branch"})
	if text := okResult(t, res); text != "denied" || res.StructuredContent != nil {
		t.Errorf("confirm: %q %v", text, res.StructuredContent)
	}
}

func TestListingsShortenLongTexts(t *testing.T) {
	f := newFake()
	long := strings.Repeat("é", maxListText+10)
	f.workers[0].Task = long
	f.tasks[0].Text = long
	f.output["w1"] = []string{strings.Repeat("x", maxLineRunes+1)}
	s := start(t, f)
	cs := connect(t, s, "coordinator")

	var wo workersOut
	structured(t, callTool(t, cs, ToolListWorkers, nil), &wo)
	if got := []rune(wo.Workers[0].Task); len(got) != maxListText+1 || got[maxListText] != '…' {
		t.Errorf("worker task: %d runes", len(got))
	}
	var to tasksOut
	structured(t, callTool(t, cs, ToolListTasks, nil), &to)
	if got := []rune(to.Tasks[0].Text); len(got) != maxListText+1 {
		t.Errorf("task text: %d runes", len(got))
	}
	var ro readOut
	structured(t, callTool(t, cs, ToolReadWorkerOutput, map[string]any{"worker": "w1"}), &ro)
	if got := []rune(ro.Lines[0]); len(got) != maxLineRunes+1 {
		t.Errorf("output line: %d runes", len(got))
	}
}

func TestEmptyListingsAreArrays(t *testing.T) {
	f := newFake()
	f.workers, f.tasks = nil, nil
	f.output["w1"] = nil
	s := start(t, f)
	cs := connect(t, s, "coordinator")
	for _, c := range []struct {
		tool string
		args any
		want string
	}{
		{ToolListWorkers, nil, `{"workers":[]}`},
		{ToolListTasks, nil, `{"tasks":[]}`},
	} {
		if text := okResult(t, callTool(t, cs, c.tool, c.args)); text != c.want {
			t.Errorf("%s: %s, want %s", c.tool, text, c.want)
		}
	}
	res := callTool(t, cs, ToolReadWorkerOutput, map[string]any{"worker": "w1"})
	if text := okResult(t, res); !strings.Contains(text, "no output") {
		t.Errorf("read_worker_output of a silent worker: %q", text)
	}
}

func TestBadArgumentsAreErrorResults(t *testing.T) {
	f := newFake()
	s := start(t, f)
	cs := connect(t, s, "coordinator")
	tooLong := strings.Repeat("a", maxTaskBytes+1)
	tooLongMultibyte := strings.Repeat("é", maxTaskBytes/2+1) // within the schema's characters, over the bytes
	manyChoices := make([]string, maxChoices+1)
	for i := range manyChoices {
		manyChoices[i] = fmt.Sprint("c", i)
	}
	for _, c := range []struct {
		name  string
		tool  string
		args  any
		want  string // in the error text
		calls bool   // whether Fleet is called (and refuses)
	}{
		{"spawn without task", ToolSpawnWorker, map[string]any{}, `invalid arguments for spawn_worker: required: missing properties: ["task"]`, false},
		{"spawn task not a string", ToolSpawnWorker, map[string]any{"task": 5}, "task", false},
		{"spawn blank task", ToolSpawnWorker, map[string]any{"task": "  \n"}, "task is empty", false},
		{"spawn empty task", ToolSpawnWorker, map[string]any{"task": ""}, "task", false},
		{"spawn task over 64 KiB", ToolSpawnWorker, map[string]any{"task": tooLong}, "task", false},
		{"spawn task over 64 KiB in bytes", ToolSpawnWorker, map[string]any{"task": tooLongMultibyte}, "64 KiB", false},
		{"spawn unknown field", ToolSpawnWorker, map[string]any{"task": "x", "priority": 1}, "priority", false},
		{"spawn provider with a newline", ToolSpawnWorker, map[string]any{"task": "x", "provider": "cla\nude"}, "provider", false},
		{"spawn host with a newline", ToolSpawnWorker, map[string]any{"task": "x", "host": "h\n1"}, "host contains control characters", false},
		{"spawn host and label", ToolSpawnWorker, map[string]any{"task": "x", "host": "h1", "label": "gpu"}, "give host or label, not both", false},
		{"spawn label not a string", ToolSpawnWorker, map[string]any{"task": "x", "label": []string{"gpu"}}, "label", false},
		{"read worker id too long", ToolReadWorkerOutput, map[string]any{"worker": strings.Repeat("w", 50_000)}, "maxLength", false},
		{"read without worker", ToolReadWorkerOutput, map[string]any{"lines": 3}, "worker", false},
		{"read lines over 500", ToolReadWorkerOutput, map[string]any{"worker": "w1", "lines": 501}, "lines", false},
		{"read lines zero", ToolReadWorkerOutput, map[string]any{"worker": "w1", "lines": 0}, "lines", false},
		{"read lines not a number", ToolReadWorkerOutput, map[string]any{"worker": "w1", "lines": "ten"}, "lines", false},
		{"read unknown worker", ToolReadWorkerOutput, map[string]any{"worker": "w9"}, `no worker "w9"`, true},
		{"tell without text", ToolTellWorker, map[string]any{"worker": "w1"}, "text", false},
		{"tell blank worker", ToolTellWorker, map[string]any{"worker": " ", "text": "hi"}, "worker is empty", false},
		{"tell unknown worker", ToolTellWorker, map[string]any{"worker": "w9", "text": "hi"}, `could not send the message to w9: no worker "w9"`, true},
		{"cancel unknown worker", ToolCancelWorker, map[string]any{"worker": "w9"}, `could not cancel w9`, true},
		{"cancel worker not a string", ToolCancelWorker, map[string]any{"worker": []int{1}}, "worker", false},
		{"ask without question", ToolAskOperator, map[string]any{"choices": []string{"a"}}, "question", false},
		{"ask choices not strings", ToolAskOperator, map[string]any{"question": "q", "choices": []int{1, 2}}, "choices", false},
		{"ask too many choices", ToolAskOperator, map[string]any{"question": "q", "choices": manyChoices}, "choices", false},
		{"ask repeated choice", ToolAskOperator, map[string]any{"question": "q", "choices": []string{"a", "a "}}, "repeats", false},
		{"ask blank choice", ToolAskOperator, map[string]any{"question": "q", "choices": []string{"a", " "}}, "choice 2 is empty", false},
		{"confirm blank summary", ToolConfirm, map[string]any{"summary": "\t"}, "summary is empty", false},
		{"confirm summary not a string", ToolConfirm, map[string]any{"summary": true}, "summary", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := f.numCalls()
			res := callTool(t, cs, c.tool, c.args)
			if !res.IsError {
				t.Fatalf("not an error result: %s", resultText(res))
			}
			text := resultText(res)
			if !strings.Contains(text, c.want) {
				t.Errorf("error text %q does not mention %q", text, c.want)
			}
			if len(text) > maxErrorBytes+len(" … ") {
				t.Errorf("error text is %d bytes", len(text))
			}
			if called := f.numCalls() > before; called != c.calls {
				t.Errorf("Fleet called: %v, want %v", called, c.calls)
			}
		})
	}

	// An unknown tool is the protocol's error, not a dead connection.
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "rm_rf"}); err == nil && !res.IsError {
		t.Error("an unknown tool succeeded")
	}
	// The session still serves.
	if text := okResult(t, callTool(t, cs, ToolSpawnWorker, map[string]any{"task": "after all that"})); !strings.Contains(text, "w2") {
		t.Errorf("spawn after bad calls: %q", text)
	}
}

// rawPost posts body to url with token ("" for none) and an optional
// session id, returning the status, the session id it was given, and the
// body.
func rawPost(t *testing.T, url, token, session string, body []byte) (int, string, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), string(b)
}

const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

func token(ep provider.MCPServer) string {
	return strings.TrimPrefix(ep.Headers["Authorization"], "Bearer ")
}

func TestTokens(t *testing.T) {
	f := newFake()
	s := start(t, f)
	a, b := s.Endpoint("coordinator"), s.Endpoint("w3")
	if again := s.Endpoint("coordinator"); token(again) != token(a) {
		t.Error("a second Endpoint for the same agent minted a new token")
	}
	if token(a) == token(b) {
		t.Error("two agents share a token")
	}
	for _, ep := range []provider.MCPServer{a, b} {
		if tok := token(ep); len(tok) != 2*tokenBytes || strings.Trim(tok, "0123456789abcdef") != "" {
			t.Errorf("token %d chars, want %d hex", len(tok), 2*tokenBytes)
		}
		u, err := url.Parse(ep.URL)
		if err != nil || u.Scheme != "http" || u.Hostname() != "127.0.0.1" || u.Path != Path || ep.Name != "fleet" {
			t.Errorf("endpoint %+v", ep)
		}
	}
}

func TestUnknownOrMissingTokenIsRefused(t *testing.T) {
	f := newFake()
	s := start(t, f)
	good := s.Endpoint("coordinator")
	wrong := strings.Repeat("0", 2*tokenBytes)
	for _, c := range []struct{ name, token string }{
		{"missing", ""},
		{"wrong", wrong},
		{"truncated", token(good)[:2*tokenBytes-1]},
		{"extended", token(good) + "0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if status, _, _ := rawPost(t, good.URL, c.token, "", []byte(initializeBody)); status != http.StatusUnauthorized {
				t.Errorf("status %d, want 401", status)
			}
			headers := map[string]string{}
			if c.token != "" {
				headers["Authorization"] = "Bearer " + c.token
			}
			if _, err := dial(t, good.URL, headers); err == nil {
				t.Error("the SDK client connected")
			}
		})
	}
	if _, err := dial(t, good.URL, map[string]string{"Authorization": "Basic " + token(good)}); err == nil {
		t.Error("connected with a Basic credential")
	}
	if f.numCalls() != 0 {
		t.Errorf("Fleet was called: %+v", f.lastCall(t))
	}
	// The right token still works.
	okResult(t, callTool(t, connect(t, s, "coordinator"), ToolListWorkers, nil))
}

func TestSessionBelongsToItsAgent(t *testing.T) {
	f := newFake()
	s := start(t, f)
	coord, w3 := s.Endpoint("coordinator"), s.Endpoint("w3")
	status, session, body := rawPost(t, coord.URL, token(coord), "", []byte(initializeBody))
	if status != http.StatusOK || session == "" {
		t.Fatalf("initialize: %d, session %q: %s", status, session, body)
	}
	initialized := []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if status, _, body := rawPost(t, coord.URL, token(coord), session, initialized); status/100 != 2 {
		t.Fatalf("initialized: %d %s", status, body)
	}
	spawn := []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"spawn_worker","arguments":{"task":"x"}}}`)
	// w3's token cannot act in the coordinator's session.
	if status, _, body := rawPost(t, coord.URL, token(w3), session, spawn); status != http.StatusForbidden {
		t.Errorf("another agent's token in the session: %d %s", status, body)
	}
	if f.numCalls() != 0 {
		t.Fatalf("Fleet was called: %+v", f.lastCall(t))
	}
	if status, _, body := rawPost(t, coord.URL, token(coord), session, spawn); status != http.StatusOK || !strings.Contains(body, "w2") {
		t.Errorf("the session's own token: %d %s", status, body)
	}
	if c := f.lastCall(t); c.Caller != "coordinator" {
		t.Errorf("caller %q", c.Caller)
	}
}

func TestRequestBodyIsBounded(t *testing.T) {
	s := start(t, newFake())
	ep := s.Endpoint("coordinator")
	huge := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"pad":%q}}`, strings.Repeat("x", 2*maxBodyBytes))
	if status, _, _ := rawPost(t, ep.URL, token(ep), "", []byte(huge)); status != http.StatusRequestEntityTooLarge && status != http.StatusBadRequest {
		t.Errorf("a %d-byte body: status %d", len(huge), status)
	}
	okResult(t, callTool(t, connect(t, s, "coordinator"), ToolListTasks, nil))
}

// askInBackground calls ask_operator on cs and returns where its outcome
// arrives: the result's text, or the protocol error.
func askInBackground(t *testing.T, cs *mcp.ClientSession) <-chan string {
	t.Helper()
	done := make(chan string, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: ToolAskOperator, Arguments: map[string]any{"question": "go on?"}})
		switch {
		case err != nil:
			done <- "protocol error: " + err.Error()
		case res.IsError:
			done <- "error result: " + resultText(res)
		default:
			done <- "answer: " + resultText(res)
		}
	}()
	return done
}

func waitOutcome(t *testing.T, done <-chan string) string {
	t.Helper()
	select {
	case s := <-done:
		return s
	case <-time.After(waitTimeout):
		t.Fatal("the blocked call did not end")
		return ""
	}
}

func TestCloseCancelsABlockedAsk(t *testing.T) {
	f := newFake()
	f.block = true
	s := start(t, f)
	cs := connect(t, s, "coordinator")
	done := askInBackground(t, cs)
	f.waitFor(t, "the ask to reach Fleet", func(c []call, _ []error) bool { return len(c) == 1 })

	closed := make(chan struct{})
	go func() {
		s.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(waitTimeout):
		t.Fatal("Close did not return while an ask was blocked")
	}
	if _, ended := f.snapshot(); len(ended) != 1 || !errors.Is(ended[0], context.Canceled) {
		t.Errorf("the blocked ask's ctx: %v", ended)
	}
	// The error result usually reaches the client before its session is
	// closed, but the SDK does not promise that.
	if got := waitOutcome(t, done); strings.HasPrefix(got, "answer") || strings.HasPrefix(got, "error result") && !strings.Contains(got, "the fleet is shutting down") {
		t.Errorf("the client saw %q", got)
	}
	if err := s.Start(newFake()); !errors.Is(err, ErrClosed) {
		t.Errorf("Start after Close: %v", err)
	}
	s.Close() // idempotent
}

func TestRevoke(t *testing.T) {
	f := newFake()
	f.block = true
	s := start(t, f)
	coord := connect(t, s, "coordinator")
	old := s.Endpoint("w3")
	w3 := connect(t, s, "w3")
	done := askInBackground(t, w3)
	f.waitFor(t, "w3's ask to reach Fleet", func(c []call, _ []error) bool { return len(c) == 1 })

	s.Revoke("w3")
	f.waitFor(t, "w3's ask to be cancelled", func(_ []call, e []error) bool { return len(e) == 1 })
	if got := waitOutcome(t, done); strings.HasPrefix(got, "answer") || strings.HasPrefix(got, "error result") && !strings.Contains(got, "access to the fleet tools has ended") {
		t.Errorf("the revoked agent's ask: %s", got)
	}
	// The old token is refused, by the SDK client and on the wire.
	if _, err := dial(t, old.URL, old.Headers); err == nil {
		t.Error("connected with a revoked token")
	}
	if status, _, _ := rawPost(t, old.URL, token(old), "", []byte(initializeBody)); status != http.StatusUnauthorized {
		t.Errorf("revoked token: status %d", status)
	}
	// w3's open session is gone.
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	if res, err := w3.CallTool(ctx, &mcp.CallToolParams{Name: ToolListWorkers}); err == nil && !res.IsError {
		t.Error("the revoked agent's session still serves")
	}
	s.Revoke("w3")     // a no-op now
	s.Revoke("nobody") // and for an unknown agent

	// The coordinator is unaffected; w3 can be granted again, with a new token.
	f.mu.Lock()
	f.block = false
	f.mu.Unlock()
	okResult(t, callTool(t, coord, ToolListWorkers, nil))
	again := s.Endpoint("w3")
	if token(again) == token(old) {
		t.Fatal("Endpoint after Revoke gave the revoked token")
	}
	cs := connect(t, s, "w3")
	okResult(t, callTool(t, cs, ToolTellWorker, map[string]any{"worker": "w1", "text": "hi"}))
	if c := f.lastCall(t); c.Caller != "w3" {
		t.Errorf("caller %q", c.Caller)
	}
}

func TestConcurrentAgents(t *testing.T) {
	f := newFake()
	s := start(t, f)
	const agents, calls = 6, 20
	var wg sync.WaitGroup
	errs := make(chan error, agents*(calls+2))
	for i := range agents {
		wg.Go(func() {
			// Grants, sessions and tool lists are made concurrently too.
			ep := s.Endpoint(fmt.Sprint("w", i))
			cs, err := dial(t, ep.URL, ep.Headers)
			if err != nil {
				errs <- fmt.Errorf("w%d: connect: %v", i, err)
				return
			}
			if _, err := cs.ListTools(t.Context(), nil); err != nil {
				errs <- fmt.Errorf("w%d: list tools: %v", i, err)
			}
			for j := range calls {
				res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: ToolTellWorker, Arguments: map[string]any{"worker": "w1", "text": fmt.Sprint(i, "/", j)}})
				if err != nil || res.IsError {
					errs <- fmt.Errorf("w%d call %d: %v %v", i, j, err, res)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	recorded, _ := f.snapshot()
	for _, c := range recorded {
		if want := "w" + strings.Split(c.Text, "/")[0]; c.Caller != want {
			t.Errorf("text %q came as %q", c.Text, c.Caller)
		}
	}
	if len(recorded) != agents*calls {
		t.Errorf("%d calls, want %d", len(recorded), agents*calls)
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func TestTokensAreNotLogged(t *testing.T) {
	var logs syncBuffer
	s := New(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err := s.Start(newFake()); err != nil {
		t.Fatal(err)
	}
	ep := s.Endpoint("coordinator")
	cs, err := dial(t, ep.URL, ep.Headers)
	if err != nil {
		t.Fatal(err)
	}
	okResult(t, callTool(t, cs, ToolListWorkers, nil))
	wrong := strings.Repeat("ab", tokenBytes)
	if status, _, _ := rawPost(t, ep.URL, wrong, "", []byte(initializeBody)); status != http.StatusUnauthorized {
		t.Errorf("wrong token: %d", status)
	}
	cs.Close()
	s.Revoke("coordinator")
	s.Close()
	out := logs.String()
	if !strings.Contains(out, "unknown token refused") {
		t.Errorf("the refusal was not logged at debug level:\n%s", out)
	}
	for _, tok := range []string{token(ep), wrong} {
		if strings.Contains(out, tok) {
			t.Errorf("a token is in the log:\n%s", out)
		}
	}
}
