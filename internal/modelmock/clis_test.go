//go:build unix

package modelmock

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The real CLIs against one shared server: each test's prompt carries its
// own marker, so the three run concurrently against the same script.
// Under CI they must run (RequireCLI fails when a CLI is missing).

const cliTimeout = 3 * time.Minute

// cliRun is one finished CLI run.
type cliRun struct {
	lines  []map[string]any // stdout JSONL objects
	stdout string
	stderr string
	err    error
}

// runCLI runs bin in dir with only env (plus PATH), stdin /dev/null, in a
// process group of its own that is killed if it outlives cliTimeout. The
// tools the CLIs run start sessions of their own; the scripted commands
// here end at once.
func runCLI(t *testing.T, bin, dir string, env []string, args ...string) cliRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8"}, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// cmd.Stdin nil is /dev/null.
	err := cmd.Run()
	r := cliRun{stdout: stdout.String(), stderr: stderr.String(), err: err}
	sc := bufio.NewScanner(strings.NewReader(r.stdout))
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			r.lines = append(r.lines, m)
		}
	}
	return r
}

func (r cliRun) dump(t *testing.T, s *Server) {
	t.Helper()
	t.Logf("exit: %v\nstdout:\n%s\nstderr:\n%s", r.err, tail(r.stdout, 8000), tail(r.stderr, 4000))
	for _, q := range s.Requests() {
		t.Logf("request %s %s api=%q rule=%q turn=%d status=%d", q.Method, q.Path, q.API, q.Rule, q.Turn, q.Status)
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// find returns the lines whose "type" is typ.
func (r cliRun) find(typ string) []map[string]any {
	var out []map[string]any
	for _, l := range r.lines {
		if l["type"] == typ {
			out = append(out, l)
		}
	}
	return out
}

func num(v any) int64 {
	f, _ := v.(float64)
	return int64(f)
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

func requestsFor(s *Server, rule string) []Request {
	var out []Request
	for _, q := range s.Requests() {
		if q.Rule == rule {
			out = append(out, q)
		}
	}
	return out
}

func TestRealCLIs(t *testing.T) {
	s, err := Start(Script{Rules: []Rule{
		{Name: "claude", Match: "modelmock-e2e-claude:", Turns: []Turn{
			{Text: "I will write x.txt.", ToolCalls: []ToolCall{{Name: "Bash", Input: map[string]any{"command": "echo hi > x.txt", "description": "write x.txt"}}},
				Usage: Usage{Input: 120, Output: 7, CacheRead: 30, CacheWrite: 5}},
			{Text: "done", Usage: Usage{Input: 131, Output: 3, CacheRead: 40}},
		}},
		{Name: "codex", Match: "modelmock-e2e-codex:", Turns: []Turn{
			{Reasoning: "Planning the shell step.", ToolCalls: []ToolCall{{Name: "exec_command", Input: map[string]any{"cmd": "echo hi > y.txt"}}},
				Usage: Usage{Input: 200, Output: 11, CacheRead: 50}},
			{ToolCalls: []ToolCall{{Name: "apply_patch", Input: "*** Begin Patch\n*** Add File: notes.md\n+from apply_patch\n*** End Patch\n"}},
				Usage: Usage{Input: 210, Output: 9}},
			{Text: "done", Usage: Usage{Input: 220, Output: 4, CacheRead: 60}},
		}},
		{Name: "claude-error", Match: "modelmock-fail-claude-error", Turns: []Turn{{Status: 500, ErrorMessage: "modelmock says no"}}},
		{Name: "claude-malformed", Match: "modelmock-fail-claude-malformed", Turns: []Turn{{Malformed: true}}},
		{Name: "codex-error", Match: "modelmock-fail-codex-error", Turns: []Turn{{Status: 401, ErrorMessage: "modelmock says no"}}},
		{Name: "codex-malformed", Match: "modelmock-fail-codex-malformed", Turns: []Turn{{Malformed: true}}},
		{Name: "copilot", Match: "modelmock-e2e-copilot:", Turns: []Turn{
			{Text: "I will write z.txt.", ToolCalls: []ToolCall{{Name: "bash", Input: map[string]any{"command": "echo hi > z.txt", "description": "write z.txt"}}}},
			{Text: "done"},
		}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })

	t.Run("claude", func(t *testing.T) {
		t.Parallel()
		bin := RequireCLI(t, "claude")
		home, dir := t.TempDir(), t.TempDir()
		r := runCLI(t, bin, dir, []string{
			"HOME=" + home,
			"ANTHROPIC_BASE_URL=" + s.URL(),
			"ANTHROPIC_API_KEY=sk-test",
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
			"CLAUDE_CODE_MAX_RETRIES=0",
			"DISABLE_AUTOUPDATER=1",
		}, "-p", "modelmock-e2e-claude: write x.txt", "--output-format", "stream-json", "--verbose", "--allowedTools", "Bash")
		ok := false
		defer func() {
			if !ok {
				r.dump(t, s)
			}
		}()
		if r.err != nil {
			t.Fatalf("claude: %v", r.err)
		}
		if b, err := os.ReadFile(filepath.Join(dir, "x.txt")); err != nil || string(b) != "hi\n" {
			t.Fatalf("x.txt: %q, %v", b, err)
		}
		res := r.find("result")
		if len(res) != 1 {
			t.Fatalf("%d result lines, want 1", len(res))
		}
		if res[0]["is_error"] != false || res[0]["result"] != "done" {
			t.Fatalf("result: is_error=%v result=%q", res[0]["is_error"], res[0]["result"])
		}
		u, _ := res[0]["usage"].(map[string]any)
		if got := num(u["input_tokens"]); got != 120+131 {
			t.Errorf("result.usage.input_tokens = %d, want %d", got, 120+131)
		}
		if got := num(u["output_tokens"]); got != 7+3 {
			t.Errorf("result.usage.output_tokens = %d, want %d", got, 7+3)
		}
		if got := num(u["cache_read_input_tokens"]); got != 30+40 {
			t.Errorf("result.usage.cache_read_input_tokens = %d, want %d", got, 30+40)
		}
		if got := num(u["cache_creation_input_tokens"]); got != 5 {
			t.Errorf("result.usage.cache_creation_input_tokens = %d, want 5", got)
		}
		reqs := requestsFor(s, "claude")
		if len(reqs) != 2 || reqs[0].Turn != 0 || reqs[1].Turn != 1 {
			t.Errorf("claude requests: %+v", turns(reqs))
		}
		ok = !t.Failed()
	})

	t.Run("codex", func(t *testing.T) {
		t.Parallel()
		bin := RequireCLI(t, "codex")
		home, codexHome, dir := t.TempDir(), t.TempDir(), t.TempDir()
		writeCodexConfig(t, codexHome, s.URL())
		r := runCLI(t, bin, dir, []string{
			"HOME=" + home,
			"CODEX_HOME=" + codexHome,
			"MOCK_API_KEY=sk-test",
		}, "exec", "--json", "--skip-git-repo-check", "-C", dir, "-m", "gpt-5.5", "--sandbox", "workspace-write",
			"modelmock-e2e-codex: write y.txt and notes.md")
		ok := false
		defer func() {
			if !ok {
				r.dump(t, s)
			}
		}()
		if r.err != nil {
			t.Fatalf("codex: %v", r.err)
		}
		done := r.find("turn.completed")
		if len(done) != 1 {
			t.Fatalf("%d turn.completed lines, want 1", len(done))
		}
		if b, err := os.ReadFile(filepath.Join(dir, "y.txt")); err != nil || string(b) != "hi\n" {
			t.Errorf("y.txt: %q, %v", b, err)
		}
		if b, err := os.ReadFile(filepath.Join(dir, "notes.md")); err != nil || string(b) != "from apply_patch\n" {
			t.Errorf("notes.md (apply_patch, a custom tool call): %q, %v", b, err)
		}
		var kinds []string
		var reasoning, message string
		for _, l := range r.find("item.completed") {
			kind, _ := field(l, "item", "type").(string)
			kinds = append(kinds, kind)
			switch kind {
			case "reasoning":
				reasoning, _ = field(l, "item", "text").(string)
			case "agent_message":
				message, _ = field(l, "item", "text").(string)
			}
		}
		if message != "done" || !strings.Contains(reasoning, "Planning the shell step.") {
			t.Errorf("items %v: agent_message %q, reasoning %q", kinds, message, reasoning)
		}
		u, _ := done[0]["usage"].(map[string]any)
		if got := num(u["input_tokens"]); got != 200+210+220 {
			t.Errorf("turn.completed.usage.input_tokens = %d, want %d", got, 200+210+220)
		}
		if got := num(u["cached_input_tokens"]); got != 50+60 {
			t.Errorf("turn.completed.usage.cached_input_tokens = %d, want %d", got, 50+60)
		}
		if got := num(u["output_tokens"]); got != 11+9+4 {
			t.Errorf("turn.completed.usage.output_tokens = %d, want %d", got, 11+9+4)
		}
		reqs := requestsFor(s, "codex")
		if len(reqs) != 3 || reqs[0].Turn != 0 || reqs[1].Turn != 1 || reqs[2].Turn != 2 || reqs[0].Path != "/v1/responses" {
			t.Errorf("codex requests: %+v", turns(reqs))
		}
		ok = !t.Failed()
	})

	// Failures reach the CLIs as failures, promptly (no retries configured).
	for _, name := range []string{"claude-error", "claude-malformed"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			bin := RequireCLI(t, "claude")
			r := runCLI(t, bin, t.TempDir(), []string{"HOME=" + t.TempDir(), "ANTHROPIC_BASE_URL=" + s.URL(), "ANTHROPIC_API_KEY=sk-test",
				"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "CLAUDE_CODE_MAX_RETRIES=0"},
				"-p", "modelmock-fail-"+name, "--output-format", "stream-json", "--verbose")
			ok := false
			defer func() {
				if !ok {
					r.dump(t, s)
				}
			}()
			res := r.find("result")
			if r.err == nil || len(res) != 1 || res[0]["is_error"] != true {
				t.Fatalf("want a failed run with is_error:true; exit %v, %d result lines", r.err, len(res))
			}
			msg, _ := res[0]["result"].(string)
			reqs := requestsFor(s, name)
			var streams []bool
			for _, q := range reqs {
				var b struct{ Stream bool }
				json.Unmarshal(q.Body, &b)
				streams = append(streams, b.Stream)
			}
			switch name {
			case "claude-error":
				if res[0]["api_error_status"] != 500.0 || !strings.Contains(msg, "modelmock says no") || len(reqs) != 1 {
					t.Errorf("api_error_status %v, result %q, %d requests", res[0]["api_error_status"], msg, len(reqs))
				}
			case "claude-malformed":
				// A broken stream is retried once without streaming, even
				// with CLAUDE_CODE_MAX_RETRIES=0 (Malformed breaks that too).
				if !reflect.DeepEqual(streams, []bool{true, false}) {
					t.Errorf("requests with stream %v, want [true false]", streams)
				}
			}
			ok = !t.Failed()
		})
	}
	for _, name := range []string{"codex-error", "codex-malformed"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			bin := RequireCLI(t, "codex")
			home, codexHome, dir := t.TempDir(), t.TempDir(), t.TempDir()
			writeCodexConfig(t, codexHome, s.URL())
			r := runCLI(t, bin, dir, []string{"HOME=" + home, "CODEX_HOME=" + codexHome, "MOCK_API_KEY=sk-test"},
				"exec", "--json", "--skip-git-repo-check", "-C", dir, "-m", "gpt-5.5", "modelmock-fail-"+name)
			ok := false
			defer func() {
				if !ok {
					r.dump(t, s)
				}
			}()
			failed := r.find("turn.failed")
			if r.err == nil || len(failed) != 1 || len(r.find("turn.completed")) != 0 {
				t.Fatalf("want one turn.failed and exit 1; exit %v, %d turn.failed", r.err, len(failed))
			}
			msg, _ := field(failed[0], "error", "message").(string)
			if name == "codex-error" && !strings.Contains(msg, "401") {
				t.Errorf("turn.failed message %q", msg)
			}
			if n := len(requestsFor(s, name)); n != 1 {
				t.Errorf("%d requests, want 1 (request_max_retries = 0)", n)
			}
			ok = !t.Failed()
		})
	}

	t.Run("copilot", func(t *testing.T) {
		t.Parallel()
		bin := RequireCLI(t, "copilot")
		home, dir := t.TempDir(), t.TempDir()
		r := runCLI(t, bin, dir, []string{
			"HOME=" + home,
			"COPILOT_OFFLINE=true",
			"COPILOT_PROVIDER_BASE_URL=" + s.URL(),
			"COPILOT_PROVIDER_TYPE=anthropic",
			"COPILOT_PROVIDER_API_KEY=sk-test",
			"COPILOT_MODEL=claude-sonnet-4.5",
			"COPILOT_AUTO_UPDATE=false",
		}, "-p", "modelmock-e2e-copilot: write z.txt", "--allow-all-tools", "--output-format", "json")
		ok := false
		defer func() {
			if !ok {
				r.dump(t, s)
			}
		}()
		if r.err != nil {
			t.Fatalf("copilot: %v", r.err)
		}
		res := r.find("result")
		if len(res) != 1 {
			t.Fatalf("%d result lines, want 1", len(res))
		}
		if code, isNum := res[0]["exitCode"].(float64); !isNum || code != 0 {
			t.Fatalf("result.exitCode = %v, want 0", res[0]["exitCode"])
		}
		if b, err := os.ReadFile(filepath.Join(dir, "z.txt")); err != nil || string(b) != "hi\n" {
			t.Errorf("z.txt: %q, %v", b, err)
		}
		var final string
		for _, l := range r.find("assistant.message") {
			final, _ = field(l, "data", "content").(string)
		}
		if final != "done" {
			t.Errorf("last assistant.message content %q, want done", final)
		}
		reqs := requestsFor(s, "copilot")
		if len(reqs) < 2 || reqs[0].Turn != 0 || reqs[len(reqs)-1].Turn != 1 {
			t.Errorf("copilot requests: %+v", turns(reqs))
		}
		ok = !t.Failed()
	})
}

func turns(reqs []Request) []string {
	var out []string
	for _, q := range reqs {
		out = append(out, q.Method+" "+q.Path+" turn="+strconv.Itoa(q.Turn)+" status="+strconv.Itoa(q.Status))
	}
	return out
}

// writeCodexConfig points Codex at the server through a custom provider
// (OPENAI_BASE_URL is ignored by Codex 0.171.0), with no retries.
func writeCodexConfig(t *testing.T, codexHome, url string) {
	t.Helper()
	config := `model = "gpt-5.5"
model_provider = "mock"

[model_providers.mock]
name = "Mock"
base_url = "` + url + `/v1"
env_key = "MOCK_API_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
stream_idle_timeout_ms = 60000
`
	if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
}

// fakeTB records what RequireCLI does instead of stopping the test.
type fakeTB struct {
	testing.TB
	skipped, failed string
}

func (f *fakeTB) Helper()                        {}
func (f *fakeTB) Skipf(format string, a ...any)  { f.skipped = fmt.Sprintf(format, a...) }
func (f *fakeTB) Fatalf(format string, a ...any) { f.failed = fmt.Sprintf(format, a...) }

func TestCLIPath(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "claude")
	os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755)
	plain := filepath.Join(dir, "plain")
	os.WriteFile(plain, []byte("x"), 0o644)

	t.Setenv("FLEET_TEST_CLAUDE_PATH", exe)
	if p, err := CLIPath("claude"); err != nil || p != exe {
		t.Errorf("CLIPath from env: %q, %v", p, err)
	}
	t.Setenv("FLEET_TEST_CLAUDE_PATH", plain)
	if _, err := CLIPath("claude"); err == nil {
		t.Error("non-executable accepted")
	}
	if _, err := CLIPath("vim"); err == nil {
		t.Error("unknown CLI accepted")
	}

	// The cache fallback, under a fake HOME.
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("FLEET_TEST_CODEX_PATH", "")
	_, err := CLIPath("codex")
	if err == nil || !strings.Contains(err.Error(), "scripts/install-agent-clis.sh") {
		t.Errorf("missing CLI: %v", err)
	}
	bin := filepath.Join(home, ".cache", "agents-fleet", "agent-clis", "node_modules", ".bin")
	os.MkdirAll(bin, 0o755)
	os.Symlink(exe, filepath.Join(bin, "codex"))
	if p, err := CLIPath("codex"); err != nil || p != filepath.Join(bin, "codex") {
		t.Errorf("CLIPath from the cache: %q, %v", p, err)
	}

	t.Setenv("FLEET_TEST_COPILOT_PATH", "")
	for ci, wantFail := range map[string]bool{"": false, "false": false, "true": true, "1": true} {
		t.Setenv("CI", ci)
		f := &fakeTB{TB: t}
		RequireCLI(f, "copilot")
		if wantFail != (f.failed != "") || wantFail == (f.skipped != "") {
			t.Errorf("CI=%q: failed %q, skipped %q", ci, f.failed, f.skipped)
		}
		if msg := f.failed + f.skipped; !strings.Contains(msg, "scripts/install-agent-clis.sh") {
			t.Errorf("CI=%q: message %q does not name the install script", ci, msg)
		}
	}
	t.Setenv("CI", "true")
	f := &fakeTB{TB: t}
	if p := RequireCLI(f, "codex"); p != filepath.Join(bin, "codex") || f.failed != "" || f.skipped != "" {
		t.Errorf("RequireCLI with the CLI present: %q %+v", p, f)
	}
}
