package web

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/controlsock"
	"github.com/agents-fleet/fleet/internal/testwait"
	"github.com/agents-fleet/fleet/protocol"
	"github.com/agents-fleet/fleet/registry"
)

// backend records what the fleet was sent.
type backend struct {
	mu      sync.Mutex
	prompts []string
	answers []string
	native  []protocol.NativeRequest
}

func (b *backend) Prompt(m *protocol.UserMessage) {
	b.mu.Lock()
	b.prompts = append(b.prompts, m.Text)
	b.mu.Unlock()
}
func (b *backend) AnswerConfirm(id string, approve bool, _ string) error {
	b.mu.Lock()
	b.answers = append(b.answers, fmt.Sprintf("%s=%v", id, approve))
	b.mu.Unlock()
	return nil
}
func (b *backend) AnswerAsk(id, text, _ string) error {
	b.mu.Lock()
	b.answers = append(b.answers, id+"="+text)
	b.mu.Unlock()
	return nil
}

// Native lists one root and gives a receipt for pause; stop is held until
// the connection ends (a result that never comes).
func (b *backend) Native(ctx context.Context, req *protocol.NativeRequest) protocol.NativeResult {
	b.mu.Lock()
	b.native = append(b.native, *req)
	b.mu.Unlock()
	switch req.Action {
	case protocol.NativeList:
		return protocol.NativeResult{Kind: protocol.NativeKindRoots, Roots: []protocol.NativeRootInfo{{ID: "r1", Revision: 3, Intent: "run", Phase: "running"}}}
	case protocol.NativePause:
		return protocol.NativeResult{Kind: protocol.NativeKindReceipt, Receipt: &protocol.NativeReceipt{OperationID: req.OperationID,
			RootID: req.RootID, Action: req.Action, Revision: *req.ExpectedRevision + 1, Status: "persisted"}}
	case protocol.NativeStop:
		<-ctx.Done()
	}
	return protocol.NativeResult{Kind: protocol.NativeKindError, Code: "test", Message: "no such thing here"}
}

func (b *backend) nativeGot() []protocol.NativeRequest {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]protocol.NativeRequest(nil), b.native...)
}

func (b *backend) got() (prompts, answers []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.prompts...), append([]string(nil), b.answers...)
}

// testFleet is a real control socket (controlsock.Server) announced in a
// registry, with a backend that records what it is sent.
type testFleet struct {
	id  string
	srv *controlsock.Server
	be  *backend
}

