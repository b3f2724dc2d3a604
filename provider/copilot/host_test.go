package copilot

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agents-fleet/fleet/internal/modelmock"
	"github.com/agents-fleet/fleet/provider"
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

// wait bounds every condition a test waits for: generous, as the CLI runs
// on a loaded machine (and under -race in CI).
const wait = 120 * time.Second

// recHost records a session's events and answers its prompts with decide.
type recHost struct {
	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every change
	events  []provider.Event
	perms   []provider.PermissionRequest
	decide  func(context.Context, provider.PermissionRequest) (provider.Decision, error)
}

func newHost(decide func(context.Context, provider.PermissionRequest) (provider.Decision, error)) *recHost {
	return &recHost{changed: make(chan struct{}), decide: decide}
}

func allow(context.Context, provider.PermissionRequest) (provider.Decision, error) {
	return provider.Decision{Allow: true, OptionID: "allow_once"}, nil
}

func deny(context.Context, provider.PermissionRequest) (provider.Decision, error) {
	return provider.Decision{Allow: false, Message: "not today"}, nil
}

// block never answers: it waits for ctx's end, as the engine's relay does
// for a prompt nobody answers.
func block(ctx context.Context, _ provider.PermissionRequest) (provider.Decision, error) {
	<-ctx.Done()
	return provider.Decision{}, provider.ErrNoAnswer
}

func (h *recHost) touchLocked() {
	close(h.changed)
	h.changed = make(chan struct{})
}

func (h *recHost) Event(ev provider.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, ev)
	h.touchLocked()
}

func (h *recHost) Permission(ctx context.Context, r provider.PermissionRequest) (provider.Decision, error) {
	h.mu.Lock()
	h.perms = append(h.perms, r)
	h.touchLocked()
	decide := h.decide
	h.mu.Unlock()
	if decide == nil {
		return block(ctx, r)
	}
	return decide(ctx, r)
}

func (h *recHost) Ask(context.Context, provider.Question) (string, error) {
	return "", provider.ErrNoAnswer
}

func (h *recHost) Confirm(context.Context, string) (bool, error) { return false, provider.ErrNoAnswer }

func (h *recHost) snapshot() ([]provider.Event, []provider.PermissionRequest) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]provider.Event(nil), h.events...), append([]provider.PermissionRequest(nil), h.perms...)
}

// waitFor waits until cond holds for the events and prompts so far. It
// looks again on every change and every poll interval, for conditions on
// more than the events (a process running).
func (h *recHost) waitFor(t *testing.T, what string, cond func(evs []provider.Event, perms []provider.PermissionRequest) bool) []provider.Event {
	t.Helper()
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	for {
		h.mu.Lock()
		evs := append([]provider.Event(nil), h.events...)
		perms := append([]provider.PermissionRequest(nil), h.perms...)
		ch := h.changed
		h.mu.Unlock()
		if cond(evs, perms) {
			return evs
		}
		select {
		case <-ch:
		case <-poll.C:
		case <-deadline.C:
			t.Fatalf("timed out after %v waiting for %s; events:\n%s", wait, what, dump(evs))
		}
	}
}

// waitTurns waits for n TurnEnded events and returns all events.
func (h *recHost) waitTurns(t *testing.T, n int) []provider.Event {
	t.Helper()
	return h.waitFor(t, fmt.Sprintf("%d TurnEnded", n), func(evs []provider.Event, _ []provider.PermissionRequest) bool {
		return count[provider.TurnEnded](evs) >= n
	})
}

func count[T provider.Event](evs []provider.Event) int {
	return len(all[T](evs))
}

func all[T provider.Event](evs []provider.Event) []T {
	var out []T
	for _, ev := range evs {
		if v, ok := ev.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

func last[T provider.Event](t *testing.T, evs []provider.Event) T {
	t.Helper()
	vs := all[T](evs)
	if len(vs) == 0 {
		var zero T
		t.Fatalf("no %T event; events:\n%s", zero, dump(evs))
	}
	return vs[len(vs)-1]
}

func dump(evs []provider.Event) string {
	var b strings.Builder
	for i, ev := range evs {
		s := fmt.Sprintf("%#v", ev)
		if len(s) > 400 {
			s = s[:400] + "…"
		}
		fmt.Fprintf(&b, "  %2d %s\n", i, s)
	}
	return b.String()
}

// kinds names the events' types, in order, leaving out Notes.
func kinds(evs []provider.Event) []string {
	var out []string
	for _, ev := range evs {
		if _, ok := ev.(provider.Note); ok {
			continue
		}
		out = append(out, strings.TrimPrefix(fmt.Sprintf("%T", ev), "provider."))
	}
	return out
}

func sumUsage(evs []provider.Event) provider.Usage {
	var u provider.Usage
	for _, x := range all[provider.Usage](evs) {
		u.InputTokens += x.InputTokens
		u.OutputTokens += x.OutputTokens
		u.CacheReadTokens += x.CacheReadTokens
		u.CacheWriteTokens += x.CacheWriteTokens
	}
	return u
}

// rig is one test's endpoint, private HOME and worktree.
type rig struct {
	srv  *modelmock.Server
	cli  string
	home string
	dir  string
	env  []string
}

func newRig(t *testing.T, script modelmock.Script) *rig {
	t.Helper()
	cli := modelmock.RequireCLI(t, "copilot")
	srv, err := modelmock.Start(script)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	base := t.TempDir()
	r := &rig{srv: srv, cli: cli, home: filepath.Join(base, "home"), dir: filepath.Join(base, "work")}
	for _, d := range []string{r.home, r.dir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	r.env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + r.home,
		"XDG_CACHE_HOME=" + pkgCache,
		"LANG=C.UTF-8",
		"COPILOT_OFFLINE=true",
		"COPILOT_PROVIDER_BASE_URL=" + srv.URL(),
		"COPILOT_PROVIDER_TYPE=anthropic",
		"COPILOT_PROVIDER_API_KEY=sk-test",
		"COPILOT_MODEL=claude-sonnet-4.5",
	}
	return r
}

func (r *rig) spec() provider.Spec {
	return provider.Spec{Agent: "w1", Role: provider.RoleWorker, Dir: r.dir, Env: r.env}
}

func (r *rig) provider() *Provider { return New(provider.Options{Path: r.cli}) }

// start starts a session of the real CLI and closes it at the test's end.
func (r *rig) start(t *testing.T, spec provider.Spec, h provider.Host) *session {
	t.Helper()
	return startWith(t, r.provider(), spec, h)
}

func startWith(t *testing.T, p *Provider, spec provider.Spec, h provider.Host) *session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	sess, err := p.Start(ctx, spec, h)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { sess.Close() })
	return sess.(*session)
}

func send(t *testing.T, s *session, text string) {
	t.Helper()
	if err := s.Send(t.Context(), provider.Turn{Text: text}); err != nil {
		t.Fatalf("Send: %v", err)
	}
}

// modelRequests are the endpoint's Anthropic requests of rule.
func (r *rig) modelRequests(rule string) []modelmock.Request {
	var out []modelmock.Request
	for _, q := range r.srv.Requests() {
		if q.API == "anthropic" && (rule == "" || q.Rule == rule) {
			out = append(out, q)
		}
	}
	return out
}
