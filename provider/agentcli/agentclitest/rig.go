package agentclitest

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/agents-fleet/fleet/internal/modelmock"
	"github.com/agents-fleet/fleet/provider"
)

// Rig is one test's scripted model endpoint, the real CLI, and a private
// HOME and worktree under one temp dir. The adapter's tests add the
// variables that point the CLI at the endpoint.
type Rig struct {
	Srv  *modelmock.Server
	CLI  string   // the real CLI's path
	Base string   // the temp dir that holds Home and Dir
	Home string   // HOME
	Dir  string   // the worktree: the session's working directory
	Env  []string // PATH and HOME; the adapter's tests add theirs
}

// NewRig finds the real CLI called name (the test is skipped without it),
// starts the endpoint with script and makes the directories.
func NewRig(t testing.TB, name string, script modelmock.Script) *Rig {
	t.Helper()
	cli := modelmock.RequireCLI(t, name)
	srv, err := modelmock.Start(script)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	base := t.TempDir()
	r := &Rig{Srv: srv, CLI: cli, Base: base, Home: filepath.Join(base, "home"), Dir: filepath.Join(base, "work")}
	for _, d := range []string{r.Home, r.Dir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	r.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + r.Home}
	return r
}

// Spec is a worker's session in the rig's worktree with its Env.
func (r *Rig) Spec() provider.Spec {
	return provider.Spec{Agent: "w1", Role: provider.RoleWorker, Dir: r.Dir, Env: slices.Clip(r.Env)}
}

// Record re-records file from the real CLI: it runs a session of the
// provider newP makes for a wrapper that starts the CLI and copies its
// stdout, one turn for each prompt, and writes what the CLI printed to
// file with the run's own paths replaced (the rig's dir by /work/repo,
// the endpoint by http://127.0.0.1:18080, the home directory by
// /home/user).
func (r *Rig) Record(t *testing.T, file string, newP func(path string) provider.Provider, spec provider.Spec, h *Host, prompts ...string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "stream.jsonl")
	wrapper := FakeCLI(t, filepath.Base(r.CLI), "\""+r.CLI+"\" \"$@\" | tee \""+out+"\"\n")
	s := Start(t, newP(wrapper), spec, h)
	for i, prompt := range prompts {
		Send(t, s, prompt)
		h.WaitTurns(t, i+1, Wait)
	}
	s.Close()
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	b = bytes.ReplaceAll(b, []byte(r.Base), []byte("/work/repo"))
	b = bytes.ReplaceAll(b, []byte(r.Srv.URL()), []byte("http://127.0.0.1:18080"))
	if home, err := os.UserHomeDir(); err == nil {
		b = bytes.ReplaceAll(b, []byte(home), []byte("/home/user"))
	}
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("recorded %d lines, %d bytes", bytes.Count(b, []byte("\n")), len(b))
}
