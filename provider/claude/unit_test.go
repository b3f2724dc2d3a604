package claude

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agents-fleet/fleet/internal/modelmock"
	"github.com/agents-fleet/fleet/provider"
	"github.com/agents-fleet/fleet/provider/agentcli"
	"github.com/agents-fleet/fleet/provider/agentcli/agentclitest"
)

func TestObjectFields(t *testing.T) {
	good := []string{
		`{}`,
		` { "a" : 1 , "b":"x\"y\\", "c":{"d":[1,{"e":null}],"f":"}"}, "g":true, "h":-1.5e3 } `,
		`{"s":"é ü \u00e9","arr":[[],[[]],{}]}`,
	}
	for _, g := range good {
		n := 0
		if err := objectFields([]byte(g), func(k, v []byte) bool { n++; return true }); err != nil {
			t.Errorf("objectFields(%s) = %v", g, err)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(g), &m); err != nil || len(m) != n {
			t.Errorf("%s: %d members, json says %d (%v)", g, n, len(m), err)
		}
	}
	bad := []string{``, `hello`, `[1]`, `{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{"a":"x}`, `{"a":[1}`, `{"a":{]}`, `{"a":tru}`, `{"a":1} x`, `{a:1}`, `{"a":1 "b":2}`}
	for _, b := range bad {
		if err := objectFields([]byte(b), func(k, v []byte) bool { return true }); err == nil {
			t.Errorf("objectFields(%q) accepted it", b)
		}
	}
	var got []string
	_ = objectFields([]byte(`{"type":"x","message":{"id":"m"},"n":12}`), func(k, v []byte) bool {
		got = append(got, string(k)+"="+string(v))
		return true
	})
	if strings.Join(got, " ") != `type="x" message={"id":"m"} n=12` {
		t.Fatalf("members: %v", got)
	}
	if s, ok := str([]byte(`"a\nb \u00e9"`)); !ok || s != "a\nb é" {
		t.Fatalf("str = %q %v", s, ok)
	}
	if _, ok := str([]byte(`null`)); ok {
		t.Fatal("str(null) ok")
	}
	if number([]byte("1234")) != 1234 || number([]byte("-7")) != -7 || number([]byte("1.5")) != 0 || number([]byte("null")) != 0 {
		t.Fatal("number")
	}
}

