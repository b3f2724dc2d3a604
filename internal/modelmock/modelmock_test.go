package modelmock

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/internal/testwait"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// bound is the generous limit for anything the tests wait on.
const bound = 10 * time.Second

func start(t *testing.T, sc Script) *Server {
	t.Helper()
	s, err := Start(sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// client is an HTTP client whose idle connections end with the test.
func client(t *testing.T) *http.Client {
	tr := &http.Transport{DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: bound}
}

// post sends body (marshaled unless it is a string or []byte) and returns
// the response with its body read.
func post(t *testing.T, c *http.Client, url string, body any) (*http.Response, []byte) {
	t.Helper()
	var b []byte
	switch v := body.(type) {
	case string:
		b = []byte(v)
	case []byte:
		b = v
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := c.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("POST %s: reading the answer: %v", url, err)
	}
	return resp, data
}

type event struct {
	name string
	data map[string]any
	raw  string
}

// parseSSE reads a whole event stream; every data line must be JSON.
func parseSSE(t *testing.T, body []byte) []event {
	t.Helper()
	var evs []event
	var cur event
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.name != "" || cur.raw != "" {
				if err := json.Unmarshal([]byte(cur.raw), &cur.data); err != nil {
					t.Fatalf("event %s: data %q: %v", cur.name, cur.raw, err)
				}
				evs = append(evs, cur)
			}
			cur = event{}
		case strings.HasPrefix(line, "event: "):
			cur.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.raw += strings.TrimPrefix(line, "data: ")
		default:
			t.Fatalf("unexpected SSE line %q", line)
		}
	}
	if cur.name != "" || cur.raw != "" {
		t.Fatalf("stream ends inside an event: %+v", cur)
	}
	return evs
}

func names(evs []event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.name)
	}
	return out
}

// get walks m along path (map keys, or ints for arrays).
func get(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			a, _ := v.([]any)
			if k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}

func decode(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("answer %q: %v", b, err)
	}
	return m
}

// Conversation builders.

func userText(texts ...string) map[string]any {
	var blocks []any
	for _, s := range texts {
		blocks = append(blocks, map[string]any{"type": "text", "text": s})
	}
	return map[string]any{"role": "user", "content": blocks}
}

func assistantCalls(ids ...string) map[string]any {
	blocks := []any{map[string]any{"type": "text", "text": "calling"}}
	for _, id := range ids {
		blocks = append(blocks, map[string]any{"type": "tool_use", "id": id, "name": "Bash", "input": map[string]any{}})
	}
	return map[string]any{"role": "assistant", "content": blocks}
}

func toolResults(ids ...string) map[string]any {
	var blocks []any
	for _, id := range ids {
		blocks = append(blocks, map[string]any{"type": "tool_result", "tool_use_id": id, "content": "out"})
	}
	return map[string]any{"role": "user", "content": blocks}
}

func messages(stream bool, msgs ...map[string]any) map[string]any {
	return map[string]any{"model": "claude-test", "stream": stream, "max_tokens": 100, "messages": msgs, "unknown_field": []int{1}}
}

const reminder = "<system-reminder>\nToday is a day.\n</system-reminder>"

func TestRouteAnthropic(t *testing.T) {
	cases := []struct {
		name   string
		msgs   []map[string]any
		prompt string
		turn   int
	}{
		{"string content", []map[string]any{{"role": "user", "content": "hello there"}}, "hello there", 0},
		{"reminder block before the prompt", []map[string]any{userText(reminder, "do X")}, reminder + "\ndo X", 0},
		{"one tool round", []map[string]any{userText("do X"), assistantCalls("a"), toolResults("a")}, "do X", 1},
		{"two calls in one response count once", []map[string]any{userText("do X"), assistantCalls("a", "b"), toolResults("a", "b")}, "do X", 1},
		{"results split over two user messages", []map[string]any{userText("do X"), assistantCalls("a", "b"), toolResults("a"), toolResults("b")}, "do X", 1},
		{"two rounds", []map[string]any{userText("do X"), assistantCalls("a"), toolResults("a"), assistantCalls("b"), toolResults("b")}, "do X", 2},
		{"reminder text next to a tool result", []map[string]any{userText("do X"), assistantCalls("a"),
			{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": "a", "content": "out"}, map[string]any{"type": "text", "text": "note"}}}}, "do X", 1},
		{"reminder-only user message after results", []map[string]any{userText("do X"), assistantCalls("a"), toolResults("a"), userText(reminder)}, "do X", 1},
		{"system message inside messages", []map[string]any{userText("do X"), {"role": "system", "content": "mid-conversation system"},
			assistantCalls("a"), toolResults("a")}, "do X", 1},
		{"follow-up prompt restarts at 0", []map[string]any{userText("first"), assistantCalls("a"), toolResults("a"),
			{"role": "assistant", "content": "done"}, userText("second")}, "second", 0},
		{"follow-up prompt after its own tool round", []map[string]any{userText("first"), assistantCalls("a"), toolResults("a"),
			{"role": "assistant", "content": "done"}, userText("second"), assistantCalls("b"), toolResults("b")}, "second", 1},
		{"a prompt after an interrupt shares the rejected call's result message", []map[string]any{userText("first"), assistantCalls("a"),
			{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": "a", "content": "rejected", "is_error": true},
				map[string]any{"type": "text", "text": "[Request interrupted by user for tool use]\n"}, map[string]any{"type": "text", "text": reminder},
				map[string]any{"type": "text", "text": "go on"}}}}, "go on", 0},
		{"the interrupted prompt's own round after it", []map[string]any{userText("first"), assistantCalls("a"),
			{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": "a", "content": "rejected"},
				map[string]any{"type": "text", "text": "[Request interrupted by user for tool use]"}, map[string]any{"type": "text", "text": "go on"}}},
			assistantCalls("b"), toolResults("b")}, "go on", 1},
		{"an interrupt marker alone is no prompt", []map[string]any{userText("first"), assistantCalls("a"),
			{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": "a", "content": "rejected"},
				map[string]any{"type": "text", "text": "[Request interrupted by user for tool use]"}}}}, "first", 1},
		{"no messages", nil, "", 0},
		{"odd shapes are ignored", []map[string]any{{"role": "user", "content": 42}, {"role": 7}, userText("real"),
			{"role": "user", "content": []any{"not a block", map[string]any{"type": "image"}}}}, "real", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, _ := json.Marshal(messages(true, c.msgs...))
			r, err := parseAnthropic(b)
			if err != nil {
				t.Fatal(err)
			}
			prompt, turn := r.route()
			if prompt != c.prompt || turn != c.turn {
				t.Fatalf("route = %q, %d; want %q, %d", prompt, turn, c.prompt, c.turn)
			}
		})
	}
}

