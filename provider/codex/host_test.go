package codex

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/agents-fleet/fleet/internal/modelmock"
	"github.com/agents-fleet/fleet/provider"
	"github.com/agents-fleet/fleet/provider/agentcli/agentclitest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// wait is the bound on every condition a test waits for.
const wait = agentclitest.Wait

var (
	allow = agentclitest.Allow("accept")
	deny  = agentclitest.Deny("decline")
)

// index is the position of the first event at or after from that matches.
func index(evs []provider.Event, from int, match func(provider.Event) bool) int {
	for i := from; i < len(evs); i++ {
		if match(evs[i]) {
			return i
		}
	}
	return -1
}

func is[T provider.Event](ev provider.Event) bool { _, ok := ev.(T); return ok }

// rig is one test's scripted endpoint, worktree and private HOME, with a
// CODEX_HOME whose config.toml points a custom provider at the endpoint,
// with model gpt-5.5 (which has apply_patch).
type rig struct{ *agentclitest.Rig }

func newRig(t *testing.T, script modelmock.Script) *rig {
	t.Helper()
	r := &rig{agentclitest.NewRig(t, "codex", script)}
	codexHome := filepath.Join(r.Base, "codex-home")
	if err := os.MkdirAll(codexHome, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`model = "gpt-5.5"
model_provider = "mock"

[model_providers.mock]
name = "Mock"
base_url = %q
env_key = "MOCK_API_KEY"
wire_api = "responses"
`, r.Srv.URL()+"/v1")
	if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	r.Env = append(r.Env, "CODEX_HOME="+codexHome, "MOCK_API_KEY=sk-test", "LANG=C.UTF-8")
	return r
}

// start starts a session of the real CLI and closes it at the test's end.
func (r *rig) start(t *testing.T, spec provider.Spec, h provider.Host) *session {
	t.Helper()
	return startWith(t, New(provider.Options{Path: r.CLI}), spec, h)
}

func startWith(t *testing.T, p *Provider, spec provider.Spec, h provider.Host) *session {
	t.Helper()
	return agentclitest.Start(t, p, spec, h).(*session)
}

func send(t *testing.T, s *session, text string) { t.Helper(); agentclitest.Send(t, s, text) }

// lastRequestBody is the body of the endpoint's last model request.
func (r *rig) lastRequestBody(t *testing.T) string {
	t.Helper()
	reqs := r.Srv.Requests()
	for i := len(reqs) - 1; i >= 0; i-- {
		if reqs[i].API == "openai" {
			return string(reqs[i].Body)
		}
	}
	t.Fatal("no model request was made")
	return ""
}
