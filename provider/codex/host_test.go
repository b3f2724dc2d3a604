package codex

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agents-fleet/fleet/internal/modelmock"
	"github.com/agents-fleet/fleet/provider"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// wait is the bound on every condition a test waits for: generous, as the
// CLI runs on a loaded machine (and under -race in CI).
const wait = 120 * time.Second

// recHost records a session's events and answers its prompts with decide.
type recHost struct {
	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every change
	events  []provider.Event
	perms   []provider.PermissionRequest
	asks    []provider.Question
	decide  func(provider.PermissionRequest) (provider.Decision, error)
}

func newHost(decide func(provider.PermissionRequest) (provider.Decision, error)) *recHost {
	return &recHost{changed: make(chan struct{}), decide: decide}
}

func allow(provider.PermissionRequest) (provider.Decision, error) {
	return provider.Decision{Allow: true, OptionID: "accept"}, nil
}

func deny(provider.PermissionRequest) (provider.Decision, error) {
	return provider.Decision{Allow: false, OptionID: "decline", Message: "not today"}, nil
}

func (h *recHost) touch() {
	close(h.changed)
	h.changed = make(chan struct{})
}

func (h *recHost) Event(ev provider.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, ev)
	h.touch()
}

func (h *recHost) Permission(ctx context.Context, r provider.PermissionRequest) (provider.Decision, error) {
	h.mu.Lock()
	h.perms = append(h.perms, r)
	h.touch()
	decide := h.decide
	h.mu.Unlock()
	if decide == nil {
		<-ctx.Done()
		return provider.Decision{}, provider.ErrNoAnswer
	}
	return decide(r)
}

func (h *recHost) Ask(ctx context.Context, q provider.Question) (string, error) {
	h.mu.Lock()
	h.asks = append(h.asks, q)
	h.touch()
	h.mu.Unlock()
	return "", provider.ErrNoAnswer
}

func (h *recHost) Confirm(ctx context.Context, summary string) (bool, error) {
	return false, provider.ErrNoAnswer
}

func (h *recHost) snapshot() ([]provider.Event, []provider.PermissionRequest) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]provider.Event(nil), h.events...), append([]provider.PermissionRequest(nil), h.perms...)
}

// waitFor waits until cond holds for the events so far.
func (h *recHost) waitFor(t *testing.T, what string, cond func(evs []provider.Event) bool) []provider.Event {
	t.Helper()
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		h.mu.Lock()
		evs := append([]provider.Event(nil), h.events...)
		ch := h.changed
		h.mu.Unlock()
		if cond(evs) {
			return evs
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s; events:\n%s", what, dump(evs))
		}
	}
}

// waitTurns waits for n TurnEnded events and returns all events.
func (h *recHost) waitTurns(t *testing.T, n int) []provider.Event {
	t.Helper()
	return h.waitFor(t, fmt.Sprintf("%d TurnEnded", n), func(evs []provider.Event) bool { return count[provider.TurnEnded](evs) >= n })
}

func count[T provider.Event](evs []provider.Event) int {
	n := 0
	for _, ev := range evs {
		if _, ok := ev.(T); ok {
			n++
		}
	}
	return n
}

func all[T provider.Event](evs []provider.Event) []T {
	var out []T
	for _, ev := range evs {
		if e, ok := ev.(T); ok {
			out = append(out, e)
		}
	}
	return out
}

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

func dump(evs []provider.Event) string {
	var b strings.Builder
	for i, ev := range evs {
		s := fmt.Sprintf("%#v", ev)
		if len(s) > 400 {
			s = s[:400] + "…"
		}
		fmt.Fprintf(&b, "  %d: %s\n", i, s)
	}
	return b.String()
}

func sumUsage(evs []provider.Event) provider.Usage {
	var u provider.Usage
	for _, e := range all[provider.Usage](evs) {
		u.InputTokens += e.InputTokens
		u.OutputTokens += e.OutputTokens
		u.CacheReadTokens += e.CacheReadTokens
		u.CacheWriteTokens += e.CacheWriteTokens
	}
	return u
}

// rig is one test's scripted endpoint, private CODEX_HOME and worktree.
type rig struct {
	srv  *modelmock.Server
	cli  string
	home string // HOME and CODEX_HOME's parent
	dir  string // the worktree
	env  []string
}

// newRig starts the endpoint and writes a CODEX_HOME whose config.toml
// points a custom provider at it, with model gpt-5.5 (which has
// apply_patch).
func newRig(t *testing.T, script modelmock.Script) *rig {
	t.Helper()
	cli := modelmock.RequireCLI(t, "codex")
	srv, err := modelmock.Start(script)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	base := t.TempDir()
	r := &rig{srv: srv, cli: cli, home: filepath.Join(base, "home"), dir: filepath.Join(base, "work")}
	codexHome := filepath.Join(base, "codex-home")
	for _, d := range []string{r.home, r.dir, codexHome} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfg := fmt.Sprintf(`model = "gpt-5.5"
model_provider = "mock"

[model_providers.mock]
name = "Mock"
base_url = %q
env_key = "MOCK_API_KEY"
wire_api = "responses"
`, srv.URL()+"/v1")
	if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	r.env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + r.home,
		"CODEX_HOME=" + codexHome,
		"MOCK_API_KEY=sk-test",
		"LANG=C.UTF-8",
	}
	return r
}

func (r *rig) spec() provider.Spec {
	return provider.Spec{Agent: "w1", Role: provider.RoleWorker, Dir: r.dir, Env: r.env}
}

// start starts a session of the real CLI and closes it at the test's end.
func (r *rig) start(t *testing.T, spec provider.Spec, h provider.Host) *session {
	t.Helper()
	return startWith(t, New(provider.Options{Path: r.cli}), spec, h)
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

// lastRequestBody is the body of the endpoint's last model request.
func (r *rig) lastRequestBody(t *testing.T) string {
	t.Helper()
	reqs := r.srv.Requests()
	for i := len(reqs) - 1; i >= 0; i-- {
		if reqs[i].API == "openai" {
			return string(reqs[i].Body)
		}
	}
	t.Fatal("no model request was made")
	return ""
}