func msgItem(role string, texts ...string) map[string]any {
	var parts []any
	for _, s := range texts {
		typ := "input_text"
		if role == "assistant" {
			typ = "output_text"
		}
		parts = append(parts, map[string]any{"type": typ, "text": s})
	}
	return map[string]any{"type": "message", "role": role, "content": parts}
}

func fcall(id string) map[string]any {
	return map[string]any{"type": "function_call", "call_id": id, "name": "exec_command", "arguments": "{}"}
}

func fout(id string) map[string]any {
	return map[string]any{"type": "function_call_output", "call_id": id, "output": "ok"}
}

func TestRouteOpenAI(t *testing.T) {
	env := "<environment_context>\n  <cwd>/w</cwd>\n</environment_context>"
	codexPrefix := []map[string]any{msgItem("developer", "You are Codex."), msgItem("user", env)}
	with := func(items ...map[string]any) []map[string]any {
		return append(append([]map[string]any(nil), codexPrefix...), items...)
	}
	cases := []struct {
		name   string
		input  any
		prompt string
		turn   int
	}{
		{"string input", "just this", "just this", 0},
		{"environment context before the prompt", with(msgItem("user", "do Y")), "do Y", 0},
		{"role without type", []map[string]any{{"role": "user", "content": "plain"}}, "plain", 0},
		{"one function call round", with(msgItem("user", "do Y"), map[string]any{"type": "reasoning", "summary": []any{}}, fcall("c1"), fout("c1")), "do Y", 1},
		{"custom tool round", with(msgItem("user", "do Y"), map[string]any{"type": "custom_tool_call", "call_id": "c1", "name": "apply_patch", "input": "x"},
			map[string]any{"type": "custom_tool_call_output", "call_id": "c1", "output": "ok"}), "do Y", 1},
		{"two calls in one response count once", with(msgItem("user", "do Y"), fcall("c1"), fcall("c2"), fout("c1"), fout("c2")), "do Y", 1},
		{"two rounds", with(msgItem("user", "do Y"), fcall("c1"), fout("c1"), fcall("c2"), fout("c2")), "do Y", 2},
		{"follow-up prompt restarts at 0", with(msgItem("user", "first"), fcall("c1"), fout("c1"), msgItem("assistant", "done"),
			msgItem("user", env), msgItem("user", "second")), "second", 0},
		{"multi-part prompt", with(msgItem("user", "part one", "part two")), "part one\npart two", 0},
		{"no user text", []map[string]any{msgItem("developer", "x")}, "", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, _ := json.Marshal(map[string]any{"model": "gpt-test", "input": c.input, "stream": true, "extra": map[string]any{"x": 1}})
			r, err := parseOpenAI(b)
			if err != nil {
				t.Fatal(err)
			}
			prompt, turn := r.route()
			if prompt != c.prompt || turn != c.turn {
				t.Fatalf("route = %q, %d; want %q, %d", prompt, turn, c.prompt, c.turn)
			}
		})
	}
}

// textOf is the text of a non-streamed Anthropic answer.
func textOf(t *testing.T, b []byte) string {
	t.Helper()
	var sb strings.Builder
	for _, bl := range decode(t, b)["content"].([]any) {
		if s, ok := get(bl, "text").(string); ok {
			sb.WriteString(s)
		}
	}
	return sb.String()
}

