package codex

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agents-fleet/fleet/provider"
	"github.com/agents-fleet/fleet/provider/agentcli/agentclitest"
)

// No prefix of a recorded line makes the parser panic or emit nonsense;
// broken lines are counted as garbage.
func TestTruncatedLines(t *testing.T) {
	lines, _ := recordedLines(t)
	h := agentclitest.NewHost(allow)
	s := parseSession(t, h)
	for _, line := range lines {
		for cut := 1; cut < len(line); cut += 13 {
			s.handleLine(slices.Clone(line[:cut]))
		}
	}
	s.rpc.WaitPrompts()
	if s.rd.garbage == 0 {
		t.Error("no truncated line was counted as garbage")
	}
	evs, _ := h.Snapshot()
	if n := agentclitest.Count[provider.TurnEnded](evs); n != 0 {
		t.Errorf("%d TurnEnded from truncated lines", n)
	}
}

func FuzzHandleLine(f *testing.F) {
	lines, _ := recordedLines(f)
	for _, l := range lines {
		f.Add(l)
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		s := parseSession(t, agentclitest.Discard{})
		s.handleLine(line)
		s.rpc.WaitPrompts()
	})
}

// feedLines runs JSON lines through a parse session with a turn open as
// "t2" (the running turn).
func feedLines(t *testing.T, lines ...string) []provider.Event {
	t.Helper()
	h := agentclitest.NewHost(allow)
	s := parseSession(t, h)
	ctx, cancel := context.WithCancel(s.ctx)
	s.turn = &turn{id: "t2", ended: make(chan struct{}), ctx: ctx, cancel: cancel}
	for _, l := range lines {
		s.handleLine([]byte(l))
	}
	s.rpc.WaitPrompts()
	evs, _ := h.Snapshot()
	return evs
}

func usageLine(turn string, total, last [3]int64) string {
	b, _ := json.Marshal(map[string]any{"method": "thread/tokenUsage/updated", "params": map[string]any{
		"threadId": "th", "turnId": turn, "tokenUsage": map[string]any{
			"total":              map[string]any{"inputTokens": total[0], "outputTokens": total[1], "cachedInputTokens": total[2], "reasoningOutputTokens": 0, "totalTokens": total[0] + total[1]},
			"last":               map[string]any{"inputTokens": last[0], "outputTokens": last[1], "cachedInputTokens": last[2], "reasoningOutputTokens": 0, "totalTokens": last[0] + last[1]},
			"modelContextWindow": 1000,
		}}})
	return string(b)
}

func TestUsageDeltas(t *testing.T) {
	evs := feedLines(t,
		usageLine("t1", [3]int64{230, 25, 30}, [3]int64{130, 5, 30}), // replayed by thread/resume: baseline only
		usageLine("t2", [3]int64{330, 30, 30}, [3]int64{100, 5, 0}),
		usageLine("t2", [3]int64{330, 30, 30}, [3]int64{100, 5, 0}), // repeated: nothing new
		usageLine("t2", [3]int64{450, 40, 50}, [3]int64{120, 10, 20}),
	)
	u := agentclitest.All[provider.Usage](evs)
	if len(u) != 2 || u[0].InputTokens != 100 || u[0].OutputTokens != 5 || u[1].InputTokens != 120 || u[1].CacheReadTokens != 20 ||
		u[1].ContextTokens != 130 || u[1].ContextWindow != 1000 {
		t.Fatalf("usage = %+v", u)
	}
	// The first update of a fresh thread counts its last request.
	u = agentclitest.All[provider.Usage](feedLines(t, usageLine("t2", [3]int64{100, 20, 0}, [3]int64{100, 20, 0})))
	if len(u) != 1 || u[0].InputTokens != 100 || u[0].OutputTokens != 20 {
		t.Fatalf("first usage = %+v", u)
	}
}

