package copilot

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/internal/modelmock"
	"github.com/agents-fleet/fleet/provider"
	"github.com/agents-fleet/fleet/provider/agentcli/agentclitest"
)

// writeAndRun is a rule whose model creates notes.md, runs a shell command
// that writes x.txt, and ends with text.
func writeAndRun(match, dir string) modelmock.Rule {
	return modelmock.Rule{Name: match, Match: match, Turns: []modelmock.Turn{
		{Text: "I'll create it", ToolCalls: []modelmock.ToolCall{{Name: "create", Input: map[string]any{
			"path": filepath.Join(dir, "notes.md"), "file_text": "hello from copilot\n"}}},
			Usage: modelmock.Usage{Input: 100, Output: 20, CacheRead: 7}},
		{Reasoning: "now the shell", ToolCalls: []modelmock.ToolCall{{Name: "bash", Input: map[string]any{
			"command": "echo hi > x.txt", "description": "write x"}}},
			Usage: modelmock.Usage{Input: 120, Output: 10, CacheWrite: 3}},
		{Text: "done", Usage: modelmock.Usage{Input: 130, Output: 5}},
	}}
}

// workUsage is what writeAndRun's three requests report, summed.
var workUsage = provider.Usage{InputTokens: 350, OutputTokens: 35, CacheReadTokens: 7, CacheWriteTokens: 3}

