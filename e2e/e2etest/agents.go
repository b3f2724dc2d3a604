package e2etest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/agents-fleet/fleet/internal/modelmock"
)

// AgentEnv is a fleet home and a git repository whose fleet runs an agent
// provider against a scripted model endpoint: the real CLI, no network.
type AgentEnv struct {
	*Env
	Mock *modelmock.Server
}

// NewAgentEnv starts the endpoint with script and writes config.json so
// that `fleet run --provider name` runs the pinned CLI against it, with
// limits (a stall grace fit for a loaded machine unless they set one).
// The test fails (under CI) or is skipped when the CLI is missing.
func NewAgentEnv(t *testing.T, name string, script modelmock.Script, limits ...map[string]any) *AgentEnv {
	t.Helper()
	bin := modelmock.RequireCLI(t, name)
	mock, err := modelmock.Start(script)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	e := NewEnv(t)
	e.GitRepo()
	lim := map[string]any{}
	for _, l := range limits {
		for k, v := range l {
			lim[k] = v
		}
	}
	e.Config(lim, map[string]any{"providers": map[string]any{name: map[string]any{"path": bin, "env": CLIEnv(t, name, mock.URL())}}})
	return &AgentEnv{Env: e, Mock: mock}
}

// CLIEnv is the environment (providers.NAME.env in a fleet's or a worker
// host's config.json) under which the agent CLI name talks to the scripted
// endpoint at url: a private HOME, and what that CLI needs to reach a
// local endpoint (docs/providers).
func CLIEnv(t testing.TB, name, url string) map[string]string {
	t.Helper()
	cliHome := t.TempDir()
	env := map[string]string{"HOME": cliHome}
	switch name {
	case "claude":
		env["ANTHROPIC_BASE_URL"] = url
		env["ANTHROPIC_API_KEY"] = "sk-test"
	case "codex":
		// A custom provider reaches a local endpoint (OPENAI_BASE_URL is
		// ignored). A model without metadata gets MCP tools listed
		// directly (docs/providers/codex.md).
		codexHome := filepath.Join(cliHome, "codex")
		os.MkdirAll(codexHome, 0o700)
		cfg := "model = \"mock-model\"\nmodel_provider = \"mock\"\n\n[model_providers.mock]\nname = \"Mock\"\n" +
			"base_url = \"" + url + "/v1\"\nenv_key = \"MOCK_API_KEY\"\nwire_api = \"responses\"\n"
		if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		env["CODEX_HOME"] = codexHome
		env["MOCK_API_KEY"] = "sk-test"
	case "copilot":
		// BYOK against the endpoint. The CLI unpacks its 235 MB package
		// into its cache on first run: the tests share one.
		cache := filepath.Join(os.TempDir(), "fleet-e2e-copilot-cache")
		os.MkdirAll(cache, 0o700)
		env["XDG_CACHE_HOME"] = cache
		env["COPILOT_OFFLINE"] = "true"
		env["COPILOT_PROVIDER_BASE_URL"] = url
		env["COPILOT_PROVIDER_TYPE"] = "anthropic"
		env["COPILOT_PROVIDER_API_KEY"] = "sk-test"
		env["COPILOT_MODEL"] = "claude-sonnet-4.5"
	default:
		t.Fatalf("no agent env for %s", name)
	}
	return env
}

// AnsweredUsage sums the usage the endpoint reported in the answers of
// reqs, the requests it took with script: what the fleet must count.
func AnsweredUsage(script modelmock.Script, reqs []modelmock.Request) (in, out int64) {
	for _, r := range reqs {
		if r.Status != 200 {
			continue
		}
		for _, rule := range script.Rules {
			if rule.Name == r.Rule && len(rule.Turns) > 0 {
				t := rule.Turns[min(r.Turn, len(rule.Turns)-1)]
				in += t.Usage.Input
				out += t.Usage.Output
			}
		}
	}
	return in, out
}
