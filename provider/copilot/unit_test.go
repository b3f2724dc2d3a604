package copilot

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agents-fleet/fleet/provider"
	"github.com/agents-fleet/fleet/provider/agentcli/agentclitest"
)

// updateLineFor is a session/update line as the CLI prints it.
func updateLineFor(update string) []byte {
	return []byte(updatePrefix + `s1","update":` + update + `}}`)
}

// The chunk fast path and the decoder agree, escapes included; lines of
// another shape fall back to the decoder.
func TestChunkFastPath(t *testing.T) {
	for _, text := range []string{`plain`, `with \"quotes\" and \\ and \n newline \u00e9`, ``} {
		line := updateLineFor(`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"` + text + `"}}`)
		h := agentclitest.NewHost(allow)
		s := parseSession(t, h)
		s.turn = &turn{ctx: s.ctx, cancel: func() {}, ended: make(chan struct{})}
		s.handleLine(line)
		s.handleLine(updateLineFor(`{"sessionUpdate":"content_shape_other","x":1}`))
		s.handleLine(updateLineFor(`{"content":{"text":"` + text + `","type":"text"},"sessionUpdate":"agent_message_chunk"}`))
		s.flushText()
		evs, _ := h.Snapshot()
		texts := agentclitest.All[provider.Text](evs)
		if text == "" {
			if len(texts) != 0 {
				t.Errorf("texts %+v", texts)
			}
			continue
		}
		if len(texts) != 1 || texts[0].Text != strings.Repeat(unescape(t, text), 2) {
			t.Errorf("%q: texts %+v", text, texts)
		}
		if s.rs.unknown != 1 {
			t.Errorf("unknown %d", s.rs.unknown)
		}
	}
	h := agentclitest.NewHost(allow)
	s := parseSession(t, h)
	s.handleLine(updateLineFor(`{"sessionUpdate":"usage_update","used":9754,"size":168000}`))
	if s.rs.ctxUsed != 9754 || s.rs.ctxSize != 168000 {
		t.Errorf("context %d/%d", s.rs.ctxUsed, s.rs.ctxSize)
	}
	s.handleLine(updateLineFor(`{"sessionUpdate":"usage_update","size":1000,"used":10}`))
	if s.rs.ctxUsed != 10 || s.rs.ctxSize != 1000 {
		t.Errorf("context %d/%d", s.rs.ctxUsed, s.rs.ctxSize)
	}
	// Broken JSON behind the fast path's prefix is garbage, not a crash.
	s.handleLine(updateLineFor(`{"sessionUpdate":"tool_call","toolCallId":`))
	if s.rs.garbageLines != 1 {
		t.Errorf("garbage %d", s.rs.garbageLines)
	}
}

func unescape(t *testing.T, s string) string {
	t.Helper()
	out, ok := jsonString([]byte(`"` + s + `"`))
	if !ok {
		t.Fatalf("jsonString(%q)", s)
	}
	return out
}

