package copilot

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agents-fleet/fleet/internal/modelmock"
	"github.com/agents-fleet/fleet/provider"
	"github.com/agents-fleet/fleet/provider/agentcli/agentclitest"
)

// With the OpenAI Responses wire, Copilot offers apply_patch (a freeform
// tool): its edits become FileEdited events, created, edited and deleted.
func TestOpenAIApplyPatch(t *testing.T) {
	t.Parallel()
	r := newRig(t, modelmock.Script{})
	for _, f := range []string{"a.txt", "b.txt"} {
		if err := os.WriteFile(filepath.Join(r.Dir, f), []byte("old\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	path := func(f string) string { return filepath.Join(r.Dir, f) }
	patch := "*** Begin Patch\n*** Add File: " + path("notes.md") + "\n+hello from a patch\n" +
		"*** Update File: " + path("a.txt") + "\n@@\n-old\n+new\n" +
		"*** Delete File: " + path("b.txt") + "\n*** End Patch\n"
	r.Srv.SetScript(modelmock.Script{Rules: []modelmock.Rule{{Name: "patch", Match: "fleet-patch", Turns: []modelmock.Turn{
		{ToolCalls: []modelmock.ToolCall{{Name: "apply_patch", Input: patch}}, Usage: modelmock.Usage{Input: 200, Output: 30, CacheRead: 50}},
		{Text: "patched", Usage: modelmock.Usage{Input: 260, Output: 4}},
	}}}})
	for i, kv := range r.Env {
		switch {
		case strings.HasPrefix(kv, "COPILOT_PROVIDER_TYPE="):
			r.Env[i] = "COPILOT_PROVIDER_TYPE=openai"
		case strings.HasPrefix(kv, "COPILOT_PROVIDER_BASE_URL="):
			r.Env[i] = "COPILOT_PROVIDER_BASE_URL=" + r.Srv.URL() + "/v1"
		case strings.HasPrefix(kv, "COPILOT_MODEL="):
			r.Env[i] = "COPILOT_MODEL=gpt-5.5"
		}
	}
	r.Env = append(r.Env, "COPILOT_PROVIDER_WIRE_API=responses")
	h := agentclitest.NewHost(allow)
	s := r.start(t, r.Spec(), h)
	send(t, s, "fleet-patch: change the files")
	evs := h.WaitTurns(t, 1, wait)
	if te := agentclitest.Last[provider.TurnEnded](t, evs); te.Err != nil || te.Result != "patched" {
		t.Fatalf("TurnEnded %+v\n%s", te, agentclitest.Dump(evs))
	}
	if b, err := os.ReadFile(path("notes.md")); err != nil || string(b) != "hello from a patch\n" {
		t.Errorf("notes.md %q, %v", b, err)
	}
	if b, _ := os.ReadFile(path("a.txt")); string(b) != "new\n" {
		t.Errorf("a.txt %q", b)
	}
	if _, err := os.Stat(path("b.txt")); !os.IsNotExist(err) {
		t.Errorf("b.txt: %v", err)
	}
	st := agentclitest.Last[provider.ToolStarted](t, evs)
	if st.Name != "apply_patch" || st.Input["input"] != patch || st.Detail != path("notes.md") {
		t.Errorf("ToolStarted %+v", st)
	}
	got := agentclitest.All[provider.FileEdited](evs)
	slices.SortFunc(got, func(a, b provider.FileEdited) int { return strings.Compare(a.Path, b.Path) })
	want := []provider.FileEdited{
		{Path: path("a.txt"), Change: provider.Edited, Tool: "apply_patch"},
		{Path: path("b.txt"), Change: provider.Deleted, Tool: "apply_patch"},
		{Path: path("notes.md"), Change: provider.Created, Tool: "apply_patch"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("FileEdited %+v\n%s", got, agentclitest.Dump(evs))
	}
	// OpenAI's input_tokens include the cached part; Usage's do not.
	if u := agentclitest.SumUsage(evs); u != (provider.Usage{InputTokens: 410, OutputTokens: 34, CacheReadTokens: 50}) {
		t.Errorf("usage %+v", u)
	}
	if _, perms := h.Snapshot(); len(perms) == 0 || perms[0].Tool != "apply_patch" {
		t.Errorf("prompts %+v", perms)
	}
}