func TestRoutingOverHTTP(t *testing.T) {
	s := start(t, Script{Rules: []Rule{
		{Name: "alpha", Match: "alpha task", Turns: []Turn{{Text: "alpha 0"}, {Text: "alpha 1"}}},
		{Name: "alpha-too", Match: "alpha", Turns: []Turn{{Text: "never: the rule above comes first"}}},
		{Name: "beta", Match: "beta task", Turns: []Turn{{Text: "beta only"}}},
		{Name: "empty", Match: "no turns"},
	}})
	c := client(t)
	url := s.URL() + "/v1/messages"
	ask := func(msgs ...map[string]any) string {
		resp, b := post(t, c, url, messages(false, msgs...))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d: %s", resp.StatusCode, b)
		}
		return textOf(t, b)
	}
	if got := ask(userText(reminder, "the alpha task")); got != "alpha 0" {
		t.Errorf("turn 0: %q", got)
	}
	if got := ask(userText("the alpha task"), assistantCalls("a"), toolResults("a")); got != "alpha 1" {
		t.Errorf("turn 1: %q", got)
	}
	if got := ask(userText("the alpha task"), assistantCalls("a"), toolResults("a"), assistantCalls("b"), toolResults("b")); got != "alpha 1" {
		t.Errorf("turn 2 (past the end, the last turn repeats): %q", got)
	}
	if got := ask(userText("the alpha task"), assistantCalls("a"), toolResults("a"), assistantCalls("b"), toolResults("b"), userText("now the beta task")); got != "beta only" {
		t.Errorf("follow-up prompt: %q", got)
	}
	if got := ask(userText("something else")); got != "ok" {
		t.Errorf("default: %q", got)
	}
	if got := ask(userText("a rule with no turns")); got != "ok" {
		t.Errorf("rule without turns: %q", got)
	}

	reqs := s.Requests()
	want := []struct {
		rule string
		turn int
	}{{"alpha", 0}, {"alpha", 1}, {"alpha", 2}, {"beta", 0}, {"", 0}, {"empty", 0}}
	if len(reqs) != len(want) {
		t.Fatalf("%d requests logged, want %d", len(reqs), len(want))
	}
	for i, w := range want {
		if reqs[i].Rule != w.rule || reqs[i].Turn != w.turn {
			t.Errorf("request %d: rule %q turn %d, want %q %d", i, reqs[i].Rule, reqs[i].Turn, w.rule, w.turn)
		}
	}

	// The default answer's usage, and SetScript replacing the script.
	resp, b := post(t, c, url, messages(false, userText("something else")))
	if u := decode(t, b)["usage"]; resp.StatusCode != 200 || get(u, "input_tokens") != 10.0 || get(u, "output_tokens") != 2.0 {
		t.Errorf("default usage: %v", u)
	}
	s.SetScript(Script{Default: &Turn{Text: "new default"}})
	resp, b = post(t, c, url, messages(false, userText("the alpha task")))
	if got := textOf(t, b); resp.StatusCode != 200 || got != "new default" {
		t.Errorf("after SetScript: %q", got)
	}
	if u := decode(t, b)["usage"]; get(u, "input_tokens") != 100.0 || get(u, "output_tokens") != 20.0 {
		t.Errorf("zero usage should read as {100, 20}: %v", u)
	}
}

func TestAnthropicStream(t *testing.T) {
	s := start(t, Script{Rules: []Rule{{Name: "r", Match: "stream me", Turns: []Turn{{
		Reasoning: "thinking hard",
		Text:      "I will call two tools.",
		ToolCalls: []ToolCall{
			{Name: "Bash", Input: map[string]any{"command": "echo hi > x.txt"}},
			{ID: "toolu_given", Name: "Write", Input: json.RawMessage(`{"file_path":"a","content":"b"}`)},
		},
		Usage: Usage{Input: 321, Output: 45, CacheRead: 67, CacheWrite: 8},
	}}}}})
	resp, b := post(t, client(t), s.URL()+"/v1/messages?beta=true", messages(true, userText(reminder, "please stream me")))
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	evs := parseSSE(t, b)
	wantNames := []string{"message_start",
		"content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
		"content_block_start", "content_block_delta", "content_block_stop",
		"content_block_start", "content_block_delta", "content_block_stop",
		"content_block_start", "content_block_delta", "content_block_stop",
		"message_delta", "message_stop"}
	if !reflect.DeepEqual(names(evs), wantNames) {
		t.Fatalf("events %v\nwant %v", names(evs), wantNames)
	}
	for _, e := range evs {
		if e.data["type"] != e.name {
			t.Errorf("event %s has type %v", e.name, e.data["type"])
		}
	}

	// Rebuild the message the way a client does.
	start := evs[0].data["message"]
	if get(start, "model") != "claude-test" || get(start, "role") != "assistant" {
		t.Errorf("message_start: %v", start)
	}
	u := get(start, "usage")
	if get(u, "input_tokens") != 321.0 || get(u, "cache_read_input_tokens") != 67.0 || get(u, "cache_creation_input_tokens") != 8.0 || get(u, "output_tokens") != 1.0 {
		t.Errorf("message_start usage: %v", u)
	}
	type block struct {
		typ, text, id, name, json, signature string
	}
	var blocks []block
	for _, e := range evs {
		switch e.name {
		case "content_block_start":
			cb := e.data["content_block"]
			id, _ := get(cb, "id").(string)
			name, _ := get(cb, "name").(string)
			blocks = append(blocks, block{typ: get(cb, "type").(string), id: id, name: name})
			if int(e.data["index"].(float64)) != len(blocks)-1 {
				t.Errorf("block index %v", e.data["index"])
			}
		case "content_block_delta":
			bl := &blocks[int(e.data["index"].(float64))]
			d := e.data["delta"]
			switch get(d, "type") {
			case "thinking_delta":
				bl.text += get(d, "thinking").(string)
			case "signature_delta":
				bl.signature += get(d, "signature").(string)
			case "text_delta":
				bl.text += get(d, "text").(string)
			case "input_json_delta":
				bl.json += get(d, "partial_json").(string)
			default:
				t.Errorf("delta %v", d)
			}
		}
	}
	if len(blocks) != 4 {
		t.Fatalf("blocks %+v", blocks)
	}
	if blocks[0].typ != "thinking" || blocks[0].text != "thinking hard" || blocks[0].signature == "" {
		t.Errorf("thinking block %+v", blocks[0])
	}
	if blocks[1].typ != "text" || blocks[1].text != "I will call two tools." {
		t.Errorf("text block %+v", blocks[1])
	}
	if blocks[2].typ != "tool_use" || blocks[2].name != "Bash" || !strings.HasPrefix(blocks[2].id, "toolu_mock_") || blocks[2].json != `{"command":"echo hi > x.txt"}` {
		t.Errorf("tool block %+v", blocks[2])
	}
	if blocks[3].id != "toolu_given" || blocks[3].name != "Write" || blocks[3].json != `{"file_path":"a","content":"b"}` {
		t.Errorf("tool block %+v", blocks[3])
	}
	md := evs[len(evs)-2].data
	if get(md, "delta", "stop_reason") != "tool_use" || get(md, "usage", "output_tokens") != 45.0 {
		t.Errorf("message_delta %v", md)
	}

	// Text only: end_turn, and the default usage.
	s.SetScript(Script{Default: &Turn{Text: "plain"}})
	_, b = post(t, client(t), s.URL()+"/v1/messages", messages(true, userText("hi")))
	evs = parseSSE(t, b)
	if got := names(evs); len(got) != 6 || get(evs[4].data, "delta", "stop_reason") != "end_turn" ||
		get(evs[0].data, "message", "usage", "input_tokens") != 100.0 || get(evs[4].data, "usage", "output_tokens") != 20.0 {
		t.Errorf("text-only stream: %v / %v / %v", got, evs[0].data, evs[4].data)
	}
}