// The CLI's notices are not model text: an error ends the turn with its
// words, a retry drops the partial message, and model text that goes on
// clears an earlier error.
func TestNotices(t *testing.T) {
	h := agentclitest.NewHost(allow)
	s := parseSession(t, h)
	tr := &turn{ctx: s.ctx, cancel: func() {}, ended: make(chan struct{})}
	s.turn = tr
	s.handleChunk("agent_message_chunk", "partial ans")
	s.handleChunk("agent_message_chunk", "Info: Response was interrupted due to a server error. Retrying...")
	s.handleChunk("agent_message_chunk", "full answer. ")
	s.handleChunk("agent_message_chunk", "Error: is a word here")
	s.handleChunk("agent_message_chunk", "Error: Failed to get response from the AI model; Last error: 500 boom")
	s.promptDone(tr, []byte(`{"stopReason":"end_turn"}`), nil)
	evs, _ := h.Snapshot()
	if got := agentclitest.Kinds(agentclitest.Without[provider.Note](evs)); !slices.Equal(got, []string{"Text", "TurnEnded"}) {
		t.Errorf("events %v\n%s", got, agentclitest.Dump(evs))
	}
	if txt := agentclitest.Last[provider.Text](t, evs); txt.Text != "full answer. Error: is a word here" {
		t.Errorf("text %q", txt.Text)
	}
	te := agentclitest.Last[provider.TurnEnded](t, evs)
	if te.Err == nil || te.Err.Error() != "copilot: Failed to get response from the AI model; Last error: 500 boom" {
		t.Errorf("TurnEnded.Err %v", te.Err)
	}
	if n := len(agentclitest.All[provider.Note](evs)); n != 2 {
		t.Errorf("%d notes", n)
	}

	s.turn = &turn{ctx: s.ctx, cancel: func() {}, ended: make(chan struct{})}
	s.handleChunk("agent_message_chunk", "Error: transient")
	s.handleChunk("agent_message_chunk", "recovered")
	s.promptDone(s.turn, []byte(`{"stopReason":"end_turn"}`), nil)
	evs, _ = h.Snapshot()
	if te := agentclitest.Last[provider.TurnEnded](t, evs); te.Err != nil || te.Result != "recovered" {
		t.Errorf("TurnEnded %+v", te)
	}
}

func TestUsageDelta(t *testing.T) {
	var r readState
	r.ctxUsed, r.ctxSize = 9000, 168000
	u, ok := r.usageDelta(promptUsage{InputTokens: 357, OutputTokens: 35, CachedReadTokens: 7})
	if !ok || u != (provider.Usage{InputTokens: 350, OutputTokens: 35, CacheReadTokens: 7, ContextTokens: 9000, ContextWindow: 168000}) {
		t.Errorf("first %+v", u)
	}
	u, _ = r.usageDelta(promptUsage{InputTokens: 714, OutputTokens: 70, CachedReadTokens: 14, CachedWriteTokens: 3})
	if u.InputTokens != 347 || u.OutputTokens != 35 || u.CacheReadTokens != 7 || u.CacheWriteTokens != 3 {
		t.Errorf("second %+v", u)
	}
	if _, ok := r.usageDelta(promptUsage{InputTokens: 714, OutputTokens: 70, CachedReadTokens: 14, CachedWriteTokens: 3}); ok {
		t.Error("a repeat was counted")
	}
	// A new process counts from zero again.
	u, _ = r.usageDelta(promptUsage{InputTokens: 40, OutputTokens: 4})
	if u.InputTokens != 40 || u.OutputTokens != 4 {
		t.Errorf("after a reset %+v", u)
	}
}

var copilotOptions = []permissionOption{{"allow_once", "Allow once", "allow_once"}, {"allow_always", "Always allow", "allow_always"}, {"reject_once", "Deny", "reject_once"}}

