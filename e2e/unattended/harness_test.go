//go:build linux

package unattended

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/client"
	"github.com/agents-fleet/fleet/internal/modelmock"
	"github.com/agents-fleet/fleet/protocol"
	"github.com/agents-fleet/fleet/registry"
)

// The harness: a fleet home and folder, the built binary run in them, and
// consoles attached to it. (Package e2e has a fuller one; this is what
// these tests use.)

var fleetBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fleet-unattended")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fleetBin = filepath.Join(dir, "fleet")
	build := exec.Command("go", "build", "-o", fleetBin, "../../cmd/fleet")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build fleet:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// bound bounds a wait for something the fleet does with real CLIs on a
// loaded machine; a wait reaches it only when what it waits for never comes.
const bound = 3 * time.Minute

type env struct {
	t    *testing.T
	home string
	cwd  string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	home, err := os.MkdirTemp("", "fu") // short: socket paths fit sun_path
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	return &env{t: t, home: home, cwd: t.TempDir()}
}

// config writes config.json: limits (with a stall grace fit for a loaded
// machine) and more keys.
func (e *env) config(limits map[string]any, more map[string]any) {
	e.t.Helper()
	lim := map[string]any{"stallGraceMs": 5000}
	for k, v := range limits {
		lim[k] = v
	}
	cfg := map[string]any{"limits": lim}
	for k, v := range more {
		cfg[k] = v
	}
	b, _ := json.Marshal(cfg)
	if err := os.WriteFile(filepath.Join(e.home, "config.json"), b, 0o600); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) gitRepo() {
	e.t.Helper()
	os.WriteFile(filepath.Join(e.cwd, "README"), []byte("hello\n"), 0o644)
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "README"},
		{"-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q", "-m", "readme"}} {
		if out, err := exec.Command("git", append([]string{"-C", e.cwd}, args...)...).CombinedOutput(); err != nil {
			e.t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
}

// agentEnv is newEnv with config.json set so that `fleet run --provider
// name` runs the pinned CLI against a scripted endpoint (the CLI with a
// private HOME).
func agentEnv(t *testing.T, name string, script modelmock.Script, limits map[string]any) *env {
	t.Helper()
	bin := modelmock.RequireCLI(t, name)
	mock, err := modelmock.Start(script)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	e := newEnv(t)
	e.gitRepo()
	cliHome := t.TempDir()
	penv := map[string]string{"HOME": cliHome}
	switch name {
	case "claude":
		penv["ANTHROPIC_BASE_URL"] = mock.URL()
		penv["ANTHROPIC_API_KEY"] = "sk-test"
	case "codex":
		codexHome := filepath.Join(cliHome, "codex")
		os.MkdirAll(codexHome, 0o700)
		cfg := "model = \"mock-model\"\nmodel_provider = \"mock\"\n\n[model_providers.mock]\nname = \"Mock\"\n" +
			"base_url = \"" + mock.URL() + "/v1\"\nenv_key = \"MOCK_API_KEY\"\nwire_api = \"responses\"\n"
		if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		penv["CODEX_HOME"] = codexHome
		penv["MOCK_API_KEY"] = "sk-test"
	case "copilot":
		// BYOK against the endpoint; the CLI unpacks its package into a
		// cache the tests share.
		cache := filepath.Join(os.TempDir(), "fleet-e2e-copilot-cache")
		os.MkdirAll(cache, 0o700)
		penv["XDG_CACHE_HOME"] = cache
		penv["COPILOT_OFFLINE"] = "true"
		penv["COPILOT_PROVIDER_BASE_URL"] = mock.URL()
		penv["COPILOT_PROVIDER_TYPE"] = "anthropic"
		penv["COPILOT_PROVIDER_API_KEY"] = "sk-test"
		penv["COPILOT_MODEL"] = "claude-sonnet-4.5"
	default:
		t.Fatalf("no agent env for %s", name)
	}
	e.config(limits, map[string]any{"providers": map[string]any{name: map[string]any{"path": bin, "env": penv}}})
	return e
}

// environ is the fleet's environment: this one without the fleet's own
// variables, and the env's home.
func (e *env) environ() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AGENTS_FLEET_") {
			out = append(out, kv)
		}
	}
	return append(out, "AGENTS_FLEET_HOME="+e.home)
}

type daemon struct {
	t    *testing.T
	cmd  *exec.Cmd
	desc registry.Descriptor
	done chan struct{}

	mu     sync.Mutex
	stderr strings.Builder
}