func TestAnthropicJSON(t *testing.T) {
	s := start(t, Script{Default: &Turn{
		Reasoning: "hmm",
		Text:      "calling",
		ToolCalls: []ToolCall{{Name: "Bash", Input: map[string]any{"command": "ls"}}},
		Usage:     Usage{Input: 5, Output: 6, CacheRead: 7, CacheWrite: 8},
	}})
	resp, b := post(t, client(t), s.URL()+"/v1/messages", messages(false, userText("hi")))
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d, type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	m := decode(t, b)
	if m["type"] != "message" || m["role"] != "assistant" || m["stop_reason"] != "tool_use" || m["model"] != "claude-test" {
		t.Errorf("message %v", m)
	}
	content := m["content"].([]any)
	if len(content) != 3 || get(content, 0, "type") != "thinking" || get(content, 0, "thinking") != "hmm" ||
		get(content, 1, "text") != "calling" || get(content, 2, "type") != "tool_use" ||
		get(content, 2, "input", "command") != "ls" || !strings.HasPrefix(get(content, 2, "id").(string), "toolu_mock_") {
		t.Errorf("content %v", content)
	}
	u := m["usage"]
	if get(u, "input_tokens") != 5.0 || get(u, "output_tokens") != 6.0 || get(u, "cache_read_input_tokens") != 7.0 || get(u, "cache_creation_input_tokens") != 8.0 {
		t.Errorf("usage %v", u)
	}
}

func TestOpenAIStream(t *testing.T) {
	s := start(t, Script{Rules: []Rule{{Name: "o", Match: "do Y", Turns: []Turn{{
		Reasoning: "plan it",
		Text:      "working",
		ToolCalls: []ToolCall{
			{Name: "exec_command", Input: map[string]any{"cmd": "echo hi > y.txt"}},
			{Name: "apply_patch", Input: "*** Begin Patch\n*** End Patch\n"},
			{ID: "call_given", Name: "mcp__perm__approve", Input: map[string]any{"tool_name": "Demo"}},
			{Name: "mcp__undeclared__tool", Input: nil},
		},
		Usage: Usage{Input: 200, Output: 40, CacheRead: 80},
	}}}}})
	body := map[string]any{
		"model":  "gpt-5.5",
		"stream": true,
		"input":  []any{msgItem("developer", "sys"), msgItem("user", "do Y")},
		"tools": []any{
			map[string]any{"type": "function", "name": "exec_command", "parameters": map[string]any{}},
			map[string]any{"type": "custom", "name": "apply_patch", "format": map[string]any{"type": "grammar"}},
			map[string]any{"type": "namespace", "name": "mcp__perm", "tools": []any{map[string]any{"type": "function", "name": "approve"}}},
			map[string]any{"type": "tool_search"},
		},
	}
	for _, path := range []string{"/v1/responses", "/responses"} {
		resp, b := post(t, client(t), s.URL()+path, body)
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			t.Fatalf("%s: status %d", path, resp.StatusCode)
		}
		evs := parseSSE(t, b)
		for i, e := range evs {
			if e.data["type"] != e.name || e.data["sequence_number"] != float64(i) {
				t.Fatalf("event %d %s: type %v sequence_number %v", i, e.name, e.data["type"], e.data["sequence_number"])
			}
		}
		n := names(evs)
		if n[0] != "response.created" || n[1] != "response.in_progress" || n[len(n)-1] != "response.completed" {
			t.Fatalf("events %v", n)
		}
		var done []map[string]any
		deltas := map[string]string{}
		for _, e := range evs {
			switch e.name {
			case "response.output_item.done":
				done = append(done, e.data["item"].(map[string]any))
			case "response.output_text.delta", "response.function_call_arguments.delta", "response.reasoning_summary_text.delta", "response.custom_tool_call_input.delta":
				deltas[e.name+" "+e.data["item_id"].(string)] += e.data["delta"].(string)
			}
		}
		if len(done) != 6 {
			t.Fatalf("%d output items: %v", len(done), done)
		}
		if done[0]["type"] != "reasoning" || get(done[0], "summary", 0, "text") != "plan it" || deltas["response.reasoning_summary_text.delta "+done[0]["id"].(string)] != "plan it" {
			t.Errorf("reasoning item %v", done[0])
		}
		if done[1]["type"] != "message" || done[1]["role"] != "assistant" || get(done[1], "content", 0, "type") != "output_text" ||
			get(done[1], "content", 0, "text") != "working" || deltas["response.output_text.delta "+done[1]["id"].(string)] != "working" {
			t.Errorf("message item %v", done[1])
		}
		fc := done[2]
		if fc["type"] != "function_call" || fc["name"] != "exec_command" || fc["arguments"] != `{"cmd":"echo hi > y.txt"}` ||
			!strings.HasPrefix(fc["call_id"].(string), "call_mock_") || fc["namespace"] != nil ||
			deltas["response.function_call_arguments.delta "+fc["id"].(string)] != fc["arguments"] {
			t.Errorf("function_call item %v", fc)
		}
		ct := done[3]
		if ct["type"] != "custom_tool_call" || ct["name"] != "apply_patch" || ct["input"] != "*** Begin Patch\n*** End Patch\n" ||
			!strings.HasPrefix(ct["call_id"].(string), "call_mock_") {
			t.Errorf("custom_tool_call item %v", ct)
		}
		mcp := done[4]
		if mcp["type"] != "function_call" || mcp["namespace"] != "mcp__perm" || mcp["name"] != "approve" || mcp["call_id"] != "call_given" || mcp["arguments"] != `{"tool_name":"Demo"}` {
			t.Errorf("namespaced MCP item %v", mcp)
		}
		flat := done[5]
		if flat["type"] != "function_call" || flat["namespace"] != nil || flat["name"] != "mcp__undeclared__tool" || flat["arguments"] != "{}" {
			t.Errorf("undeclared namespace item %v", flat)
		}
		completed := evs[len(evs)-1].data["response"]
		if get(completed, "status") != "completed" || len(get(completed, "output").([]any)) != 6 {
			t.Errorf("response.completed: %v", completed)
		}
		u := get(completed, "usage")
		if get(u, "input_tokens") != 200.0 || get(u, "input_tokens_details", "cached_tokens") != 80.0 || get(u, "output_tokens") != 40.0 ||
			get(u, "output_tokens_details", "reasoning_tokens") != 0.0 || get(u, "total_tokens") != 240.0 {
			t.Errorf("usage %v", u)
		}
	}
	// Without a custom tool declared, apply_patch is a plain function call.
	body["tools"] = []any{}
	_, b := post(t, client(t), s.URL()+"/v1/responses", body)
	for _, e := range parseSSE(t, b) {
		if e.name == "response.output_item.done" && get(e.data, "item", "name") == "apply_patch" {
			if it := e.data["item"].(map[string]any); it["type"] != "function_call" || it["arguments"] != `"*** Begin Patch\n*** End Patch\n"` {
				t.Errorf("apply_patch without a custom tool: %v", it)
			}
		}
	}
}