func TestDecide(t *testing.T) {
	live := context.Background()
	cancelled, cancel := context.WithCancel(live)
	cancel()
	cases := []struct {
		name string
		ctx  context.Context
		opts []permissionOption
		d    provider.Decision
		err  error
		want outcome
	}{
		{"allow", live, copilotOptions, provider.Decision{Allow: true}, nil, outcome{"selected", "allow_once"}},
		{"allow always", live, copilotOptions, provider.Decision{Allow: true, OptionID: "allow_always"}, nil, outcome{"selected", "allow_always"}},
		{"deny", live, copilotOptions, provider.Decision{}, nil, outcome{"selected", "reject_once"}},
		{"deny naming an allow", live, copilotOptions, provider.Decision{OptionID: "allow_always"}, nil, outcome{"selected", "reject_once"}},
		{"allow naming a reject", live, copilotOptions, provider.Decision{Allow: true, OptionID: "reject_once"}, nil, outcome{"selected", "reject_once"}},
		{"unknown option", live, copilotOptions, provider.Decision{Allow: true, OptionID: "nope"}, nil, outcome{"selected", "allow_once"}},
		{"expired", live, copilotOptions, provider.Decision{}, provider.ErrNoAnswer, outcome{"selected", "reject_once"}},
		{"cancelled turn", cancelled, copilotOptions, provider.Decision{}, provider.ErrNoAnswer, outcome{Outcome: "cancelled"}},
		{"no reject option", live, copilotOptions[:2], provider.Decision{}, nil, outcome{Outcome: "cancelled"}},
	}
	for _, c := range cases {
		if got := decide(c.ctx, c.opts, c.d, c.err); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

func TestToolNames(t *testing.T) {
	s := parseSession(t, agentclitest.NewHost(allow))
	s.cfg.spec.MCP = []provider.MCPServer{{Name: "fleet", Tools: []string{"spawn_worker"}}, {Name: "other"}}
	cases := []struct{ title, kind, input, want string }{
		{"write x", "execute", `{"command":"echo hi","description":"write x"}`, "bash"},
		{"Creating /w/a.md", "edit", `{"path":"/w/a.md","file_text":"x"}`, "create"},
		{"Editing /w/a.md", "edit", `{"path":"/w/a.md","old_str":"a","new_str":"b"}`, "edit"},
		{"Viewing /w/a.md", "read", `{"path":"/w/a.md"}`, "view"},
		{"Searching for 'x'", "read", `{"pattern":"x"}`, "grep"},
		{"Finding files matching *.go", "read", `{"pattern":"*.go"}`, "glob"},
		{"fleet-spawn_worker", "other", `{"task":"t"}`, "fleet-spawn_worker"},
		{"other-anything", "other", `{}`, "other-anything"},
		{"nosuch", "other", `{"x":1}`, "nosuch"},
		{"Doing something new", "fetch", `{}`, "fetch"},
	}
	for _, c := range cases {
		tc := &toolCall{title: c.title, kind: c.kind, rawInput: []byte(c.input)}
		if got := s.toolName(tc); got != c.want {
			t.Errorf("%q/%s: %q, want %q", c.title, c.kind, got, c.want)
		}
	}
	if s.isMCPTool("fleet-other_tool") || !s.isMCPTool("fleet-spawn_worker") || s.isMCPTool("fleet-") {
		t.Error("isMCPTool")
	}
}

func TestFileEdits(t *testing.T) {
	tc := &toolCall{name: "apply_patch", kind: "edit", locations: []location{{"/w/a"}, {"/w/b"}}}
	cs := []toolContent{
		{Type: "diff", Path: "/w/a", OldText: ptr("x"), NewText: ptr("y")},
		{Type: "diff", Path: "/w/new", NewText: ptr("z")},
		{Type: "diff", Path: "/w/a", OldText: ptr("y"), NewText: ptr("w")},
	}
	want := []provider.FileEdited{{Path: "/w/a", Change: provider.Edited, Tool: "apply_patch"}, {Path: "/w/new", Change: provider.Created, Tool: "apply_patch"}}
	if got := tc.fileEdits(cs); !slices.Equal(got, want) {
		t.Errorf("diffs: %+v", got)
	}
	want = []provider.FileEdited{{Path: "/w/a", Change: provider.Edited, Tool: "apply_patch"}, {Path: "/w/b", Change: provider.Edited, Tool: "apply_patch"}}
	if got := tc.fileEdits(nil); !slices.Equal(got, want) {
		t.Errorf("locations: %+v", got)
	}
	tc = &toolCall{name: "create", kind: "edit"}
	if got := tc.fileEdits([]toolContent{{Type: "diff", Path: "/w/c", OldText: ptr(""), NewText: ptr("c")}}); len(got) != 1 || got[0].Change != provider.Created {
		t.Errorf("create: %+v", got)
	}
}

func ptr(s string) *string { return &s }

func TestCommandLine(t *testing.T) {
	scratch := t.TempDir()
	p := New(provider.Options{Model: "claude-sonnet-4.5", Args: []string{"--log-level", "debug"}, PermissionMode: "allow-all-tools"})
	spec := provider.Spec{
		Instructions: "be brief",
		MCP:          []provider.MCPServer{{Name: "fleet", URL: "http://127.0.0.1:9/mcp", Headers: map[string]string{"Authorization": "Bearer t0k"}, Tools: []string{"spawn_worker", "ask"}}},
	}
	env := []string{instructionsEnv + "=/theirs"}
	args, extra, err := p.commandLine(spec, env, scratch)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"--acp", "--no-auto-update", "--model", "claude-sonnet-4.5",
		"--additional-mcp-config", "@" + filepath.Join(scratch, "mcp-config.json"),
		"--allow-tool=fleet(spawn_worker)", "--allow-tool=fleet(ask)"}
	if !slices.Equal(args, want) {
		t.Errorf("args %q", args)
	}
	if !slices.Contains(extra, "COPILOT_AUTO_UPDATE=false") || !slices.Contains(extra, instructionsEnv+"=/theirs,"+filepath.Join(scratch, "instructions")) {
		t.Errorf("env %q", extra)
	}
	cfg, err := os.ReadFile(filepath.Join(scratch, "mcp-config.json"))
	if err != nil || string(cfg) != `{"mcpServers":{"fleet":{"type":"http","url":"http://127.0.0.1:9/mcp","headers":{"Authorization":"Bearer t0k"},"tools":["*"]}}}` {
		t.Errorf("MCP config %s, %v", cfg, err)
	}
	if fi, err := os.Stat(filepath.Join(scratch, "mcp-config.json")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("MCP config mode %v", fi.Mode())
	}
	if b, _ := os.ReadFile(filepath.Join(scratch, "instructions", ".github", "instructions", "fleet.instructions.md")); string(b) != "be brief\n" {
		t.Errorf("instructions %q", b)
	}
	// A user's COPILOT_AUTO_UPDATE stays theirs.
	_, extra, _ = New(provider.Options{}).commandLine(provider.Spec{}, []string{"COPILOT_AUTO_UPDATE=true"}, t.TempDir())
	if len(extra) != 0 {
		t.Errorf("env %q", extra)
	}
	if _, _, err := p.commandLine(provider.Spec{MCP: []provider.MCPServer{{Name: "bad name"}}}, nil, t.TempDir()); !errors.Is(err, errMCPName) {
		t.Errorf("bad MCP name: %v", err)
	}
	if _, err := permissionArgs("bogus"); err == nil {
		t.Error("a bogus permission mode was taken")
	}
	if a, _ := permissionArgs("allow-all-tools"); !slices.Equal(a, []string{"--allow-all-tools"}) {
		t.Errorf("permission args %q", a)
	}
}

func TestDescribeEndpoint(t *testing.T) {
	cases := []struct {
		env              []string
		endpoint, credit string
	}{
		{nil, "default (GitHub Copilot)", "none in the environment"},
		{[]string{"GH_TOKEN=ghp_x"}, "default (GitHub Copilot)", "GH_TOKEN set"},
		{[]string{"COPILOT_OFFLINE=true"}, "COPILOT_OFFLINE is set without COPILOT_PROVIDER_BASE_URL", "none"},
		{[]string{"COPILOT_PROVIDER_BASE_URL=http://h/v1", "COPILOT_PROVIDER_WIRE_API=responses"}, "COPILOT_PROVIDER_BASE_URL=http://h/v1 (BYOK, type openai, wire API responses)", "none found"},
		{[]string{"COPILOT_PROVIDER_BASE_URL=http://h", "COPILOT_PROVIDER_BEARER_TOKEN=zzz"}, "COPILOT_PROVIDER_BASE_URL=http://h", "COPILOT_PROVIDER_BEARER_TOKEN set"},
	}
	for _, c := range cases {
		e, cr := describeEndpoint(c.env)
		if !strings.HasPrefix(e, c.endpoint) || !strings.HasPrefix(cr, c.credit) || strings.Contains(e+cr, "ghp_x") || strings.Contains(e+cr, "zzz") {
			t.Errorf("%q: %q / %q", c.env, e, cr)
		}
	}
	if v := versionOf("GitHub Copilot CLI 1.0.102.\nRun 'copilot update' to check for updates.\n"); v != "1.0.102" {
		t.Errorf("version %q", v)
	}
}

// A prompt for a fleet MCP tool that the CLI asks despite --allow-tool is
// allowed without the host.
func TestFakeMCPPromptAllowed(t *testing.T) {
	t.Parallel()
	h := agentclitest.NewHost(nil)
	spec := fakeSpec(t)
	spec.MCP = []provider.MCPServer{{Name: "fleet", URL: "http://127.0.0.1:9/mcp", Tools: []string{"ping"}}}
	p := New(provider.Options{Path: agentclitest.FakeCLI(t, "copilot", fakeHandshake+`printf '%s\n' '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"fake-1","update":{"sessionUpdate":"tool_call","toolCallId":"t1","title":"fleet-ping","kind":"other","status":"pending","rawInput":{"text":"a"}}}}'
printf '%s\n' '{"jsonrpc":"2.0","id":0,"method":"session/request_permission","params":{"sessionId":"fake-1","toolCall":{"toolCallId":"t1","title":"ping","kind":"other","rawInput":{"text":"a"}},"options":[{"optionId":"allow_once","kind":"allow_once","name":"Allow once"},{"optionId":"reject_once","kind":"reject_once","name":"Deny"}]}}'
read -r l; echo "$l" >&2
printf '%s\n' '{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}'
read -r l
`)})
	s := startWith(t, p, spec, h)
	send(t, s, "hello")
	h.WaitTurns(t, 1, wait)
	s.Close()
	if _, perms := h.Snapshot(); len(perms) != 0 {
		t.Errorf("the host was asked: %+v", perms)
	}
	if got := s.stderr(); !strings.Contains(got, `"optionId":"allow_once"`) || !strings.Contains(got, `"id":0`) {
		t.Errorf("the CLI got %q", got)
	}
}

func TestDiffModes(t *testing.T) {
	diff := "\ndiff --git a/w/notes.md b/w/notes.md\ncreate file mode 100644\nindex 0000000..0000000\n--- a/dev/null\n+++ b/w/notes.md\n@@ -1,0 +1,2 @@\n+hello\n\n" +
		"\ndiff --git a/w/a b.txt b/w/a b.txt\nindex 0000000..0000000 100644\n--- a/w/a b.txt\n+++ b/w/a b.txt\n@@ -1,2 +1,2 @@\n-old\n+new\n" +
		"\ndiff --git a/w/b.txt b/dev/null\nindex 0000000..0000000 100644\n--- a/w/b.txt\n+++ b/dev/null\n@@ -1,2 +0,0 @@\n-old\n"
	got := diffModes(diff)
	want := map[string]provider.Change{"w/notes.md": provider.Created, "w/a b.txt": provider.Edited, "w/b.txt": provider.Deleted}
	if len(got) != len(want) {
		t.Fatalf("modes %v", got)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %s, want %s", k, got[k], v)
		}
	}
}

func TestRateLimitText(t *testing.T) {
	for text, want := range map[string]bool{
		"Error: Failed to get response from the AI model; retried 5 times (total retry wait time: 52.97 seconds) Last error: 429 rate limited": true,
		"Error: Failed to get response from the AI model; retried 5 times (total retry wait time: 17 seconds) Last error: 503 unavailable":     false,
		"Error: Authentication failed": false,
	} {
		if got := rateLimitText(text); got != want {
			t.Errorf("rateLimitText(%q) = %v, want %v", text, got, want)
		}
	}
}

func TestServerErrorText(t *testing.T) {
	for text, want := range map[string]bool{
		"Error: Failed to get response from the AI model; retried 5 times (total retry wait time: 17 seconds) Last error: 503 unavailable": true,
		"Error: Failed to get response from the AI model; retried 5 times (total retry wait time: 52.97 seconds) Last error: 429 slow":     false,
		"Error: Authentication failed": false,
	} {
		if got := serverErrorText(text); got != want {
			t.Errorf("serverErrorText(%q) = %v, want %v", text, got, want)
		}
	}
}
