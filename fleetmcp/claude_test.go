//go:build unix

package fleetmcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/internal/modelmock"
)

// TestClaudeCallsFleetTools runs the real Claude Code CLI against the
// server, with the MCP config the daemon will give it and a scripted model
// that calls the fleet's tools: the server loads as "fleet", a pre-allowed
// tool runs without a permission prompt as the token's agent, and bad
// arguments come back to the model as a tool error while the session goes on.
func TestClaudeCallsFleetTools(t *testing.T) {
	bin := modelmock.RequireCLI(t, "claude")
	if testing.Short() {
		t.Skip("starts the Claude CLI")
	}
	mock, err := modelmock.Start(modelmock.Script{Rules: []modelmock.Rule{{
		Name: "fleet", Match: "fleetmcp-e2e:", Turns: []modelmock.Turn{
			{ToolCalls: []modelmock.ToolCall{{Name: "mcp__fleet__list_workers", Input: map[string]any{}}}},
			{ToolCalls: []modelmock.ToolCall{{Name: "mcp__fleet__spawn_worker", Input: map[string]any{"task": "write the docs", "model": "opus"}}}},
			{ToolCalls: []modelmock.ToolCall{{Name: "mcp__fleet__spawn_worker", Input: map[string]any{"task": "   "}}}},
			{ToolCalls: []modelmock.ToolCall{{Name: "mcp__fleet__confirm", Input: map[string]any{"summary": "merge w2's branch"}}}},
			{Text: "done"},
		},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	defer mock.Close()

	f := newFake()
	s := start(t, f)
	ep := s.Endpoint("coordinator")
	cfg, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{
		ep.Name: map[string]any{"type": "http", "url": ep.URL, "headers": ep.Headers},
	}})
	var allowed []string
	for _, name := range ep.Tools {
		allowed = append(allowed, "mcp__"+ep.Name+"__"+name)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-p", "fleetmcp-e2e: look at the fleet",
		"--output-format", "stream-json", "--verbose",
		"--mcp-config", string(cfg), "--strict-mcp-config",
		"--allowedTools", strings.Join(allowed, ","))
	cmd.Dir = t.TempDir()
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8", "HOME=" + t.TempDir(),
		"ANTHROPIC_BASE_URL=" + mock.URL(), "ANTHROPIC_API_KEY=sk-test",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "CLAUDE_CODE_MAX_RETRIES=0", "DISABLE_AUTOUPDATER=1",
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	defer func() {
		if t.Failed() {
			t.Logf("exit: %v\nstdout:\n%s\nstderr:\n%s", runErr, stdout.String(), stderr.String())
		}
	}()
	if runErr != nil {
		t.Fatalf("claude: %v", runErr)
	}

	var lines []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(stdout.Bytes()))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			lines = append(lines, m)
		}
	}
	var connected bool
	var toolResults []map[string]any
	var result map[string]any
	for _, l := range lines {
		switch l["type"] {
		case "system":
			if l["subtype"] != "init" {
				continue
			}
			servers, _ := l["mcp_servers"].([]any)
			for _, sv := range servers {
				if m, _ := sv.(map[string]any); m["name"] == "fleet" && m["status"] == "connected" {
					connected = true
				}
			}
		case "user":
			content, _ := field(l, "message", "content").([]any)
			for _, c := range content {
				if m, _ := c.(map[string]any); m["type"] == "tool_result" {
					toolResults = append(toolResults, m)
				}
			}
		case "result":
			result = l
		}
	}
	if !connected {
		t.Error(`the init line does not show "fleet" connected`)
	}
	if result == nil || result["is_error"] != false || result["result"] != "done" {
		t.Fatalf("result line: %v", result)
	}
	if len(toolResults) != 4 {
		t.Fatalf("%d tool results, want 4: %v", len(toolResults), toolResults)
	}
	if text := toolResultText(toolResults[0]); toolResults[0]["is_error"] == true || !strings.Contains(text, `"id":"w1"`) {
		t.Errorf("list_workers result: %v", toolResults[0])
	}
	// Claude shows the model the structured content when there is some.
	if text := toolResultText(toolResults[1]); toolResults[1]["is_error"] == true || !strings.Contains(text, `"worker":"w2"`) {
		t.Errorf("spawn_worker result: %v", toolResults[1])
	}
	if text := toolResultText(toolResults[2]); toolResults[2]["is_error"] != true || !strings.Contains(text, "task is empty") {
		t.Errorf("spawn_worker with a blank task: %v", toolResults[2])
	}
	if text := toolResultText(toolResults[3]); toolResults[3]["is_error"] == true || text != "approved" {
		t.Errorf("confirm result: %v", toolResults[3])
	}

	calls, _ := f.snapshot()
	var methods []string
	for _, c := range calls {
		methods = append(methods, c.Method)
		if c.Method == "SpawnWorker" && (c.Caller != "coordinator" || c.Spawn != (SpawnRequest{Task: "write the docs", Model: "opus"})) {
			t.Errorf("SpawnWorker call %+v", c)
		}
	}
	if strings.Join(methods, ",") != "Workers,SpawnWorker,ConfirmOperator" {
		t.Errorf("Fleet calls %v, want Workers, SpawnWorker, ConfirmOperator", methods)
	}
	if os.Getenv("FLEETMCP_DUMP") != "" {
		t.Logf("stdout:\n%s", stdout.String())
	}
}

func field(m map[string]any, path ...string) any {
	var v any = m
	for _, p := range path {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[p]
	}
	return v
}

// toolResultText is a tool_result block's text: Claude gives MCP results as
// a string or as text blocks.
func toolResultText(m map[string]any) string {
	switch c := m["content"].(type) {
	case string:
		return c
	case []any:
		var b strings.Builder
		for _, x := range c {
			if tb, _ := x.(map[string]any); tb["type"] == "text" {
				s, _ := tb["text"].(string)
				b.WriteString(s)
			}
		}
		return b.String()
	}
	return ""
}