func TestErrorStatuses(t *testing.T) {
	s := start(t, Script{Rules: []Rule{
		{Match: "401", Turns: []Turn{{Status: 401}}},
		{Match: "500", Turns: []Turn{{Status: 500, ErrorMessage: "boom"}}},
		{Match: "529", Turns: []Turn{{Status: 529}}},
		{Match: "429", Turns: []Turn{{Status: 429}}},
	}})
	c := client(t)
	for _, tc := range []struct {
		status     int
		anthType   string
		msg        string
		openaiType string
	}{
		{401, "authentication_error", "modelmock forced status 401", "invalid_request_error"},
		{500, "api_error", "boom", "server_error"},
		{529, "overloaded_error", "modelmock forced status 529", "server_error"},
		{429, "rate_limit_error", "modelmock forced status 429", "rate_limit_error"},
	} {
		prompt := fmt.Sprint("status ", tc.status)
		for _, stream := range []bool{true, false} {
			resp, b := post(t, c, s.URL()+"/v1/messages", messages(stream, userText(prompt)))
			m := decode(t, b)
			if resp.StatusCode != tc.status || m["type"] != "error" || get(m, "error", "type") != tc.anthType || get(m, "error", "message") != tc.msg {
				t.Errorf("anthropic %d stream=%v: %d %s", tc.status, stream, resp.StatusCode, b)
			}
		}
		resp, b := post(t, c, s.URL()+"/v1/responses", map[string]any{"model": "m", "input": prompt})
		m := decode(t, b)
		if resp.StatusCode != tc.status || get(m, "error", "message") != tc.msg || get(m, "error", "type") != tc.openaiType {
			t.Errorf("openai %d: %d %s", tc.status, resp.StatusCode, b)
		}
	}
	for _, q := range s.Requests() {
		if !strings.Contains(string(q.Body), fmt.Sprint(q.Status)) {
			t.Errorf("logged status %d for body %s", q.Status, q.Body)
		}
	}
}

// rawPost returns the status and as much of the body as could be read,
// with the read error.
func rawPost(t *testing.T, c *http.Client, url string, body any) (int, []byte, error) {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := c.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp.StatusCode, data, err
}

func TestMalformed(t *testing.T) {
	s := start(t, Script{Default: &Turn{Malformed: true, Text: "never"}})
	c := client(t)
	check := func(what string, status int, b []byte, err error, terminal string) {
		t.Helper()
		if status != 200 {
			t.Errorf("%s: status %d", what, status)
		}
		if err == nil {
			t.Errorf("%s: the stream ended cleanly; want the connection dropped", what)
		}
		if json.Valid(b) {
			t.Errorf("%s: body is valid JSON: %s", what, b)
		}
		if terminal != "" && bytes.Contains(b, []byte(terminal)) {
			t.Errorf("%s: has the terminal event %s", what, terminal)
		}
		if len(b) == 0 {
			t.Errorf("%s: nothing sent before the break", what)
		}
	}
	status, b, err := rawPost(t, c, s.URL()+"/v1/messages", messages(true, userText("x")))
	check("anthropic stream", status, b, err, "message_stop")
	status, b, err = rawPost(t, c, s.URL()+"/v1/messages", messages(false, userText("x")))
	check("anthropic json", status, b, err, "")
	status, b, err = rawPost(t, c, s.URL()+"/v1/responses", map[string]any{"input": "x"})
	check("openai stream", status, b, err, "response.completed")
	// The server is still fine afterwards.
	s.SetScript(Script{})
	if resp, b := post(t, c, s.URL()+"/v1/messages", messages(false, userText("x"))); resp.StatusCode != 200 || textOf(t, b) != "ok" {
		t.Errorf("after malformed: %d %s", resp.StatusCode, b)
	}
}