func startFleet(t *testing.T, home, name string) *testFleet {
	t.Helper()
	id, err := registry.NewID(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if err := registry.EnsurePrivateDir(registry.ControlDir(home)); err != nil {
		t.Fatal(err)
	}
	token, err := registry.WriteToken(registry.TokenPath(home, id))
	if err != nil {
		t.Fatal(err)
	}
	be := &backend{}
	srv := controlsock.New(controlsock.Config{Token: token, Backend: be,
		Welcome: protocol.Welcome{SessionID: "s-" + name, SessionName: name, Cwd: home}})
	ln, err := controlsock.Listen(registry.SocketPath(home, id))
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { srv.Serve(ln); close(served) }()
	regDir := filepath.Join(home, "sockets")
	t.Cleanup(func() {
		registry.Remove(regDir, id)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		<-served
	})
	d := registry.Descriptor{SchemaVersion: registry.SchemaVersion, ID: id, PID: os.Getpid(), Name: name, Cwd: home,
		SocketPath: registry.SocketPath(home, id), TokenPath: registry.TokenPath(home, id),
		FleetHome: home, StartedAt: time.Now().UnixMilli(), ProtocolVersion: registry.ProtocolVersion}
	if _, err := registry.Write(regDir, d); err != nil {
		t.Fatal(err)
	}
	return &testFleet{id: id, srv: srv, be: be}
}

// webServer is a running Serve and the URL it printed.
type webServer struct {
	url  *url.URL // with the token
	base string   // http://host:port
	hc   *http.Client
}

func startWeb(t *testing.T, home string) *webServer {
	t.Helper()
	home, err := filepath.Abs(home)
	if err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, Config{Addr: "127.0.0.1:0", RegistryDir: filepath.Join(home, "sockets"), Ready: func(u string) { ready <- u }})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	var raw string
	select {
	case raw = <-ready:
	case err := <-done:
		t.Fatalf("Serve: %v", err)
	}
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return &webServer{url: u, base: "http://" + u.Host,
		hc: &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// login trades the URL's token for the cookie and returns the cookie.
func (w *webServer) login(t *testing.T) *http.Cookie {
	t.Helper()
	resp, err := w.hc.Get(w.url.String())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		t.Fatalf("the token URL: %s, Location %q; want 303 to / (the URL without the token)", resp.Status, resp.Header.Get("Location"))
	}
	for _, c := range resp.Cookies() {
		if c.Name == cookieName {
			if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Value == "" || strings.Contains(c.Value, w.url.Query().Get("token")) {
				t.Fatalf("cookie %+v: want HttpOnly, SameSite=Strict, a value of its own", c)
			}
			return c
		}
	}
	t.Fatalf("no %s cookie in %v", cookieName, resp.Header["Set-Cookie"])
	return nil
}

func (w *webServer) do(t *testing.T, method, path string, c *http.Cookie, header map[string]string, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, w.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if c != nil {
		req.AddCookie(c)
	}
	for k, v := range header {
		if k == "Host" {
			req.Host = v
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := w.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

func TestCheckAddr(t *testing.T) {
	for _, a := range []string{"127.0.0.1:7420", "127.0.0.1:0", "[::1]:7420", "localhost:7420"} {
		if err := CheckAddr(a); err != nil {
			t.Errorf("%s: %v", a, err)
		}
	}
	for _, a := range []string{"0.0.0.0:7420", ":7420", "192.168.1.5:7420", "[::]:7420", "example.com:80"} {
		err := CheckAddr(a)
		if err == nil || !strings.Contains(err.Error(), "SSH") {
			t.Errorf("%s: %v; want a refusal that says to use an SSH tunnel", a, err)
		}
	}
}

func TestGuard(t *testing.T) {
	home := shortHome(t)
	f := startFleet(t, home, "alpha")
	w := startWeb(t, home)
	cookie := w.login(t)

	origin := map[string]string{"Origin": w.base}
	cases := []struct {
		name, method, path string
		cookie             *http.Cookie
		header             map[string]string
		want               int
	}{
		{"no cookie", "GET", "/", nil, nil, http.StatusUnauthorized},
		{"no cookie, api", "GET", "/api/fleets", nil, nil, http.StatusUnauthorized},
		{"a wrong token", "GET", "/?token=nope", nil, nil, http.StatusUnauthorized},
		{"a wrong cookie", "GET", "/", &http.Cookie{Name: cookieName, Value: "nope"}, nil, http.StatusUnauthorized},
		{"the cookie", "GET", "/", cookie, nil, http.StatusOK},
		{"a foreign Host", "GET", "/", cookie, map[string]string{"Host": "evil.example:" + w.url.Port()}, http.StatusForbidden},
		{"a rebinding Host", "GET", "/api/fleets", cookie, map[string]string{"Host": "attacker.test"}, http.StatusForbidden},
		{"localhost", "GET", "/", cookie, map[string]string{"Host": "localhost:" + w.url.Port()}, http.StatusOK},
		{"a cross-origin POST", "POST", "/api/fleets/" + f.id + "/send", cookie, map[string]string{"Origin": "http://evil.example"}, http.StatusForbidden},
		{"a POST without Origin", "POST", "/api/fleets/" + f.id + "/send", cookie, nil, http.StatusForbidden},
		{"a POST without the cookie", "POST", "/api/fleets/" + f.id + "/send", nil, origin, http.StatusUnauthorized},
	}
	for _, c := range cases {
		code, body := w.do(t, c.method, c.path, c.cookie, c.header, `{"type":"prompt","text":"x"}`)
		if code != c.want {
			t.Errorf("%s: %d %s; want %d", c.name, code, body, c.want)
		}
	}
	if prompts, _ := f.be.got(); len(prompts) != 0 {
		t.Fatalf("refused requests reached the fleet: %q", prompts)
	}
}

// stream reads a page's event stream.
type stream struct {
	t      *testing.T
	events chan sse
}

type sse struct{ kind, data string }

func (w *webServer) events(t *testing.T, c *http.Cookie, fleet string) *stream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", w.base+"/api/fleets/"+fleet+"/events", nil)
	req.AddCookie(c)
	resp, err := w.hc.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		cancel()
		t.Fatalf("events: %s", resp.Status)
	}
	s := &stream{t: t, events: make(chan sse, 10000)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(s.events)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 0, 64<<10), 2<<20)
		var e sse
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				e.kind = line[len("event: "):]
			case strings.HasPrefix(line, "data: "):
				e.data = line[len("data: "):]
			case line == "" && e.kind != "":
				s.events <- e
				e = sse{}
			}
		}
	}()
	t.Cleanup(func() { cancel(); resp.Body.Close(); <-done })
	return s
}