func TestTurnWithPermissionAllowed(t *testing.T) {
	t.Parallel()
	r := newRig(t, modelmock.Script{})
	r.Srv.SetScript(modelmock.Script{Rules: []modelmock.Rule{writeAndRun("fleet-allow", r.Dir)}})
	h := agentclitest.NewHost(allow)
	s := r.start(t, r.Spec(), h)
	if s.ResumeID() == "" {
		t.Fatal("no session id after Start")
	}
	send(t, s, "fleet-allow: write the notes")
	evs := h.WaitTurns(t, 1, wait)

	if _, err := os.Stat(filepath.Join(r.Dir, "x.txt")); err != nil {
		t.Errorf("x.txt: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(r.Dir, "notes.md")); err != nil || string(b) != "hello from copilot\n" {
		t.Errorf("notes.md: %q, %v", b, err)
	}
	want := []string{"SessionStarted", "Text", "ToolStarted", "ToolCompleted", "FileEdited", "Text", "ToolStarted", "ToolCompleted", "Text", "Usage", "TurnEnded"}
	if got := agentclitest.Kinds(agentclitest.Without[provider.Note](evs)); !slices.Equal(got, want) {
		t.Errorf("events %v\nwant   %v\n%s", got, want, agentclitest.Dump(evs))
	}
	ss := agentclitest.Last[provider.SessionStarted](t, evs)
	if ss.ID != s.ResumeID() || ss.Model != "claude-sonnet-4.5" {
		t.Errorf("SessionStarted %+v, session id %q", ss, s.ResumeID())
	}
	starts := agentclitest.All[provider.ToolStarted](evs)
	dones := agentclitest.All[provider.ToolCompleted](evs)
	if len(starts) != 2 || len(dones) != 2 {
		t.Fatalf("tools: %d started, %d completed", len(starts), len(dones))
	}
	if starts[0].Name != "create" || starts[0].Input["file_text"] != "hello from copilot\n" {
		t.Errorf("first tool %+v", starts[0])
	}
	if starts[1].Name != "bash" || starts[1].Input["command"] != "echo hi > x.txt" || starts[1].Detail != "echo hi > x.txt" {
		t.Errorf("second tool %+v", starts[1])
	}
	for i := range starts {
		if dones[i].ID != starts[i].ID || dones[i].Name != starts[i].Name || dones[i].IsError || dones[i].Duration <= 0 {
			t.Errorf("completion %d %+v for %+v", i, dones[i], starts[i])
		}
	}
	if !strings.Contains(dones[0].Result, "Created file") {
		t.Errorf("create result %q", dones[0].Result)
	}
	fe := agentclitest.Last[provider.FileEdited](t, evs)
	if fe.Path != filepath.Join(r.Dir, "notes.md") || fe.Change != provider.Created || fe.Tool != "create" {
		t.Errorf("FileEdited %+v", fe)
	}
	texts := agentclitest.All[provider.Text](evs)
	if texts[0] != (provider.Text{Text: "I'll create it"}) || texts[1] != (provider.Text{Text: "now the shell", Reasoning: true}) || texts[2] != (provider.Text{Text: "done"}) {
		t.Errorf("texts %+v", texts)
	}
	if u := agentclitest.SumUsage(evs); u != workUsage {
		t.Errorf("usage %+v, want %+v", u, workUsage)
	}
	if u := agentclitest.Last[provider.Usage](t, evs); u.ContextTokens <= 0 || u.ContextWindow <= 0 {
		t.Errorf("usage context %+v", u)
	}
	te := agentclitest.Last[provider.TurnEnded](t, evs)
	if te.Err != nil || te.Interrupted || te.Result != "done" {
		t.Errorf("TurnEnded %+v", te)
	}
	_, perms := h.Snapshot()
	if len(perms) != 2 {
		t.Fatalf("%d permission prompts, want 2: %+v", len(perms), perms)
	}
	if p := perms[1]; p.Tool != "bash" || p.Input["command"] != "echo hi > x.txt" || p.ToolCallID != starts[1].ID || p.Description != "write x" {
		t.Errorf("shell prompt %+v", p)
	}
	if p := perms[0]; p.Tool != "create" || p.ToolCallID != starts[0].ID {
		t.Errorf("create prompt %+v", p)
	}
	wantOpts := []provider.PermissionOption{{ID: "allow_once", Label: "Allow once", Kind: provider.AllowOnce}, {ID: "allow_always", Label: "Always allow", Kind: provider.AllowAlways}, {ID: "reject_once", Label: "Deny", Kind: provider.Reject}}
	if !slices.Equal(perms[1].Options, wantOpts) {
		t.Errorf("options %+v", perms[1].Options)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if s.Err() != nil {
		t.Errorf("Err after Close: %v", s.Err())
	}
}

func TestTurnWithPermissionDenied(t *testing.T) {
	t.Parallel()
	r := newRig(t, modelmock.Script{})
	r.Srv.SetScript(modelmock.Script{Rules: []modelmock.Rule{
		{Name: "deny", Match: "fleet-deny", Turns: []modelmock.Turn{
			{Text: "I'll run it", ToolCalls: []modelmock.ToolCall{{Name: "bash", Input: map[string]any{"command": "echo hi > x.txt", "description": "write x"}}}},
			{Text: "it was refused"},
		}},
		{Name: "after", Match: "fleet-after", Turns: []modelmock.Turn{{Text: "understood"}}},
	}})
	h := agentclitest.NewHost(deny)
	s := r.start(t, r.Spec(), h)
	send(t, s, "fleet-deny: write x")
	evs := h.WaitTurns(t, 1, wait)
	if _, err := os.Stat(filepath.Join(r.Dir, "x.txt")); !os.IsNotExist(err) {
		t.Errorf("x.txt exists after a denial (%v)", err)
	}
	done := agentclitest.Last[provider.ToolCompleted](t, evs)
	if !done.IsError || !strings.Contains(done.Result, "rejected") {
		t.Errorf("ToolCompleted %+v", done)
	}
	// Copilot ends the turn on a denial ("Operation cancelled by user")
	// without a model request; the model sees the denial on the next one.
	if te := agentclitest.Last[provider.TurnEnded](t, evs); te.Err != nil || te.Interrupted {
		t.Errorf("TurnEnded %+v", te)
	}
	send(t, s, "fleet-after: what happened?")
	evs = h.WaitTurns(t, 2, wait)
	if te := agentclitest.Last[provider.TurnEnded](t, evs); te.Err != nil || te.Result != "understood" {
		t.Errorf("second TurnEnded %+v", te)
	}
	reqs := r.modelRequests("after")
	if len(reqs) == 0 || !strings.Contains(string(reqs[0].Body), "The user rejected this tool call.") {
		t.Errorf("the model did not see the denial: %d requests", len(reqs))
	}
}

func TestMultiTurn(t *testing.T) {
	t.Parallel()
	r := newRig(t, modelmock.Script{Rules: []modelmock.Rule{
		{Name: "one", Match: "fleet-one", Turns: []modelmock.Turn{{Text: "first answer", Usage: modelmock.Usage{Input: 50, Output: 5}}}},
		{Name: "two", Match: "fleet-two", Turns: []modelmock.Turn{{Text: "second answer", Usage: modelmock.Usage{Input: 70, Output: 6}}}},
	}})
	h := agentclitest.NewHost(allow)
	s := r.start(t, r.Spec(), h)
	send(t, s, "fleet-one: hello")
	h.WaitTurns(t, 1, wait)
	send(t, s, "fleet-two: again")
	evs := h.WaitTurns(t, 2, wait)
	tes := agentclitest.All[provider.TurnEnded](evs)
	if tes[0].Result != "first answer" || tes[1].Result != "second answer" || tes[0].Err != nil || tes[1].Err != nil {
		t.Errorf("turns %+v", tes)
	}
	us := agentclitest.All[provider.Usage](evs)
	if len(us) != 2 || us[0].InputTokens != 50 || us[0].OutputTokens != 5 || us[1].InputTokens != 70 || us[1].OutputTokens != 6 {
		t.Errorf("usage per turn %+v", us)
	}
	reqs := r.modelRequests("two")
	if len(reqs) != 1 || !strings.Contains(string(reqs[0].Body), "first answer") {
		t.Errorf("the second turn's request lacks the first turn")
	}
	if agentclitest.Count[provider.SessionStarted](evs) != 1 {
		t.Errorf("%d SessionStarted", agentclitest.Count[provider.SessionStarted](evs))
	}
}

func TestResume(t *testing.T) {
	t.Parallel()
	r := newRig(t, modelmock.Script{})
	r.Srv.SetScript(modelmock.Script{Rules: []modelmock.Rule{
		writeAndRun("fleet-first", r.Dir),
		{Name: "later", Match: "fleet-later", Turns: []modelmock.Turn{{Text: "I remember", Usage: modelmock.Usage{Input: 40, Output: 4}}}},
	}})
	h := agentclitest.NewHost(allow)
	s := r.start(t, r.Spec(), h)
	send(t, s, "fleet-first: do the work")
	h.WaitTurns(t, 1, wait)
	id := s.ResumeID()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	h2 := agentclitest.NewHost(allow)
	spec := r.Spec()
	spec.ResumeID = id
	s2 := r.start(t, spec, h2)
	if s2.ResumeID() != id {
		t.Errorf("resumed session id %q, want %q", s2.ResumeID(), id)
	}
	send(t, s2, "fleet-later: do you remember?")
	evs := h2.WaitTurns(t, 1, wait)
	// The replayed history is not this session's doing: no events of it.
	want := []string{"SessionStarted", "Text", "Usage", "TurnEnded"}
	if got := agentclitest.Kinds(agentclitest.Without[provider.Note](evs)); !slices.Equal(got, want) {
		t.Errorf("events %v, want %v\n%s", got, want, agentclitest.Dump(evs))
	}
	if ss := agentclitest.Last[provider.SessionStarted](t, evs); ss.ID != id {
		t.Errorf("SessionStarted %+v", ss)
	}
	// Usage restarts with the new process: the first turn is not counted again.
	if u := agentclitest.SumUsage(evs); u.InputTokens != 40 || u.OutputTokens != 4 {
		t.Errorf("usage after resume %+v", u)
	}
	reqs := r.modelRequests("later")
	if len(reqs) != 1 {
		t.Fatalf("%d requests for the resumed turn", len(reqs))
	}
	body := string(reqs[0].Body)
	for _, s := range []string{"fleet-first: do the work", "echo hi > x.txt", "hello from copilot", "done"} {
		if !strings.Contains(body, s) {
			t.Errorf("the resumed request lacks %q of the first turn", s)
		}
	}
}

func TestResumeUnknownSession(t *testing.T) {
	t.Parallel()
	r := newRig(t, modelmock.Script{})
	spec := r.Spec()
	spec.ResumeID = "00000000-0000-4000-8000-000000000000"
	_, err := r.provider().Start(t.Context(), spec, agentclitest.NewHost(allow))
	if err == nil || !strings.Contains(err.Error(), "cannot resume session "+spec.ResumeID) {
		t.Fatalf("Start: %v", err)
	}
	t.Log(err)
}

func TestEndpointErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		turn modelmock.Turn
		want []string
	}{
		{"500", modelmock.Turn{Status: 500, ErrorMessage: "modelmock is overloaded"}, []string{"500", "modelmock is overloaded", "retried 5 times"}},
		{"401", modelmock.Turn{Status: 401, ErrorMessage: "invalid x-api-key"}, []string{"401", "Authentication failed"}},
		{"malformed", modelmock.Turn{Malformed: true}, []string{"copilot: "}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := newRig(t, modelmock.Script{Rules: []modelmock.Rule{{Name: c.name, Match: "fleet-fail", Turns: []modelmock.Turn{c.turn}}}})
			h := agentclitest.NewHost(allow)
			s := r.start(t, r.Spec(), h)
			start := time.Now()
			send(t, s, "fleet-fail: hello")
			evs := h.WaitTurns(t, 1, wait)
			took := time.Since(start)
			te := agentclitest.Last[provider.TurnEnded](t, evs)
			if te.Err == nil {
				t.Fatalf("TurnEnded without an error; events:\n%s", agentclitest.Dump(evs))
			}
			for _, w := range c.want {
				if !strings.Contains(te.Err.Error(), w) {
					t.Errorf("TurnEnded.Err %q lacks %q", te.Err, w)
				}
			}
			if took > 90*time.Second {
				t.Errorf("the failure took %v", took)
			}
			t.Logf("%s after %v (%d requests): %v", c.name, took.Round(time.Millisecond), len(r.modelRequests(c.name)), te.Err)
			if agentclitest.Count[provider.Text](evs) != 0 {
				t.Errorf("the CLI's notices were taken for model text: %+v", agentclitest.All[provider.Text](evs))
			}
		})
	}
}

