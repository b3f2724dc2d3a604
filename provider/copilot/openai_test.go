package copilot

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agents-fleet/fleet/internal/modelmock"
	"github.com/agents-fleet/fleet/provider"
)

// With the OpenAI Responses wire, Copilot offers apply_patch (a freeform
// tool): its edits become FileEdited events, created, edited and deleted.
func TestOpenAIApplyPatch(t *testing.T) {
	t.Parallel()
	r := newRig(t, modelmock.Script{})
	for _, f := range []string{"a.txt", "b.txt"} {
		if err := os.WriteFile(filepath.Join(r.dir, f), []byte("old\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	path := func(f string) string { return filepath.Join(r.dir, f) }
	patch := "*** Begin Patch\n*** Add File: " + path("notes.md") + "\n+hello from a patch\n" +
		"*** Update File: " + path("a.txt") + "\n@@\n-old\n+new\n" +
		"*** Delete File: " + path("b.txt") + "\n*** End Patch\n"
	r.srv.SetScript(modelmock.Script{Rules: []modelmock.Rule{{Name: "patch", Match: "fleet-patch", Turns: []modelmock.Turn{
		{ToolCalls: []modelmock.ToolCall{{Name: "apply_patch", Input: patch}}, Usage: modelmock.Usage{Input: 200, Output: 30, CacheRead: 50}},
		{Text: "patched", Usage: modelmock.Usage{Input: 260, Output: 4}},
	}}}})
	for i, kv := range r.env {
		switch {
		case strings.HasPrefix(kv, "COPILOT_PROVIDER_TYPE="):
			r.env[i] = "COPILOT_PROVIDER_TYPE=openai"
		case strings.HasPrefix(kv, "COPILOT_PROVIDER_BASE_URL="):
			r.env[i] = "COPILOT_PROVIDER_BASE_URL=" + r.srv.URL() + "/v1"
		case strings.HasPrefix(kv, "COPILOT_MODEL="):
			r.env[i] = "COPILOT_MODEL=gpt-5.5"
		}
	}
	r.env = append(r.env, "COPILOT_PROVIDER_WIRE_API=responses")
	h := newHost(allow)
	s := r.start(t, r.spec(), h)
	send(t, s, "fleet-patch: change the files")
	evs := h.waitTurns(t, 1)
	if te := last[provider.TurnEnded](t, evs); te.Err != nil || te.Result != "patched" {
		t.Fatalf("TurnEnded %+v\n%s", te, dump(evs))
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
	st := last[provider.ToolStarted](t, evs)
	if st.Name != "apply_patch" || st.Input["input"] != patch || st.Detail != path("notes.md") {
		t.Errorf("ToolStarted %+v", st)
	}
	got := all[provider.FileEdited](evs)
	slices.SortFunc(got, func(a, b provider.FileEdited) int { return strings.Compare(a.Path, b.Path) })
	want := []provider.FileEdited{
		{Path: path("a.txt"), Change: provider.Edited, Tool: "apply_patch"},
		{Path: path("b.txt"), Change: provider.Deleted, Tool: "apply_patch"},
		{Path: path("notes.md"), Change: provider.Created, Tool: "apply_patch"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("FileEdited %+v\n%s", got, dump(evs))
	}
	// OpenAI's input_tokens include the cached part; Usage's do not.
	if u := sumUsage(evs); u != (provider.Usage{InputTokens: 410, OutputTokens: 34, CacheReadTokens: 50}) {
		t.Errorf("usage %+v", u)
	}
	if _, perms := h.snapshot(); len(perms) == 0 || perms[0].Tool != "apply_patch" {
		t.Errorf("prompts %+v", perms)
	}
}