// until reads events until one satisfies ok, returning those read.
func (s *stream) until(what string, ok func(sse) bool) []sse {
	s.t.Helper()
	var seen []sse
	timeout := time.After(testwait.Bound)
	for {
		select {
		case e, open := <-s.events:
			if !open {
				s.t.Fatalf("the stream ended while waiting for %s; read %v", what, seen)
			}
			seen = append(seen, e)
			if ok(e) {
				return seen
			}
		case <-timeout:
			s.t.Fatalf("timed out waiting for %s; read %v", what, seen)
		}
	}
}

func frameType(e sse) string {
	var f struct{ Type string }
	json.Unmarshal([]byte(e.data), &f)
	return f.Type
}

func isKind(kind string) func(sse) bool { return func(e sse) bool { return e.kind == kind } }

// TestReplayThenLiveNoDuplicates: a page gets reset, the fleet's replay
// (welcome first, the open request once), replayEnd, then what comes; a
// page that opens again later gets a fresh replay, not the same frames on
// top of the old ones; a request answered elsewhere is not replayed.
func TestReplayThenLiveNoDuplicates(t *testing.T) {
	home := shortHome(t)
	f := startFleet(t, home, "alpha")
	f.srv.Broadcast(&protocol.ConfirmRequest{ID: "c1", Summary: "rm -rf <b>build</b>"})
	w := startWeb(t, home)
	cookie := w.login(t)

	s := w.events(t, cookie, f.id)
	first := afterLastReset(s.until("the first replay's end", isKind("replayEnd")))
	if first[0].kind != "reset" || frameType(first[1]) != protocol.TypeWelcome {
		t.Fatalf("a page's stream starts %v; want reset, then welcome", first[:2])
	}
	if n := countFrames(first, protocol.TypeConfirmRequest); n != 1 {
		t.Fatalf("the open request came %d times in the replay", n)
	}
	f.srv.Broadcast(&protocol.Reply{Text: "live one"})
	s.until("the live reply", func(e sse) bool { return strings.Contains(e.data, "live one") })

	// The page opens again (a reload, or EventSource reconnecting).
	s2 := w.events(t, cookie, f.id)
	again := afterLastReset(s2.until("the second replay's end", isKind("replayEnd")))
	if again[0].kind != "reset" || countFrames(again, protocol.TypeConfirmRequest) != 1 || countFrames(again, protocol.TypeWelcome) != 1 {
		t.Fatalf("the second replay: %v", kinds(again))
	}
	if !slicesContainsData(again, "live one") {
		t.Fatalf("the second replay lacks the reply said before it: %v", kinds(again))
	}

	// Answered elsewhere: both pages see confirmResolved; a third page is
	// not replayed the request.
	f.srv.Broadcast(&protocol.ConfirmResolved{ID: "c1", Approved: false, Reason: protocol.ReasonAnswered})
	s.until("confirmResolved", func(e sse) bool { return frameType(e) == protocol.TypeConfirmResolved })
	s3 := w.events(t, cookie, f.id)
	third := afterLastReset(s3.until("the third replay's end", isKind("replayEnd")))
	if n := countFrames(third, protocol.TypeConfirmRequest); n != 0 {
		t.Fatalf("a resolved request was replayed %d times", n)
	}
}