func TestItemsMapping(t *testing.T) {
	evs := feedLines(t,
		`{"method":"item/started","params":{"item":{"type":"fileChange","id":"p1","changes":[{"path":"/w/a.go","kind":{"type":"update","move_path":"/w/b.go"},"diff":"-x\n+y"},{"path":"/w/c.go","kind":"delete","diff":""}],"status":"inProgress"},"threadId":"th","turnId":"t2"}}`,
		`{"method":"item/completed","params":{"item":{"type":"fileChange","id":"p1","changes":[{"path":"/w/a.go","kind":{"type":"update","move_path":"/w/b.go"},"diff":"-x\n+y"},{"path":"/w/c.go","kind":"delete","diff":""}],"status":"completed","startedAtMs":1000,"completedAtMs":1250},"threadId":"th","turnId":"t2"}}`,
		`{"method":"item/completed","params":{"item":{"type":"commandExecution","id":"c1","command":"/bin/bash -lc 'false'","cwd":"/w","commandActions":[],"status":"failed","exitCode":1,"aggregatedOutput":"","durationMs":12},"threadId":"th","turnId":"t2"}}`,
		`{"method":"item/started","params":{"item":{"type":"mcpToolCall","id":"m1","server":"fleet","tool":"spawn_worker","arguments":{"task":"x"},"status":"inProgress"},"threadId":"th","turnId":"t2"}}`,
		`{"method":"item/completed","params":{"item":{"type":"mcpToolCall","id":"m1","server":"fleet","tool":"spawn_worker","arguments":{"task":"x"},"status":"failed","error":{"message":"no such worker"}},"threadId":"th","turnId":"t2"}}`,
		`{"method":"item/started","params":{"item":{"type":"commandExecution","id":"c2","command":"sleep 9","cwd":"/w","commandActions":[],"status":"inProgress"},"threadId":"th","turnId":"t2"}}`,
		`{"method":"item/completed","params":{"item":{"type":"agentMessage","id":"a1","text":"partial"},"threadId":"th","turnId":"t2"}}`,
		`{"method":"turn/completed","params":{"threadId":"th","turn":{"id":"t2","status":"failed","items":[],"error":{"message":"unexpected status 401 Unauthorized","codexErrorInfo":{"httpConnectionFailed":{"httpStatusCode":401}},"additionalDetails":null}}}}`,
		`{"method":"item/completed","params":{"item":{"type":"commandExecution","id":"c2","command":"sleep 9","cwd":"/w","commandActions":[],"status":"failed","exitCode":137},"threadId":"th","turnId":"t2"}}`,
	)
	edits := agentclitest.All[provider.FileEdited](evs)
	want := []provider.FileEdited{{Path: "/w/a.go", Change: provider.Deleted, Tool: "apply_patch"}, {Path: "/w/b.go", Change: provider.Created, Tool: "apply_patch"}, {Path: "/w/c.go", Change: provider.Deleted, Tool: "apply_patch"}}
	if !slices.Equal(edits, want) {
		t.Errorf("edits = %+v", edits)
	}
	done := agentclitest.All[provider.ToolCompleted](evs)
	if len(done) != 4 {
		t.Fatalf("completed = %+v", done)
	}
	if done[0].Duration.Milliseconds() != 250 || done[0].IsError {
		t.Errorf("patch = %+v", done[0])
	}
	if !done[1].IsError || done[1].Result != "exit code 1" || done[1].Duration.Milliseconds() != 12 {
		t.Errorf("failed command = %+v", done[1])
	}
	if done[2].Name != "mcp__fleet__spawn_worker" || !done[2].IsError || done[2].Result != "no such worker" {
		t.Errorf("mcp = %+v", done[2])
	}
	if done[3].ID != "c2" || !done[3].IsError {
		t.Errorf("the open command was not completed at the turn's end: %+v", done[3])
	}
	if n := agentclitest.Count[provider.ToolStarted](evs); n != 4 {
		t.Errorf("%d ToolStarted, want 4 (one synthesised for c1, none for c2's late completion)", n)
	}
	ends := agentclitest.All[provider.TurnEnded](evs)
	var te *TurnError
	if len(ends) != 1 || ends[0].Result != "partial" || !errors.As(ends[0].Err, &te) ||
		ends[0].Err.Error() != "unexpected status 401 Unauthorized (httpConnectionFailed, HTTP 401)" {
		t.Fatalf("TurnEnded = %+v", ends)
	}
}