// Spec.Instructions reach the system prompt (through a custom-instructions
// directory), and Spec.Model the request.
func TestInstructionsAndModel(t *testing.T) {
	t.Parallel()
	r := newRig(t, modelmock.Script{Rules: []modelmock.Rule{{Name: "instr", Match: "fleet-instr", Turns: []modelmock.Turn{{Text: "ok"}}}}})
	h := agentclitest.NewHost(allow)
	spec := r.Spec()
	spec.Instructions = "You are the fleet's coordinator. FLEET-ROLE-7731."
	spec.Model = "claude-haiku-4.5"
	s := r.start(t, spec, h)
	send(t, s, "fleet-instr: hello")
	evs := h.WaitTurns(t, 1, wait)
	if ss := agentclitest.Last[provider.SessionStarted](t, evs); ss.Model != "claude-haiku-4.5" {
		t.Errorf("SessionStarted %+v", ss)
	}
	reqs := r.modelRequests("instr")
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	var body struct {
		Model    string          `json:"model"`
		System   json.RawMessage `json:"system"`
		Messages json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(reqs[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(body.System), "FLEET-ROLE-7731") {
		t.Error("the instructions are not in the system prompt")
	}
	if strings.Contains(string(body.Messages), "FLEET-ROLE-7731") {
		t.Error("the instructions are in the messages too")
	}
	if body.Model != "claude-haiku-4.5" {
		t.Errorf("model %q", body.Model)
	}
	s.Close()
	if _, err := os.Stat(s.cfg.scratch); !os.IsNotExist(err) {
		t.Errorf("the scratch directory is left: %v", err)
	}
}

func TestInspect(t *testing.T) {
	t.Parallel()
	cli := modelmock.RequireCLI(t, "copilot")
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "XDG_CACHE_HOME=" + pkgCache,
		"COPILOT_OFFLINE=true", "COPILOT_PROVIDER_BASE_URL=http://user:pw@127.0.0.1:18080", "COPILOT_PROVIDER_TYPE=anthropic", "COPILOT_PROVIDER_API_KEY=sk-secret-1"}
	in := New(provider.Options{Path: cli}).Inspect(t.Context(), env)
	if in.Err != nil || in.Path != cli || in.Version != VerifiedVersion || !in.Verified {
		t.Errorf("Inspect %+v", in)
	}
	all := in.Endpoint + " " + in.Credentials
	if strings.Contains(all, "sk-secret-1") || strings.Contains(all, "pw@") {
		t.Errorf("a secret in %q", all)
	}
	if !strings.Contains(in.Endpoint, "127.0.0.1:18080") || !strings.Contains(in.Endpoint, "anthropic") || !strings.Contains(in.Credentials, "COPILOT_PROVIDER_API_KEY") {
		t.Errorf("endpoint %q, credentials %q", in.Endpoint, in.Credentials)
	}
	t.Logf("%+v", in)

	missing := New(provider.Options{Path: "/nonexistent/copilot"})
	in = missing.Inspect(t.Context(), env)
	var me *provider.MissingCLIError
	if !errors.As(in.Err, &me) || me.Package != "@github/copilot" || me.ConfigKey != "providers.copilot.path" {
		t.Errorf("Inspect of a missing CLI: %v", in.Err)
	}
	_, err := missing.Start(t.Context(), provider.Spec{Dir: t.TempDir(), Env: env}, agentclitest.NewHost(allow))
	if !errors.As(err, &me) || !strings.Contains(err.Error(), "npm install -g @github/copilot") {
		t.Errorf("Start of a missing CLI: %v", err)
	}
}