func TestHangEndsOnClose(t *testing.T) {
	s, err := Start(Script{Rules: []Rule{{Name: "hang", Match: "hang", Turns: []Turn{{Hang: true}}}}})
	if err != nil {
		t.Fatal(err)
	}
	c := client(t)
	errs := make(chan error, 2)
	for _, path := range []string{"/v1/messages", "/v1/responses"} {
		body := messages(true, userText("hang please"))
		if path == "/v1/responses" {
			body = map[string]any{"input": "hang please"}
		}
		go func() {
			_, _, err := rawPost(t, c, s.URL()+path, body)
			errs <- err
		}()
	}
	testwait.For(t, bound, "both hanging requests to be routed", func() bool {
		n := 0
		for _, q := range s.Requests() {
			if q.Rule == "hang" {
				n++
			}
		}
		return n == 2
	})
	closed := make(chan struct{})
	t0 := time.Now()
	go func() {
		s.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(bound):
		t.Fatal("Close hangs on a Hang turn")
	}
	if d := time.Since(t0); d > 4*time.Second { // Close gives up waiting politely at 5 s
		t.Errorf("Close took %s", d)
	}
	for range 2 {
		if err := <-errs; err == nil {
			t.Error("a hanging request got a complete answer; want the connection dropped")
		}
	}
	for _, q := range s.Requests() {
		if q.Status != 0 {
			t.Errorf("hung request logged with status %d, want 0", q.Status)
		}
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := c.Get(s.URL() + "/"); err == nil {
		t.Error("still serving after Close")
	}
}

func TestDelay(t *testing.T) {
	s := start(t, Script{Rules: []Rule{
		{Name: "short", Match: "short", Turns: []Turn{{Text: "late", Delay: 50 * time.Millisecond}}},
		{Name: "long", Match: "long", Turns: []Turn{{Text: "never", Delay: time.Hour}}},
	}})
	c := client(t)
	t0 := time.Now()
	resp, b := post(t, c, s.URL()+"/v1/messages", messages(false, userText("short")))
	if resp.StatusCode != 200 || textOf(t, b) != "late" || time.Since(t0) < 50*time.Millisecond {
		t.Errorf("short delay: %d %s after %s", resp.StatusCode, b, time.Since(t0))
	}

	// A client that gives up ends the wait.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		b, _ := json.Marshal(messages(true, userText("long")))
		req, _ := http.NewRequestWithContext(ctx, "POST", s.URL()+"/v1/messages", bytes.NewReader(b))
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	testwait.For(t, bound, "the long request to be routed", func() bool {
		r := s.Requests()
		return len(r) == 2 && r[1].Rule == "long"
	})
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("canceled request: %v", err)
		}
	case <-time.After(bound):
		t.Fatal("canceled request did not return")
	}
	// Close waits for that handler; it must have ended already or end now.
	closed := make(chan struct{})
	go func() { s.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(bound):
		t.Fatal("Close waits on an abandoned Delay")
	}
}

func TestBadRequests(t *testing.T) {
	s := start(t, Script{})
	c := client(t)
	for _, tc := range []struct {
		path, body string
		openai     bool
	}{
		{"/v1/messages", `{"messages": [`, false},
		{"/v1/messages", `[1, 2]`, false},
		{"/v1/messages", `null`, false},
		{"/v1/messages", ``, false},
		{"/v1/messages/count_tokens", `nope`, false},
		{"/v1/responses", `{"input": "x"} trailing`, true},
		{"/responses", `"just a string"`, true},
	} {
		resp, b := post(t, c, s.URL()+tc.path, tc.body)
		m := decode(t, b)
		msg, _ := get(m, "error", "message").(string)
		if resp.StatusCode != 400 || !strings.HasPrefix(msg, "modelmock: ") {
			t.Errorf("%s %q: %d %s", tc.path, tc.body, resp.StatusCode, b)
		}
		if tc.openai != (m["type"] == nil) {
			t.Errorf("%s: error body shape %s", tc.path, b)
		}
	}

	// Oversized: refused, and logged as a truncated JSON string.
	big := append([]byte(`{"model":"m","messages":[],"pad":"`), bytes.Repeat([]byte("a"), maxBody)...)
	big = append(big, `"}`...)
	resp, b := post(t, c, s.URL()+"/v1/messages", big)
	if resp.StatusCode != 400 || !strings.Contains(string(b), "larger than") {
		t.Errorf("oversized: %d %s", resp.StatusCode, b)
	}
	reqs := s.Requests()
	last := reqs[len(reqs)-1]
	var logged string
	if err := json.Unmarshal(last.Body, &logged); err != nil || len(logged) != maxLogBody || last.Status != 400 {
		t.Errorf("oversized body logged as %d bytes (%v), status %d", len(logged), err, last.Status)
	}

	// Content-Encoding: gzip is read, others refused.
	var zb bytes.Buffer
	zw := gzip.NewWriter(&zb)
	json.NewEncoder(zw).Encode(messages(false, userText("zipped")))
	zw.Close()
	req, _ := http.NewRequest("POST", s.URL()+"/v1/messages", &zb)
	req.Header.Set("Content-Encoding", "gzip")
	gresp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	gb, _ := io.ReadAll(gresp.Body)
	gresp.Body.Close()
	if gresp.StatusCode != 200 || textOf(t, gb) != "ok" {
		t.Errorf("gzip body: %d %s", gresp.StatusCode, gb)
	}
	req, _ = http.NewRequest("POST", s.URL()+"/v1/responses", strings.NewReader("(zstd)"))
	req.Header.Set("Content-Encoding", "zstd")
	zresp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, zresp.Body)
	zresp.Body.Close()
	if zresp.StatusCode != 400 {
		t.Errorf("zstd body: %d", zresp.StatusCode)
	}
	for _, q := range s.Requests() {
		if q.Status != 400 && q.Status != 200 {
			t.Errorf("logged %s with status %d", q.Path, q.Status)
		}
	}
}