func TestApprovalsMapping(t *testing.T) {
	var got []provider.PermissionRequest
	h := agentclitest.NewHost(func(_ context.Context, r provider.PermissionRequest) (provider.Decision, error) {
		got = append(got, r)
		return provider.Decision{Allow: true, OptionID: "acceptWithExecpolicyAmendment"}, nil
	})
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	s := parseSessionTo(t, h, w)
	s.mcp["fleet"] = true
	for _, l := range []string{
		`{"method":"item/commandExecution/requestApproval","id":0,"params":{"kind":"command","threadId":"th","turnId":"t","itemId":"call_1","startedAtMs":1,"command":"/bin/bash -lc 'echo hi > x.txt'","cwd":"/w","reason":"needs to write","availableDecisions":["accept",{"acceptWithExecpolicyAmendment":{"execpolicy_amendment":["/bin/bash","-lc","echo hi > x.txt"]}},"cancel"]}}`,
		`{"method":"mcpServer/elicitation/request","id":1,"params":{"threadId":"th","serverName":"fleet","mode":"form","_meta":{"codex_approval_kind":"mcp_tool_call","tool_name":"ping","tool_params":{}},"message":"Allow?","requestedSchema":{"type":"object","properties":{}}}}`,
		`{"id":"s1","method":"attestation/generate","params":{}}`,
	} {
		s.handleLine([]byte(l))
	}
	s.rpc.WaitPrompts()
	w.Close()
	out, _ := io.ReadAll(r)
	r.Close()
	if len(got) != 1 {
		t.Fatalf("permissions = %+v", got)
	}
	p := got[0]
	if p.Tool != "exec_command" || p.ToolCallID != "call_1" || p.Description != "needs to write" || p.Input["cwd"] != "/w" {
		t.Errorf("request = %+v", p)
	}
	kinds := []provider.OptionKind{}
	for _, o := range p.Options {
		kinds = append(kinds, o.Kind)
	}
	if !slices.Equal(kinds, []provider.OptionKind{provider.AllowOnce, provider.AllowAlways, provider.Reject}) || !strings.Contains(p.Options[1].Label, "echo hi > x.txt") {
		t.Errorf("options = %+v", p.Options)
	}
	answers := string(out)
	for _, w := range []string{
		`{"id":0,"result":{"decision":{"acceptWithExecpolicyAmendment":{"execpolicy_amendment":["/bin/bash","-lc","echo hi \u003e x.txt"]}}}}`,
		`{"id":1,"result":{"action":"accept"}}`,
		`{"id":"s1","error":{"code":-32601,"message":"agents-fleet does not handle attestation/generate"}}`,
	} {
		if !strings.Contains(answers, w) {
			t.Errorf("answers lack %s:\n%s", w, answers)
		}
	}
}

func TestChoose(t *testing.T) {
	opts := decisionOptions(nil)
	cases := []struct {
		d    provider.Decision
		err  error
		want string
	}{
		{provider.Decision{Allow: true}, nil, `"accept"`},
		{provider.Decision{Allow: true, OptionID: "acceptForSession"}, nil, `"acceptForSession"`},
		{provider.Decision{OptionID: "cancel"}, nil, `"cancel"`},
		{provider.Decision{}, nil, `"decline"`},
		{provider.Decision{Allow: true, OptionID: "accept"}, provider.ErrNoAnswer, `"decline"`},
	}
	for _, c := range cases {
		if got := string(choose(opts, c.d, c.err)); got != c.want {
			t.Errorf("choose(%+v, %v) = %s, want %s", c.d, c.err, got, c.want)
		}
	}
}

func writeConfig(t *testing.T, toml string) []string {
	t.Helper()
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	return []string{"CODEX_HOME=" + home, "PATH=/usr/bin"}
}

func hasArg(args []string, a string) bool { return slices.Contains(args, a) }

func TestCommandLineRetries(t *testing.T) {
	custom := `model_provider = "mock" # the local one
[model_providers.mock]
name = "Mock"
base_url = "http://127.0.0.1:1/v1"
`
	cases := []struct {
		name  string
		toml  string
		args  []string
		want  []string
		avoid []string
	}{
		{"custom provider", custom, nil,
			[]string{"model_providers.mock.request_max_retries=2", "model_providers.mock.stream_max_retries=2"}, nil},
		{"user's own bound", custom + "request_max_retries = 7\n", nil,
			[]string{"model_providers.mock.stream_max_retries=2"}, []string{"model_providers.mock.request_max_retries=2"}},
		{"user's -c bound", custom, []string{"-c", "model_providers.mock.stream_max_retries=0"},
			[]string{"model_providers.mock.request_max_retries=2"}, []string{"model_providers.mock.stream_max_retries=2"}},
		{"built-in openai", `model = "gpt-5.5"`, nil, nil, []string{"model_providers.openai.request_max_retries=2"}},
		{"profile", `profile = "local"
[profiles.local]
model_provider = "lab"
[model_providers."lab"]
name = "Lab"
description = """
several
lines = 1
"""
tags = [
  "a",
]
`, nil, []string{"model_providers.lab.request_max_retries=2"}, nil},
		{"no config", "", nil, nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := writeConfig(t, c.toml)
			p := New(provider.Options{Args: c.args})
			args, _ := p.commandLine(provider.Spec{Env: env}, env, "mark")
			if args[0] != "app-server" {
				t.Fatalf("args = %q", args)
			}
			for _, w := range c.want {
				if !hasArg(args, w) {
					t.Errorf("args %q lack %s", args, w)
				}
			}
			for _, a := range c.avoid {
				if hasArg(args, a) {
					t.Errorf("args %q have %s", args, a)
				}
			}
			if !hasArg(args, `shell_environment_policy.set.`+commandEnv+`="mark"`) {
				t.Errorf("args %q lack the command mark", args)
			}
			if len(c.args) > 0 && !slices.Equal(args[len(args)-len(c.args):], c.args) {
				t.Errorf("the user's args do not come last: %q", args)
			}
		})
	}
}