func TestArgsAndEnv(t *testing.T) {
	p := New(provider.Options{Model: "opus", PermissionMode: "acceptEdits", Args: []string{"--max-turns", "5"}, Env: []string{"EXTRA=1", "DISABLE_AUTOUPDATER=0"}})
	args, err := p.args(provider.Spec{
		ResumeID:     "11111111-2222-4333-8444-555555555555",
		Instructions: "You coordinate.",
		Model:        "sonnet",
		MCP:          []provider.MCPServer{{Name: "fleet", URL: "http://127.0.0.1:1/mcp", Headers: map[string]string{"Authorization": "Bearer t"}, Tools: []string{"spawn_worker", "ask"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(args, " ")
	for _, w := range []string{
		"-p --input-format stream-json --output-format stream-json --verbose --permission-prompt-tool stdio",
		"--model sonnet", "--resume 11111111-2222-4333-8444-555555555555", "--append-system-prompt You coordinate.",
		`--mcp-config={"mcpServers":{"fleet":{"type":"http","url":"http://127.0.0.1:1/mcp","headers":{"Authorization":"Bearer t"}}}}`,
		"--allowedTools=mcp__fleet__spawn_worker,mcp__fleet__ask", "--permission-mode acceptEdits",
	} {
		if !strings.Contains(joined, w) {
			t.Errorf("args lack %q:\n%s", w, joined)
		}
	}
	if !strings.HasSuffix(joined, "--max-turns 5") {
		t.Errorf("Options.Args are not last: %s", joined)
	}
	if a, _ := p.args(provider.Spec{}); slices.Contains(a, "--model") {
		// Options.Model applies when the spec has none.
	} else {
		t.Errorf("Options.Model not used: %v", a)
	}
	if _, err := p.args(provider.Spec{MCP: []provider.MCPServer{{Name: "a__b"}}}); err == nil {
		t.Error("a server name with __ was accepted")
	}

	env := p.Env([]string{"PATH=/bin", "CLAUDE_CODE_MAX_RETRIES=7"})
	get := func(k string) string { v, _ := agentcli.LookupEnv(env, k); return v }
	if get("CLAUDE_CODE_MAX_RETRIES") != "7" || get("DISABLE_AUTOUPDATER") != "0" || get("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC") != "1" || get("EXTRA") != "1" {
		t.Fatalf("env = %v", env)
	}
	if env := New(provider.Options{}).Env([]string{"PATH=/bin"}); !slices.Contains(env, "CLAUDE_CODE_MAX_RETRIES=2") {
		t.Fatalf("default retry bound missing: %v", env)
	}
}

func TestFleetToolMatch(t *testing.T) {
	servers := []provider.MCPServer{{Name: "fleet", Tools: []string{"ask"}}, {Name: "all"}}
	for tool, want := range map[string]bool{
		"mcp__fleet__ask": true, "mcp__fleet__spawn": false, "mcp__all__x": true, "Bash": false, "mcp__fleetx__ask": false, "mcp__other__ask": false,
	} {
		if got := isFleetTool(servers, tool); got != want {
			t.Errorf("isFleetTool(%q) = %v", tool, got)
		}
	}
	if got := fleetTools(servers); !slices.Equal(got, []string{"mcp__fleet__ask", "mcp__all"}) {
		t.Errorf("fleetTools = %v", got)
	}
}

func TestSessionRules(t *testing.T) {
	raw := `[{"type":"addRules","rules":[{"toolName":"Bash","ruleContent":"touch y.txt"}],"behavior":"allow","destination":"localSettings"},
		{"type":"addDirectories","directories":["/w"],"destination":"session"},
		{"type":"setMode","mode":"acceptEdits","destination":"session"},
		{"type":"setMode","mode":"bypassPermissions","destination":"session"},
		{"type":"removeRules","rules":[{"toolName":"Bash"}],"behavior":"deny","destination":"userSettings"}]`
	rules := sessionRules([]byte(raw))
	if len(rules) != 3 {
		t.Fatalf("rules = %+v", rules)
	}
	line := allowLine("r1", []byte(`{"command":"touch y.txt"}`), rules)
	var m map[string]any
	if err := json.Unmarshal(line, &m); err != nil {
		t.Fatalf("allowLine is not JSON: %s", line)
	}
	perms := m["response"].(map[string]any)["response"].(map[string]any)["updatedPermissions"].([]any)
	if len(perms) != 3 {
		t.Fatalf("updatedPermissions = %v", perms)
	}
	for _, p := range perms {
		if p.(map[string]any)["destination"] != "session" {
			t.Fatalf("rule %v is not scoped to the session", p)
		}
	}
	if d := describeRules(rules); d != "Bash(touch y.txt); access to /w; all file edits" {
		t.Fatalf("describeRules = %q", d)
	}
	if err := json.Unmarshal(denyLine("r2", "no \"way\"\n"), &m); err != nil {
		t.Fatal(err)
	}
}

func TestDetail(t *testing.T) {
	if d := detail(map[string]any{"command": "make\nmake test", "description": "build"}); d != "make …" {
		t.Fatalf("detail = %q", d)
	}
	if d := detail(map[string]any{"x": 1}); d != `{"x":1}` {
		t.Fatalf("detail = %q", d)
	}
	if d := oneLine(strings.Repeat("é", 300)); len([]rune(d)) != 202 {
		t.Fatalf("oneLine kept %d runes", len([]rune(d)))
	}
}

func TestInspect(t *testing.T) {
	cli := modelmock.RequireCLI(t, "claude")
	home := t.TempDir()
	p := New(provider.Options{Path: cli})
	in := p.Inspect(context.Background(), []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home,
		"ANTHROPIC_BASE_URL=http://user:secret@127.0.0.1:18080", "ANTHROPIC_API_KEY=sk-very-secret"})
	if in.Err != nil || in.Path == "" || !strings.HasPrefix(in.Version, "2.") {
		t.Fatalf("Inspect = %+v", in)
	}
	if strings.HasPrefix(in.Version, VerifiedVersions[0]+" ") != in.Verified {
		t.Fatalf("Verified = %v for %q", in.Verified, in.Version)
	}
	if in.Endpoint != "ANTHROPIC_BASE_URL=http://***@127.0.0.1:18080" || in.Credentials != "ANTHROPIC_API_KEY set" {
		t.Fatalf("endpoint %q, credentials %q", in.Endpoint, in.Credentials)
	}
	if strings.Contains(in.Endpoint+in.Credentials, "secret") {
		t.Fatal("a secret was printed")
	}

	// From settings.json, and nothing configured.
	if err := os.MkdirAll(filepath.Join(home, ".claude"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(home, ".claude", "settings.json"), []byte(`{"env":{"ANTHROPIC_BASE_URL":"https://gw.example"},"apiKeyHelper":"/bin/get-key"}`), 0o644)
	in = p.Inspect(context.Background(), []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home})
	if in.Endpoint != "ANTHROPIC_BASE_URL=https://gw.example (settings.json)" || !strings.HasPrefix(in.Credentials, "apiKeyHelper in ") {
		t.Fatalf("from settings: endpoint %q, credentials %q", in.Endpoint, in.Credentials)
	}
	in = p.Inspect(context.Background(), []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()})
	if in.Endpoint != "default (api.anthropic.com)" || in.Credentials != "none found" {
		t.Fatalf("bare: endpoint %q, credentials %q", in.Endpoint, in.Credentials)
	}

	// --version failing.
	bad := agentclitest.FakeCLI(t, "claude", "#!/bin/sh\necho 'no such flag' >&2\nexit 2\n")
	if in := New(provider.Options{Path: bad}).Inspect(context.Background(), nil); in.Err == nil || !strings.Contains(in.Err.Error(), "no such flag") {
		t.Fatalf("failing --version: %+v", in)
	}
}

// The MCP config, which carries the agent's token, never stands on the
// command line: it goes to a 0600 file in a 0700 directory.
func TestMCPConfigIsAPrivateFile(t *testing.T) {
	args := []string{"-p", `--mcp-config={"mcpServers":{"fleet":{"headers":{"Authorization":"Bearer secret"}}}}`, "--allowedTools=x"}
	dir, err := privateMCPConfig(args)
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if strings.Contains(strings.Join(args, " "), "secret") {
		t.Fatalf("the token is still on the command line: %q", args)
	}
	file := strings.TrimPrefix(args[1], "--mcp-config=")
	fi, err := os.Stat(file)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("config file %s: %v %v", file, fi, err)
	}
	if di, err := os.Stat(dir); err != nil || di.Mode().Perm() != 0o700 {
		t.Fatalf("config dir %s: %v %v", dir, di, err)
	}
	if b, _ := os.ReadFile(file); !strings.Contains(string(b), "Bearer secret") {
		t.Fatalf("config file holds %q", b)
	}
}