func TestRequestLog(t *testing.T) {
	s := start(t, Script{Rules: []Rule{{Name: "logged", Match: "log me", Turns: []Turn{{Text: "a"}, {Text: "b"}}}}})
	c := client(t)

	hreq, _ := http.NewRequest("HEAD", s.URL()+"/", nil)
	hresp, err := c.Do(hreq)
	if err != nil || hresp.StatusCode != 200 {
		t.Fatalf("HEAD /: %v %v", hresp, err)
	}
	hresp.Body.Close()
	for _, p := range []string{"/v1/models", "/models"} {
		resp, err := c.Get(s.URL() + p)
		if err != nil {
			t.Fatal(err)
		}
		var list struct {
			Data []struct{ ID, Object, Type string }
		}
		json.NewDecoder(resp.Body).Decode(&list)
		resp.Body.Close()
		if resp.StatusCode != 200 || len(list.Data) == 0 || list.Data[0].ID == "" || list.Data[0].Type != "model" {
			t.Errorf("GET %s: %d %+v", p, resp.StatusCode, list)
		}
	}
	resp, b := post(t, c, s.URL()+"/v1/messages/count_tokens", messages(false, userText("count me")))
	if n, _ := decode(t, b)["input_tokens"].(float64); resp.StatusCode != 200 || n < 1 {
		t.Errorf("count_tokens: %d %s", resp.StatusCode, b)
	}
	body := messages(true, userText("log me"), assistantCalls("t1"), toolResults("t1"))
	bb, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", s.URL()+"/v1/messages?beta=true", bytes.NewReader(bb))
	req.Header.Set("X-Api-Key", "sk-test")
	req.Header.Set("Anthropic-Version", "2023-06-01")
	mresp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, mresp.Body)
	mresp.Body.Close()
	post(t, c, s.URL()+"/v1/responses", map[string]any{"model": "gpt-5.5", "input": "log me"})
	resp, _ = post(t, c, s.URL()+"/v2/nothing", `{}`)
	if resp.StatusCode != 404 {
		t.Errorf("unknown path: %d", resp.StatusCode)
	}
	gresp, err := c.Get(s.URL() + "/v1/messages")
	if err != nil {
		t.Fatal(err)
	}
	gresp.Body.Close()
	if gresp.StatusCode != 404 {
		t.Errorf("GET /v1/messages: %d", gresp.StatusCode)
	}

	reqs := s.Requests()
	type row struct {
		method, path, api, rule string
		turn                    int
		model                   string
		status                  int
	}
	want := []row{
		{"HEAD", "/", "", "", 0, "", 200},
		{"GET", "/v1/models", "", "", 0, "", 200},
		{"GET", "/models", "", "", 0, "", 200},
		{"POST", "/v1/messages/count_tokens", "anthropic", "", 0, "claude-test", 200},
		{"POST", "/v1/messages", "anthropic", "logged", 1, "claude-test", 200},
		{"POST", "/v1/responses", "openai", "logged", 0, "gpt-5.5", 200},
		{"POST", "/v2/nothing", "", "", 0, "", 404},
		{"GET", "/v1/messages", "", "", 0, "", 404},
	}
	if len(reqs) != len(want) {
		t.Fatalf("%d requests logged, want %d", len(reqs), len(want))
	}
	for i, w := range want {
		q := reqs[i]
		got := row{q.Method, q.Path, q.API, q.Rule, q.Turn, q.Model, q.Status}
		if got != w {
			t.Errorf("request %d: %+v\nwant %+v", i, got, w)
		}
		if i > 0 && q.Time.Before(reqs[i-1].Time) {
			t.Errorf("request %d logged out of order", i)
		}
	}
	m := reqs[4]
	if m.Headers.Get("X-Api-Key") != "sk-test" || m.Headers.Get("Anthropic-Version") != "2023-06-01" {
		t.Errorf("headers %v", m.Headers)
	}
	if !bytes.Equal(m.Body, bb) {
		t.Errorf("body logged as %s", m.Body)
	}
	// The log marshals (cmd/modelmock writes it as JSONL).
	if _, err := json.Marshal(reqs); err != nil {
		t.Errorf("marshal the log: %v", err)
	}
	// Requests is a copy.
	reqs[0].Path = "changed"
	if s.Requests()[0].Path != "/" {
		t.Error("Requests shares its slice with the log")
	}
}

