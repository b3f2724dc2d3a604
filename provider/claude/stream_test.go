package claude

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/internal/testwait"
	"github.com/agents-fleet/fleet/provider"
	"github.com/agents-fleet/fleet/provider/agentcli"
	"github.com/agents-fleet/fleet/provider/agentcli/agentclitest"
)

// offline is a session without a process: the test feeds it stdout lines
// and reads what it writes to stdin.
type offline struct {
	s    *session
	r    *os.File
	done chan struct{}
	mu   sync.Mutex
	in   bytes.Buffer // what the session wrote to the CLI's stdin
}

func newOffline(t testing.TB, h provider.Host, spec provider.Spec, keep bool) *offline {
	t.Helper()
	s := newSession(h, spec)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	s.in = agentcli.NewWriter(w)
	s.st.started = true
	o := &offline{s: s, r: r, done: make(chan struct{})}
	go func() {
		defer close(o.done)
		if !keep {
			_, _ = io.Copy(io.Discard, r)
			return
		}
		buf := make([]byte, 32<<10)
		for {
			n, err := r.Read(buf)
			o.mu.Lock()
			o.in.Write(buf[:n])
			o.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(o.close)
	return o
}

// feed handles lines as the stdout goroutine would, a turn starting at
// each system/init between turns.
func (o *offline) feed(lines [][]byte) {
	for _, l := range lines {
		o.s.mu.Lock()
		idle := o.s.turn == nil
		o.s.mu.Unlock()
		if idle && bytes.Contains(l, []byte(`"subtype":"init"`)) {
			_, _ = o.s.beginTurn()
		}
		o.s.handleLine(l)
	}
	o.s.prompts.Wait()
}

func (o *offline) close() {
	o.s.in.Close()
	o.s.cancel()
	o.s.prompts.Wait()
	<-o.done
	o.r.Close()
}

// written waits until the session wrote n JSON lines to stdin (or 5 s
// passed: the caller checks what came) and returns those written.
func (o *offline) written(n int) []map[string]any {
	var got []map[string]any
	testwait.Until(5*time.Second, func() bool { got = o.lines(); return len(got) >= n })
	return got
}

func (o *offline) lines() []map[string]any {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []map[string]any
	for _, l := range bytes.Split(o.in.Bytes(), []byte("\n")) {
		if len(l) == 0 {
			continue
		}
		var m map[string]any
		if json.Unmarshal(l, &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

func readLines(t testing.TB, path string) [][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines [][]byte
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, MaxLine)
	for sc.Scan() {
		lines = append(lines, append([]byte(nil), sc.Bytes()...))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}

// TestRecordedTour maps a stream recorded from Claude Code 2.1.197 against
// the scripted endpoint (testdata/tour.jsonl: two turns with Bash, Read,
// Write, Edit and Grep, the Write, Edit and second Bash asking permission).
func TestRecordedTour(t *testing.T) {
	h := newHost()
	o := newOffline(t, h, provider.Spec{}, true)
	o.feed(readLines(t, "testdata/tour.jsonl"))
	evs, perms := h.Snapshot()

	if got := agentclitest.All[provider.SessionStarted](evs); len(got) != 2 || got[0].ID == "" || got[0] != got[1] || got[0].Model != "claude-opus-4-8[1m]" {
		t.Fatalf("SessionStarted = %+v", got)
	}
	if o.s.ResumeID() != agentclitest.All[provider.SessionStarted](evs)[0].ID {
		t.Fatalf("ResumeID = %q", o.s.ResumeID())
	}
	texts := agentclitest.All[provider.Text](evs)
	if len(texts) < 5 || !texts[0].Reasoning || texts[1].Reasoning || texts[1].Text != "I'll look at the project first." {
		t.Fatalf("texts = %+v", texts)
	}
	started := agentclitest.All[provider.ToolStarted](evs)
	var names []string
	for _, s := range started {
		names = append(names, s.Name)
	}
	if strings.Join(names, ",") != "Bash,Read,Write,Edit,Grep,Bash" {
		t.Fatalf("tools started: %v", names)
	}
	if started[0].Detail != "ls -la && git status --short 2>/dev/null | head" || started[2].Detail != "/tmp/claude-rec/work/greet.go" || started[4].Detail != "greet" {
		t.Fatalf("details: %q, %q, %q", started[0].Detail, started[2].Detail, started[4].Detail)
	}
	done := agentclitest.All[provider.ToolCompleted](evs)
	if len(done) != 6 {
		t.Fatalf("tool completions: %d", len(done))
	}
	for i, d := range done {
		// 2.1.197 has no Grep tool (it says to use grep through Bash): the
		// scripted call comes back as an error.
		if d.ID != started[i].ID || d.Name != started[i].Name || d.IsError != (d.Name == "Grep") {
			t.Fatalf("completion %d = %+v for %+v", i, d, started[i])
		}
	}
	if !strings.Contains(done[5].Result, "hello, fleet") {
		t.Fatalf("the last Bash result = %q", done[5].Result)
	}
	edits := agentclitest.All[provider.FileEdited](evs)
	want := []provider.FileEdited{
		{Path: "/tmp/claude-rec/work/greet.go", Change: provider.Created, Tool: "Write"},
		{Path: "/tmp/claude-rec/work/main.go", Change: provider.Edited, Tool: "Edit"},
	}
	if len(edits) != 2 || edits[0] != want[0] || edits[1] != want[1] {
		t.Fatalf("edits = %+v", edits)
	}
	// Each response's input side is reported as it arrives; the result
	// adds the output: a turn's Usage adds up to its result.usage.
	if u := agentclitest.All[provider.Usage](evs); len(u) != 10 || u[0] != (provider.Usage{InputTokens: 2400, CacheReadTokens: 1200, CacheWriteTokens: 300, ContextTokens: 3900}) {
		t.Fatalf("usage events = %+v; want one per response and one per result", u)
	}
	usage := agentclitest.TurnUsage(evs)
	wantU := []provider.Usage{
		{InputTokens: 16700, OutputTokens: 375, CacheReadTokens: 20900, CacheWriteTokens: 300, ContextTokens: 3100 + 4200, ContextWindow: 1000000},
		{InputTokens: 6700, OutputTokens: 70, CacheReadTokens: 8700, ContextTokens: 3400 + 4400, ContextWindow: 1000000},
	}
	if len(usage) != 2 || usage[0] != wantU[0] || usage[1] != wantU[1] {
		t.Fatalf("usage = %+v; want %+v", usage, wantU)
	}
	ends := agentclitest.All[provider.TurnEnded](evs)
	if len(ends) != 2 || ends[0].Err != nil || ends[1].Result != "It prints `hello, fleet`." {
		t.Fatalf("turn ends = %+v", ends)
	}
	if got := agentclitest.Kinds(evs); !agentclitest.InOrder(got, []string{"SessionStarted", "Text", "Text", "ToolStarted", "ToolCompleted", "ToolStarted", "ToolCompleted",
		"Text", "ToolStarted", "ToolCompleted", "FileEdited", "ToolStarted", "ToolCompleted", "FileEdited", "Usage", "TurnEnded", "SessionStarted"}) {
		t.Fatalf("order: %v", got)
	}

	// Each permission was relayed and answered with the input unchanged.
	// (The relays run concurrently, so their order is not the stream's.)
	inputs := map[string]string{}
	for _, p := range perms {
		b, _ := json.Marshal(p.Input)
		inputs[p.Tool] = string(b)
	}
	if len(perms) != 3 || inputs["Write"] == "" || inputs["Edit"] == "" || inputs["Bash"] == "" {
		t.Fatalf("permissions = %+v", perms)
	}
	answers := o.written(3)
	if len(answers) != 3 {
		t.Fatalf("answers written: %v", answers)
	}
	seen := map[string]bool{}
	for i, a := range answers {
		resp := a["response"].(map[string]any)
		inner := resp["response"].(map[string]any)
		if resp["subtype"] != "success" || inner["behavior"] != "allow" {
			t.Fatalf("answer %d = %v", i, a)
		}
		got, _ := json.Marshal(inner["updatedInput"])
		for tool, in := range inputs {
			if in == string(got) {
				seen[tool] = true
			}
		}
	}
	if len(seen) != 3 {
		t.Fatalf("answers %v do not carry each request's input unchanged", answers)
	}
	if o.s.st.unknown["system/thinking_tokens"] != 1 || o.s.st.garbage != 0 {
		t.Fatalf("unknown %v, garbage %d", o.s.st.unknown, o.s.st.garbage)
	}
}

// TestRecordedErrors maps result lines of failed turns as recorded from
// the CLI: the error is the CLI's text, with the status once.
func TestRecordedErrors(t *testing.T) {
	cases := []struct {
		name, line string
		want       string
	}{
		{"500", `{"type":"result","subtype":"success","is_error":true,"api_error_status":500,"num_turns":1,"result":"API Error: 500 scripted overload. This is a server-side issue.","usage":{"input_tokens":0,"output_tokens":0}}`,
			"API Error: 500 scripted overload. This is a server-side issue."},
		{"status not in the text", `{"type":"result","subtype":"success","is_error":true,"api_error_status":529,"result":"Overloaded"}`,
			"Overloaded (HTTP status 529)"},
		{"max turns", `{"type":"result","subtype":"error_max_turns","is_error":true,"errors":["Reached maximum number of turns (1)"]}`,
			"Reached maximum number of turns (1) [error_max_turns]"},
		{"nothing said", `{"type":"result","subtype":"error_during_execution","is_error":true}`,
			"claude ended the turn with an error [error_during_execution]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHost()
			o := newOffline(t, h, provider.Spec{}, false)
			o.feed([][]byte{[]byte(`{"type":"system","subtype":"init","session_id":"s1","model":"m"}`), []byte(c.line)})
			ends := agentclitest.All[provider.TurnEnded](h.Events())
			if len(ends) != 1 || ends[0].Err == nil || ends[0].Err.Error() != c.want {
				t.Fatalf("TurnEnded = %+v; want Err %q", ends, c.want)
			}
			if len(agentclitest.All[provider.Usage](h.Events())) != 0 {
				t.Fatal("a Usage event for a turn without tokens")
			}
		})
	}
}

// TestInterruptedResult: the result after our interrupt is Interrupted,
// not an error.
func TestInterruptedResult(t *testing.T) {
	h := newHost()
	o := newOffline(t, h, provider.Spec{}, true)
	o.feed([][]byte{[]byte(`{"type":"system","subtype":"init","session_id":"s1","model":"m"}`)})
	if err := o.s.Interrupt(t.Context()); err != nil {
		t.Fatal(err)
	}
	o.feed([][]byte{
		[]byte(`{"type":"control_response","response":{"subtype":"success","request_id":"int-1"}}`),
		[]byte(`{"type":"result","subtype":"error_during_execution","is_error":true,"usage":{"input_tokens":100,"output_tokens":20},"errors":["[ede_diagnostic] result_type=user"]}`),
	})
	ends := agentclitest.All[provider.TurnEnded](h.Events())
	if len(ends) != 1 || !ends[0].Interrupted || ends[0].Err != nil {
		t.Fatalf("TurnEnded = %+v", ends)
	}
	if w := o.written(1); len(w) != 1 || w[0]["type"] != "control_request" || w[0]["request"].(map[string]any)["subtype"] != "interrupt" {
		t.Fatalf("written: %v", w)
	}
}

// TestSubagentLines: a subagent's tool calls are mapped, its text is not.
func TestSubagentLines(t *testing.T) {
	h := newHost()
	o := newOffline(t, h, provider.Spec{}, false)
	o.feed([][]byte{
		[]byte(`{"type":"system","subtype":"init","session_id":"s1","model":"m"}`),
		[]byte(`{"type":"assistant","message":{"id":"m2","model":"m","content":[{"type":"text","text":"subagent musing"}]},"parent_tool_use_id":"task1"}`),
		[]byte(`{"type":"assistant","message":{"id":"m2","model":"m","content":[{"type":"tool_use","id":"w1","name":"Write","input":{"file_path":"/x/a.go","content":"x"}}]},"parent_tool_use_id":"task1"}`),
		[]byte(`{"type":"user","message":{"role":"user","content":[{"tool_use_id":"w1","type":"tool_result","content":"ok"}]},"parent_tool_use_id":"task1","tool_use_result":{"type":"update","filePath":"/x/a.go"}}`),
	})
	if n := len(agentclitest.All[provider.Text](h.Events())); n != 0 {
		t.Fatalf("%d texts from the subagent", n)
	}
	if e := agentclitest.All[provider.FileEdited](h.Events()); len(e) != 1 || e[0] != (provider.FileEdited{Path: "/x/a.go", Change: provider.Edited, Tool: "Write"}) {
		t.Fatalf("edits = %+v", e)
	}
}

// TestMCPResultBlocks: an MCP tool's result is an array of text blocks.
func TestMCPResultBlocks(t *testing.T) {
	got := resultText([]byte(`[{"type":"text","text":"one"},{"type":"image","data":"..."},{"type":"text","text":"two"}]`))
	if got != "one\n[image]\ntwo" {
		t.Fatalf("resultText = %q", got)
	}
}

// TestRecordedLimits: what Claude says of a limit (agent-clis.md §6) is a
// RateLimited event (with the reset when it gives one) and a turn ended on
// a 429 is a RateLimitError carrying it; a 5xx or an unreachable API it
// gave up on is a TransportError.
func TestRecordedLimits(t *testing.T) {
	reset := time.Date(2026, 12, 2, 21, 23, 0, 0, time.UTC)
	init := []byte(`{"type":"system","subtype":"init","session_id":"s1","model":"m"}`)
	t.Run("usage limit", func(t *testing.T) {
		h := newHost()
		o := newOffline(t, h, provider.Spec{}, false)
		o.feed([][]byte{init,
			[]byte(fmt.Sprintf(`{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":%d,"rateLimitType":"five_hour","isUsingOverage":false}}`, reset.Unix())),
			[]byte(`{"type":"result","subtype":"success","is_error":true,"api_error_status":429,"result":"You've hit your session limit · resets 9:23pm (UTC)"}`)})
		rl := agentclitest.All[provider.RateLimited](h.Events())
		if len(rl) != 1 || !rl[0].Until.Equal(reset) || rl[0].Retrying || !strings.Contains(rl[0].Reason, "five_hour") {
			t.Fatalf("RateLimited = %+v", rl)
		}
		ends := agentclitest.All[provider.TurnEnded](h.Events())
		var le *provider.RateLimitError
		if len(ends) != 1 || !errors.As(ends[0].Err, &le) || !le.Until.Equal(reset) || !strings.Contains(le.Reason, "session limit") {
			t.Fatalf("TurnEnded = %+v", ends)
		}
	})
	t.Run("retry-after", func(t *testing.T) {
		h := newHost()
		o := newOffline(t, h, provider.Spec{}, false)
		before := time.Now()
		o.feed([][]byte{init, []byte(`{"type":"system","subtype":"api_retry","attempt":1,"max_retries":2,"retry_delay_ms":5000,"error_status":429,"error":"rate_limit"}`)})
		rl := agentclitest.All[provider.RateLimited](h.Events())
		if len(rl) != 1 || !rl[0].Retrying || rl[0].Until.Before(before.Add(4*time.Second)) || rl[0].Until.After(time.Now().Add(6*time.Second)) {
			t.Fatalf("RateLimited = %+v", rl)
		}
	})
	for name, line := range map[string]string{
		"503":         `{"type":"result","subtype":"success","is_error":true,"api_error_status":503,"result":"API Error: 503 upstream is down"}`,
		"unreachable": `{"type":"result","subtype":"success","is_error":true,"api_error_status":null,"result":"API Error: Unable to connect to API (ConnectionRefused)"}`,
	} {
		t.Run(name, func(t *testing.T) {
			h := newHost()
			o := newOffline(t, h, provider.Spec{}, false)
			o.feed([][]byte{init, []byte(line)})
			ends := agentclitest.All[provider.TurnEnded](h.Events())
			var te *provider.TransportError
			if len(ends) != 1 || !errors.As(ends[0].Err, &te) {
				t.Fatalf("TurnEnded = %+v", ends)
			}
		})
	}
}
