package copilot

import (
	"fmt"
	"os"
	"os/exec"
	"testing"

	"go.uber.org/goleak"

	"github.com/agents-fleet/fleet/internal/modelmock"
	"github.com/agents-fleet/fleet/provider"
	"github.com/agents-fleet/fleet/provider/agentcli/agentclitest"
)

// pkgCache is the XDG_CACHE_HOME every test's CLI shares: the CLI unpacks
// its 235 MB package there on first use, which a fresh cache per test
// would repeat. It holds no state of a session (that is under HOME, per
// test).
var pkgCache string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fleet-copilot-test-cache-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	pkgCache = dir
	warmCache()
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		_ = os.RemoveAll(dir)
		os.Exit(code)
	}))
}

// warmCache unpacks the CLI into pkgCache once, before tests run it in
// parallel (`copilot --version` is enough).
func warmCache() {
	cli, err := modelmock.CLIPath("copilot")
	if err != nil {
		return
	}
	cmd := exec.Command(cli, "--version")
	cmd.Env = append(os.Environ(), "XDG_CACHE_HOME="+pkgCache, "HOME="+pkgCache, "COPILOT_AUTO_UPDATE=false")
	_ = cmd.Run()
}

// wait bounds every condition a test waits for.
const wait = agentclitest.Wait

var (
	allow = agentclitest.Allow("allow_once")
	deny  = agentclitest.Deny("")
)

// rig is one test's endpoint, private HOME and worktree, the CLI pointed
// at the endpoint through its BYOK variables.
type rig struct{ *agentclitest.Rig }

func newRig(t *testing.T, script modelmock.Script) *rig {
	t.Helper()
	r := &rig{agentclitest.NewRig(t, "copilot", script)}
	r.Env = append(r.Env,
		"XDG_CACHE_HOME="+pkgCache,
		"LANG=C.UTF-8",
		"COPILOT_OFFLINE=true",
		"COPILOT_PROVIDER_BASE_URL="+r.Srv.URL(),
		"COPILOT_PROVIDER_TYPE=anthropic",
		"COPILOT_PROVIDER_API_KEY=sk-test",
		"COPILOT_MODEL=claude-sonnet-4.5",
	)
	return r
}

func (r *rig) provider() *Provider { return New(provider.Options{Path: r.CLI}) }

// start starts a session of the real CLI and closes it at the test's end.
func (r *rig) start(t *testing.T, spec provider.Spec, h provider.Host) *session {
	t.Helper()
	return startWith(t, r.provider(), spec, h)
}

func startWith(t *testing.T, p *Provider, spec provider.Spec, h provider.Host) *session {
	t.Helper()
	return agentclitest.Start(t, p, spec, h).(*session)
}

func send(t *testing.T, s *session, text string) { t.Helper(); agentclitest.Send(t, s, text) }

// modelRequests are the endpoint's Anthropic requests of rule.
func (r *rig) modelRequests(rule string) []modelmock.Request {
	var out []modelmock.Request
	for _, q := range r.Srv.Requests() {
		if q.API == "anthropic" && (rule == "" || q.Rule == rule) {
			out = append(out, q)
		}
	}
	return out
}