func TestConcurrentSessions(t *testing.T) {
	const sessions = 8
	var rules []Rule
	for i := range sessions {
		rules = append(rules, Rule{Name: fmt.Sprint("s", i), Match: fmt.Sprintf("session-%d;", i),
			Turns: []Turn{{ToolCalls: []ToolCall{{Name: "exec_command", Input: map[string]any{"cmd": "true"}}}}, {Text: fmt.Sprintf("done %d", i)}}})
	}
	sc := Script{Rules: rules}
	s := start(t, sc)
	c := client(t)
	var wg sync.WaitGroup
	errs := make(chan error, 4*sessions)
	stop := make(chan struct{})
	var swapper sync.WaitGroup
	swapper.Go(func() { // SetScript racing the requests (same script, fresh copy)
		for {
			select {
			case <-stop:
				return
			default:
				s.SetScript(Script{Rules: append([]Rule(nil), sc.Rules...)})
				time.Sleep(time.Millisecond)
			}
		}
	})
	for i := range sessions {
		wg.Go(func() {
			prompt := fmt.Sprintf("session-%d; go", i)
			for round := range 3 {
				var b []byte
				var err error
				var status int
				if i%2 == 0 {
					msgs := []map[string]any{userText(prompt)}
					for r := range round {
						msgs = append(msgs, assistantCalls(fmt.Sprint("t", r)), toolResults(fmt.Sprint("t", r)))
					}
					status, b, err = rawPost(t, c, s.URL()+"/v1/messages", messages(false, msgs...))
				} else {
					input := []any{msgItem("user", prompt)}
					for r := range round {
						input = append(input, fcall(fmt.Sprint("c", r)), fout(fmt.Sprint("c", r)))
					}
					status, b, err = rawPost(t, c, s.URL()+"/v1/responses", map[string]any{"input": input})
				}
				if err != nil || status != 200 {
					errs <- fmt.Errorf("session %d round %d: %d %v", i, round, status, err)
					return
				}
				if round > 0 && !bytes.Contains(b, fmt.Appendf(nil, "done %d", i)) {
					errs <- fmt.Errorf("session %d round %d: %s", i, round, b)
				}
				if round == 0 && bytes.Contains(b, fmt.Appendf(nil, "done %d", i)) {
					errs <- fmt.Errorf("session %d round 0 answered with text: %s", i, b)
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	swapper.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := len(s.Requests()); n != 3*sessions {
		t.Errorf("%d requests logged, want %d", n, 3*sessions)
	}
}

func TestLoopbackOnly(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "192.0.2.1:0", "[::]:0", "example.com:80", "127.0.0.1"} {
		if s, err := StartAddr(addr, Script{}); err == nil {
			s.Close()
			t.Errorf("StartAddr(%q) listened", addr)
		}
	}
	s, err := StartAddr("localhost:0", Script{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !strings.HasPrefix(s.URL(), "http://127.0.0.1:") || strings.HasSuffix(s.URL(), "/") {
		t.Errorf("URL %q", s.URL())
	}
	s2 := start(t, Script{})
	if !strings.HasPrefix(s2.URL(), "http://127.0.0.1:") {
		t.Errorf("Start URL %q", s2.URL())
	}
}

func TestLoadScript(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tour.json")
	os.WriteFile(path, []byte(`{
  "rules": [
    {"name": "hello", "match": "say hello", "turns": [
      {"text": "calling", "toolCalls": [{"name": "Bash", "input": {"command": "echo hello", "n": 12345678901234567890}}]},
      {"toolCalls": [{"id": "p1", "name": "apply_patch", "input": "*** Begin Patch\n*** End Patch"}], "delay": "1.5s"},
      {"text": "said hello", "reasoning": "easy", "usage": {"input": 120, "output": 8, "cacheRead": 3, "cacheWrite": 4}}
    ]},
    {"name": "broken", "match": "break", "turns": [{"status": 529, "errorMessage": "busy"}, {"malformed": true}, {"hang": true}]}
  ],
  "default": {"text": "no rule for that"}
}`), 0o600)
	sc, err := LoadScript(path)
	if err != nil {
		t.Fatal(err)
	}
	want := Script{
		Rules: []Rule{
			{Name: "hello", Match: "say hello", Turns: []Turn{
				{Text: "calling", ToolCalls: []ToolCall{{Name: "Bash", Input: json.RawMessage(`{"command": "echo hello", "n": 12345678901234567890}`)}}},
				{ToolCalls: []ToolCall{{ID: "p1", Name: "apply_patch", Input: "*** Begin Patch\n*** End Patch"}}, Delay: 1500 * time.Millisecond},
				{Text: "said hello", Reasoning: "easy", Usage: Usage{120, 8, 3, 4}},
			}},
			{Name: "broken", Match: "break", Turns: []Turn{{Status: 529, ErrorMessage: "busy"}, {Malformed: true}, {Hang: true}}},
		},
		Default: &Turn{Text: "no rule for that"},
	}
	if !reflect.DeepEqual(sc, want) {
		t.Errorf("LoadScript:\n%#v\nwant\n%#v", sc, want)
	}
	// A Turn round-trips through JSON.
	b, err := json.Marshal(want.Rules[0].Turns[1])
	if err != nil {
		t.Fatal(err)
	}
	var back Turn
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, want.Rules[0].Turns[1]) {
		t.Errorf("round trip %s: %#v, %v", b, back, err)
	}

	for name, text := range map[string]string{
		"unknown field":      `{"rules": [{"match": "x", "turns": [{"tool_calls": []}]}]}`,
		"bad duration":       `{"default": {"delay": "soon"}}`,
		"negative duration":  `{"default": {"delay": "-1s"}}`,
		"not JSON":           `rules: []`,
		"trailing data":      `{} {}`,
		"unknown call field": `{"default": {"toolCalls": [{"name": "x", "args": {}}]}}`,
	} {
		p := filepath.Join(dir, "bad.json")
		os.WriteFile(p, []byte(text), 0o600)
		if _, err := LoadScript(p); err == nil {
			t.Errorf("%s: LoadScript accepted %s", name, text)
		}
	}
	if _, err := LoadScript(filepath.Join(dir, "missing.json")); err == nil {
		t.Error("missing file accepted")
	}
}

// TestLimitThatPasses: a 429 turn with Times 2 and headers answers the
// first two requests routed to it with the status and the headers; the
// third (a CLI retrying the same request) gets the rule's next turn.
func TestLimitThatPasses(t *testing.T) {
	s := start(t, Script{Rules: []Rule{{Name: "limited", Match: "limited task", Turns: []Turn{
		{Status: 429, ErrorMessage: "slow down", Times: 2, Headers: map[string]string{"retry-after": "5", "anthropic-ratelimit-requests-reset": "2026-12-02T21:23:00Z"}},
		{Text: "through"},
	}}}})
	c := client(t)
	url := s.URL() + "/v1/messages"
	for i := range 2 {
		resp, b := post(t, c, url, messages(false, userText("the limited task")))
		if resp.StatusCode != 429 || resp.Header.Get("retry-after") != "5" || resp.Header.Get("anthropic-ratelimit-requests-reset") == "" || !strings.Contains(string(b), "slow down") {
			t.Fatalf("request %d: %d %v %s", i+1, resp.StatusCode, resp.Header, b)
		}
	}
	resp, b := post(t, c, url, messages(false, userText("the limited task")))
	if resp.StatusCode != http.StatusOK || textOf(t, b) != "through" {
		t.Fatalf("the third request: %d %s", resp.StatusCode, b)
	}
}