// TestSendOnlyConsoleFrames: a prompt and an answer from the page reach the
// fleet; a frame a console does not send (hello, with a token in it) is
// refused, as is one over the frame limit.
func TestSendOnlyConsoleFrames(t *testing.T) {
	home := shortHome(t)
	f := startFleet(t, home, "alpha")
	f.srv.Broadcast(&protocol.AskRequest{ID: "a1", Question: "which?", Kind: "choice",
		Choices: []protocol.AskChoiceOption{{Label: "Staging", Value: "staging"}}})
	w := startWeb(t, home)
	cookie := w.login(t)
	origin := map[string]string{"Origin": w.base, "Content-Type": "application/json"}
	path := "/api/fleets/" + f.id + "/send"
	if code, body := w.do(t, "POST", path, cookie, origin, `{"type":"prompt","text":"$ echo from-the-page"}`); code != http.StatusAccepted {
		t.Fatalf("prompt: %d %s", code, body)
	}
	if code, body := w.do(t, "POST", path, cookie, origin, `{"type":"askResponse","id":"a1","text":"staging"}`); code != http.StatusAccepted {
		t.Fatalf("askResponse: %d %s", code, body)
	}
	testwait.For(t, testwait.Bound, "the prompt and the answer at the fleet", func() bool {
		p, a := f.be.got()
		return len(p) == 1 && p[0] == "$ echo from-the-page" && len(a) == 1 && a[0] == "a1=staging"
	})
	for _, bad := range []string{`{"type":"hello","protocolVersion":1,"token":"x","clientKind":"other"}`, `{"type":"ping"}`, `not json`,
		`{"type":"prompt","text":"` + strings.Repeat("x", protocol.MaxFrameSize) + `"}`} {
		if code, _ := w.do(t, "POST", path, cookie, origin, bad); code < 400 {
			t.Errorf("%.60s…: %d; want a refusal", bad, code)
		}
	}
	if p, _ := f.be.got(); len(p) != 1 {
		t.Fatalf("the fleet got %d prompts; want the one", len(p))
	}
}