func (d *daemon) Write(p []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stderr.Write(p)
}

// start runs `fleet run --headless ARGS` and waits until it announced itself.
func (e *env) start(args ...string) *daemon {
	e.t.Helper()
	cmd := exec.Command(fleetBin, append([]string{"run", "--headless"}, args...)...)
	cmd.Dir, cmd.Env = e.cwd, e.environ()
	d := &daemon{t: e.t, cmd: cmd, done: make(chan struct{})}
	cmd.Stderr = d
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	go func() { cmd.Wait(); close(d.done) }()
	e.t.Cleanup(func() {
		d.stop()
		if e.t.Failed() {
			d.mu.Lock()
			e.t.Logf("fleet stderr (end):\n%s", tail(d.stderr.String(), 4000))
			d.mu.Unlock()
		}
	})
	deadline := time.Now().Add(time.Minute)
	for {
		if es, _ := registry.Live(filepath.Join(e.home, "sockets")); len(es) == 1 {
			d.desc = es[0].Descriptor
			return d
		}
		select {
		case <-d.done:
			e.t.Fatalf("fleet run exited at start:\n%s", d.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			e.t.Fatal("the fleet did not announce itself")
		}
		time.Sleep(50 * time.Millisecond) // polling the registry, a condition
	}
}

// stop stops the fleet with SIGINT and waits for it to end.
func (d *daemon) stop() {
	select {
	case <-d.done:
		return
	default:
	}
	d.cmd.Process.Signal(os.Interrupt)
	select {
	case <-d.done:
	case <-time.After(time.Minute):
		d.cmd.Process.Kill()
		<-d.done
		d.t.Errorf("fleet did not stop within a minute of SIGINT")
	}
}

func (d *daemon) dial(kind protocol.ClientKind, name string) *client.Conn {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := client.Dial(ctx, d.desc, client.Options{ClientKind: kind, ClientName: name})
	if err != nil {
		d.t.Fatal(err)
	}
	d.t.Cleanup(func() { c.Close() })
	return c
}

// stream is a connection's frames, read ahead without bound of time.
type stream struct {
	t      *testing.T
	frames chan protocol.Message
}

func watch(t *testing.T, c *client.Conn) *stream {
	s := &stream{t: t, frames: make(chan protocol.Message, 100000)}
	go func() {
		defer close(s.frames)
		for {
			m, _, _, err := c.Next()
			if err != nil {
				if _, ok := err.(*client.FrameError); ok {
					continue
				}
				return
			}
			s.frames <- m
		}
	}()
	return s
}

func (s *stream) waitFor(what string, pred func(protocol.Message) bool) protocol.Message {
	s.t.Helper()
	return s.waitLong(what, pred)
}

// waitLong reads frames until one matches pred and returns it; the frames
// read before are consumed.
func (s *stream) waitLong(what string, pred func(protocol.Message) bool) protocol.Message {
	s.t.Helper()
	timeout := time.After(bound)
	for {
		select {
		case m, ok := <-s.frames:
			if !ok {
				s.t.Fatalf("connection closed while waiting for %s", what)
			}
			if pred(m) {
				return m
			}
		case <-timeout:
			s.t.Fatalf("timed out after %v waiting for %s", bound, what)
		}
	}
}

func isType(typ string) func(protocol.Message) bool {
	return func(m protocol.Message) bool { return m.MessageType() == typ }
}

func hubFrom(worker, kind string) func(protocol.Message) bool {
	return func(m protocol.Message) bool {
		h, ok := m.(*protocol.HubEvent)
		return ok && h.From == worker && h.Kind == kind
	}
}

func replyContaining(sub string) func(protocol.Message) bool {
	return func(m protocol.Message) bool {
		r, ok := m.(*protocol.Reply)
		return ok && strings.Contains(r.Text, sub)
	}
}

// gitOf waits for a fleetState in which worker's git state satisfies ok.
func gitOf(s *stream, what, worker string, ok func(*protocol.WorkerGit) bool) *protocol.WorkerGit {
	s.t.Helper()
	var got *protocol.WorkerGit
	s.waitLong(what, func(m protocol.Message) bool {
		fs, isState := m.(*protocol.FleetState)
		if !isState {
			return false
		}
		for _, w := range fs.Workers {
			if w.ID == worker && w.Git != nil && ok(w.Git) {
				got = w.Git
				return true
			}
		}
		return false
	})
	return got
}