func TestCommandLineMCP(t *testing.T) {
	env := writeConfig(t, "")
	spec := provider.Spec{MCP: []provider.MCPServer{
		{Name: "fleet", URL: "http://127.0.0.1:9/mcp/x", Headers: map[string]string{"Authorization": "Bearer s3cret", "X-Fleet": "w1"}},
		{Name: "my server.v2", URL: "http://127.0.0.1:9/other"},
	}}
	args, extra := New(provider.Options{}).commandLine(spec, env, "m")
	for _, w := range []string{
		`mcp_servers.fleet.url="http://127.0.0.1:9/mcp/x"`,
		`mcp_servers.fleet.default_tools_approval_mode="approve"`,
		`mcp_servers.fleet.env_http_headers={"Authorization"="AGENTS_FLEET_MCP_HEADER_0_0","X-Fleet"="AGENTS_FLEET_MCP_HEADER_0_1"}`,
		`mcp_servers.my_server_v2.url="http://127.0.0.1:9/other"`,
	} {
		if !hasArg(args, w) {
			t.Errorf("args %q lack %s", args, w)
		}
	}
	if strings.Contains(strings.Join(args, " "), "s3cret") {
		t.Error("a header value is on the command line")
	}
	if !slices.Equal(extra, []string{"AGENTS_FLEET_MCP_HEADER_0_0=Bearer s3cret", "AGENTS_FLEET_MCP_HEADER_0_1=w1"}) {
		t.Errorf("extra env = %q", extra)
	}
}

func TestTomlString(t *testing.T) {
	for in, want := range map[string]string{
		`plain`:         `"plain"`,
		`a "q" \ b`:     `"a \"q\" \\ b"`,
		"tab\tnl\n\x01": `"tab\tnl\n\u0001"`,
		"ünï":           `"ünï"`,
	} {
		if got := tomlString(in); got != want {
			t.Errorf("tomlString(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestDescribeEndpoint(t *testing.T) {
	env := writeConfig(t, "model_provider = \"mock\"\n[model_providers.mock]\nname = \"M\"\nbase_url = \"http://127.0.0.1:7/v1\"\nenv_key = \"MOCK_KEY\"\n")
	endpoint, creds := describeEndpoint(loadUserConfig(env), nil, append(env, "MOCK_KEY=hush"))
	if !strings.Contains(endpoint, "base_url=http://127.0.0.1:7/v1") || creds != "MOCK_KEY set" {
		t.Errorf("endpoint %q, credentials %q", endpoint, creds)
	}
	env = writeConfig(t, "")
	endpoint, creds = describeEndpoint(loadUserConfig(env), nil, append(env, "OPENAI_API_KEY=hush"))
	if !strings.HasPrefix(endpoint, "default (api.openai.com") || creds != "OPENAI_API_KEY set" {
		t.Errorf("endpoint %q, credentials %q", endpoint, creds)
	}
	if bytes.Contains([]byte(endpoint+creds), []byte("hush")) {
		t.Error("a secret was printed")
	}
}

func TestMissingCLI(t *testing.T) {
	_, err := New(provider.Options{}).Start(t.Context(), provider.Spec{Env: []string{"PATH=" + t.TempDir()}}, agentclitest.NewHost(allow))
	var me *provider.MissingCLIError
	if !errors.As(err, &me) || me.Command != "codex" || me.Package != "@openai/codex" || me.ConfigKey != "providers.codex.path" {
		t.Fatalf("err = %v", err)
	}
}

// TestLimitErrors: the errors Codex ends a turn with on a limit are told
// from others (../shared/reference/agent-clis.md §6).
func TestLimitErrors(t *testing.T) {
	for raw, want := range map[string]bool{
		`{"message":"exceeded retry limit, last status: 429 Too Many Requests","codexErrorInfo":{"responseTooManyFailedAttempts":{"httpStatusCode":429}}}`: true,
		`{"message":"You've hit your usage limit. Upgrade to Pro or try again at 9:23 PM.","codexErrorInfo":"usageLimitExceeded"}`:                         true,
		`{"message":"unexpected status 503 Service Unavailable","codexErrorInfo":{"httpConnectionFailed":{"httpStatusCode":503}}}`:                         false,
		`{"message":"boom","codexErrorInfo":"internalServerError"}`:                                                                                        false,
	} {
		var e turnError
		if err := json.Unmarshal([]byte(raw), &e); err != nil {
			t.Fatal(err)
		}
		if got := e.limited(); got != want {
			t.Errorf("%s: limited %v, want %v", raw, got, want)
		}
	}
}