// TestNativeThroughThePage: a page's native request reaches the fleet as
// sent and its result comes back to that request; a malformed request is
// refused before it is sent; a mutation whose connection ends before its
// result is answered "uncertain", so the page retries it as it was.
func TestNativeThroughThePage(t *testing.T) {
	home := shortHome(t)
	f := startFleet(t, home, "alpha")
	w := startWeb(t, home)
	cookie := w.login(t)
	hdr := map[string]string{"Origin": w.base, "Content-Type": "application/json"}
	path := "/api/fleets/" + f.id + "/native"

	code, body := w.do(t, "POST", path, cookie, hdr, `{"action":"list"}`)
	if code != http.StatusOK || !strings.Contains(body, `"kind":"roots"`) || !strings.Contains(body, `"id":"r1"`) {
		t.Fatalf("list: %d %s", code, body)
	}
	pause := `{"action":"pause","rootId":"r1","operationId":"web-op-0123456789abcdef","expectedRevision":3}`
	code, body = w.do(t, "POST", path, cookie, hdr, pause)
	if code != http.StatusOK || !strings.Contains(body, `"operationId":"web-op-0123456789abcdef"`) || !strings.Contains(body, `"revision":4`) {
		t.Fatalf("pause: %d %s", code, body)
	}
	got := f.be.nativeGot()
	if len(got) != 2 || got[1].OperationID != "web-op-0123456789abcdef" || *got[1].ExpectedRevision != 3 {
		t.Fatalf("the fleet got %+v", got)
	}
	for _, bad := range []string{`{"action":"pause","rootId":"r1","expectedRevision":3}`, // no operationId
		`{"action":"pause","rootId":"r1","operationId":"x","expectedRevision":"3"}`, // a string revision
		`{"action":"list","principal":"admin"}`, `[]`, `{"action":"list"`} {
		if code, body := w.do(t, "POST", path, cookie, hdr, bad); code != http.StatusBadRequest {
			t.Errorf("%s: %d %s; want 400", bad, code, body)
		}
	}
	if n := len(f.be.nativeGot()); n != 2 {
		t.Fatalf("refused requests reached the fleet: %d requests", n)
	}
	if code, _ := w.do(t, "POST", path, cookie, map[string]string{"Origin": "http://evil.test"}, `{"action":"list"}`); code != http.StatusForbidden {
		t.Fatalf("a cross-origin native request: %d; want 403", code)
	}

	// stop gets no result before the fleet goes away: uncertain.
	type answer struct {
		code int
		body string
	}
	done := make(chan answer, 1)
	req, _ := http.NewRequest("POST", w.base+path, strings.NewReader(`{"action":"stop","rootId":"r1","operationId":"web-op-00000000000000ff","expectedRevision":4}`))
	req.AddCookie(cookie)
	req.Header.Set("Origin", w.base)
	go func() {
		resp, err := w.hc.Do(req)
		if err != nil {
			done <- answer{0, err.Error()}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		done <- answer{resp.StatusCode, string(b)}
	}()
	testwait.For(t, testwait.Bound, "the stop at the fleet", func() bool { return len(f.be.nativeGot()) == 3 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	f.srv.Shutdown(ctx)
	cancel()
	select {
	case a := <-done:
		if a.code != http.StatusGatewayTimeout || !strings.Contains(a.body, `"uncertain":true`) {
			t.Fatalf("a mutation cut off: %d %s; want 504 uncertain", a.code, a.body)
		}
	case <-time.After(testwait.Bound):
		t.Fatal("no answer for a mutation whose connection ended")
	}
}

// TestFollowsARestartedFleet: when the fleet stops and a new one starts in
// its folder under its name, the page's stream resets and shows the new one.
func TestFollowsARestartedFleet(t *testing.T) {
	home := shortHome(t)
	f := startFleet(t, home, "alpha")
	w := startWeb(t, home)
	cookie := w.login(t)
	s := w.events(t, cookie, f.id)
	s.until("attached", func(e sse) bool { return e.kind == "conn" && strings.Contains(e.data, `"attached"`) })

	registry.Remove(filepath.Join(home, "sockets"), f.id)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	f.srv.Shutdown(ctx)
	cancel()
	s.until("stopped", func(e sse) bool { return e.kind == "conn" && strings.Contains(e.data, `"stopped"`) })
	next := startFleet(t, home, "alpha")
	s.until("the successor attached", func(e sse) bool {
		return e.kind == "conn" && strings.Contains(e.data, `"attached"`) && strings.Contains(e.data, next.id)
	})
	next.srv.Broadcast(&protocol.Reply{Text: "from the new fleet"})
	s.until("the new fleet's reply", func(e sse) bool { return strings.Contains(e.data, "from the new fleet") })
}

// afterLastReset is es from its last reset on: a page opened before the
// server's connection to the fleet was up gets a reset, then another with
// the connection's replay.
func afterLastReset(es []sse) []sse {
	for i := len(es) - 1; i >= 0; i-- {
		if es[i].kind == "reset" {
			return es[i:]
		}
	}
	return es
}

func countFrames(es []sse, typ string) int {
	n := 0
	for _, e := range es {
		if e.kind == "frame" && frameType(e) == typ {
			n++
		}
	}
	return n
}

func slicesContainsData(es []sse, sub string) bool {
	for _, e := range es {
		if strings.Contains(e.data, sub) {
			return true
		}
	}
	return false
}

func kinds(es []sse) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.kind
		if t := frameType(e); t != "" {
			out[i] += ":" + t
		}
	}
	return out
}

// shortHome is a fleet home with a short path (socket paths fit sun_path).
func shortHome(t *testing.T) string {
	t.Helper()
	home, err := os.MkdirTemp("", "web")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	return home
}
