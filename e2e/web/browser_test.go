//go:build linux

// Package web drives `fleet web` in a real browser (Debian's chromium,
// through chromedp) against the built binary and a real fleet, as an
// operator uses it (issue 25, "Tests in CI"). It is apart from package e2e,
// which is near go test's 10-minute bound already.
package web

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/agents-fleet/fleet/client"
	"github.com/agents-fleet/fleet/e2e/e2etest"
	"github.com/agents-fleet/fleet/internal/modelmock"
	"github.com/agents-fleet/fleet/protocol"
	"github.com/agents-fleet/fleet/registry"
)

// TestMain builds the fleet binary the tests drive.
func TestMain(m *testing.M) { e2etest.Main(m) }

// bound bounds every wait: a browser and two fleet processes on a loaded
// 2-core machine; a wait reaches it only when what it waits for never comes.
const bound = time.Minute

// browserPath is Debian's chromium, which .ci/run installs.
func browserPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium is not installed; .ci/run must install it")
	}
	t.Skip("chromium is not installed")
	return ""
}

// proc is a fleet process; it is stopped (SIGTERM, then killed) when the
// test ends.
type proc struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	stderr strings.Builder
	lines  chan string // stdout
	done   chan struct{}
}

func (p *proc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.Write(b)
}

// stop stops the process with SIGINT and waits for it to end.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(bound):
		t.Fatalf("fleet did not stop within %v of SIGINT", bound)
	}
}

func (p *proc) errOut() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

func start(t *testing.T, home, dir string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(e2etest.Bin(), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "AGENTS_FLEET_HOME="+home)
	p := &proc{cmd: cmd, lines: make(chan string, 100), done: make(chan struct{})}
	cmd.Stderr = p
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case p.lines <- sc.Text():
			default:
			}
		}
		cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-p.done:
		case <-time.After(bound):
			cmd.Process.Kill()
			<-p.done
			t.Errorf("fleet %s did not stop within %v of SIGINT", args[0], bound)
		}
		if t.Failed() {
			t.Logf("fleet %s stderr:\n%s", args[0], p.errOut())
		}
	})
	return p
}

// fleetOpts says what fleet setup runs.
type fleetOpts struct {
	git    bool           // in a git repository (else a plain folder)
	args   []string       // more flags for fleet run
	config map[string]any // config.json, when set
}

// env is what setup started: the browser's context, the URL fleet web
// printed, the fleet and its folders, and the processes.
type env struct {
	ctx   context.Context
	url   string
	fleet registry.Descriptor
	home  string
	cwd   string
	run   *proc
	web   *proc
}

// setup runs a fleet (local provider unless o says otherwise) and fleet
// web, and starts a browser (not yet on the URL).
func setup(t *testing.T, o fleetOpts) *env {
	t.Helper()
	browser := browserPath(t)
	home, err := os.MkdirTemp("", "fw")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	cwd := t.TempDir()
	if o.git {
		os.WriteFile(filepath.Join(cwd, "README"), []byte("hello\n"), 0o644)
		for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "README"},
			{"-c", "user.name=t", "-c", "user.email=t@example.test", "commit", "-q", "-m", "start"}} {
			git(t, cwd, args...)
		}
	}
	if o.config != nil {
		b, _ := json.Marshal(o.config)
		if err := os.WriteFile(filepath.Join(home, "config.json"), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	e := &env{home: home, cwd: cwd}
	e.run = start(t, home, cwd, append([]string{"run", "--control-socket", "--headless", "--name", "webfleet"}, o.args...)...)
	e.fleet = waitFleet(t, home, "")
	e.web = start(t, home, cwd, "web", "--addr", "127.0.0.1:0")
	select {
	case e.url = <-e.web.lines:
	case <-time.After(bound):
		t.Fatalf("fleet web printed no URL\n%s", e.web.errOut())
	}
	if !strings.Contains(e.url, "?token=") {
		t.Fatalf("fleet web printed %q; want a URL with a token", e.url)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(browser), chromedp.NoSandbox)
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, bcancel := chromedp.NewContext(actx)
	t.Cleanup(func() { bcancel(); acancel() })
	ctx, cancel := context.WithTimeout(bctx, 6*bound)
	t.Cleanup(cancel)
	e.ctx = ctx
	return e
}

// waitFleet waits for the one live fleet in home's registry whose id is
// not old, and returns it.
func waitFleet(t *testing.T, home, old string) registry.Descriptor {
	t.Helper()
	regDir := filepath.Join(home, "sockets")
	deadline := time.Now().Add(bound)
	for {
		if es, _ := registry.Live(regDir); len(es) == 1 && es[0].ID != old {
			return es[0].Descriptor
		}
		if time.Now().After(deadline) {
			t.Fatal("the fleet did not announce itself")
		}
		time.Sleep(50 * time.Millisecond) // polling the registry, a condition
	}
}

// open loads the page fleet web printed the URL of.
func (e *env) open(t *testing.T) {
	t.Helper()
	if err := chromedp.Do(e.ctx, chromedp.EmulateViewport(1280, 900), chromedp.Navigate(e.url), chromedp.WaitVisible(chromedp.ID("prompt"))); err != nil {
		t.Fatal(err)
	}
	waitText(e.ctx, t, "#fleet-name", "webfleet")
}

// prompt sends text from the page's prompt box and waits until the page
// has sent it (the box is emptied once the fleet took it).
func (e *env) prompt(t *testing.T, text string) {
	t.Helper()
	if err := chromedp.Do(e.ctx, chromedp.SetValue(chromedp.ID("prompt"), text), chromedp.Click(chromedp.CSS("#prompt-form button"))); err != nil {
		t.Fatal(err)
	}
	testwait(t, "the prompt sent", func() bool { return eval[string](t, e.ctx, `document.getElementById("prompt").value`) == "" })
}

// click clicks the element an XPath finds.
func (e *env) click(t *testing.T, xpath string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(e.ctx, bound)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.Search(xpath))); err != nil {
		t.Fatalf("click %s: %v", xpath, err)
	}
}

// clickUntil clicks xpath until the page's js (a boolean expression)
// holds. A click is a pointer event at where the element was found: when a
// request card leaves the page just before (answered), the tables below
// move up under the pointer, and on a loaded machine the click lands
// beside its row. Clicking again is harmless for what this is used for.
func (e *env) clickUntil(t *testing.T, what, xpath, js string) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		e.click(t, xpath)
		for settle := time.Now().Add(2 * time.Second); time.Now().Before(settle); {
			if eval[bool](t, e.ctx, js) {
				return
			}
			time.Sleep(50 * time.Millisecond) // polling the page, a condition
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, bound)
		}
	}
}

// selectWorker opens worker id's transcript by clicking its row.
func (e *env) selectWorker(t *testing.T, id string) {
	t.Helper()
	e.clickUntil(t, id+"'s transcript opened", fmt.Sprintf(`//tr[@data-id=%q]`, id),
		fmt.Sprintf(`!document.getElementById("transcript-pane").hidden && document.getElementById("transcript-of").textContent === %q`, id))
}

// openDiff opens worker id's diff with the diff button of its row.
func (e *env) openDiff(t *testing.T, id string) {
	t.Helper()
	e.clickUntil(t, id+"'s diff opened", fmt.Sprintf(`//tr[@data-id=%q]//button[text()="diff"]`, id),
		fmt.Sprintf(`!document.getElementById("diff-pane").hidden && document.getElementById("diff-of").textContent === %q`, id))
}

// eval evaluates js in the page.
func eval[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("%s: %v", js, err)
	}
	return v
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// waitText waits until the text of sel contains want.
func waitText(ctx context.Context, t *testing.T, sel, want string) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		got, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`(document.querySelector(%q)||{}).textContent||""`, sel)))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(got, want) {
			return
		}
		if time.Now().After(deadline) {
			feed, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`[...document.querySelectorAll("#feed .line")].slice(-30).map((l) => l.textContent).join("\\n")`))
			t.Fatalf("%s never showed %q; it shows:\n%s\nthe feed ends:\n%s", sel, want, got, feed)
		}
		time.Sleep(50 * time.Millisecond) // polling the page, a condition
	}
}

// TestBrowserConsole: a local fleet operated from the page as an operator
// does — the guards, a prompt and a slash command, the views, an ask and a
// confirm answered from the page while a second console watches, a
// confirm answered from the TUI, hostile text, and the fleet restarted
// under the page.
func TestBrowserConsole(t *testing.T) {
	e := setup(t, fleetOpts{})
	ctx := e.ctx
	guards(t, e)

	// The token is traded for a cookie; the page's URL no longer has it,
	// and the page's script cannot read the cookie.
	e.open(t)
	loc := eval[string](t, ctx, `location.href`)
	if cookies := eval[string](t, ctx, `document.cookie`); strings.Contains(loc, "token=") || cookies != "" {
		t.Fatalf("after the exchange: location %q, document.cookie %q; want no token and an HttpOnly cookie", loc, cookies)
	}

	// A prompt from the page runs on the fleet.
	e.prompt(t, "$ echo from-the-browser")
	waitText(ctx, t, "#feed", "Queued t1: echo from-the-browser")
	waitText(ctx, t, "#workers", "w1")
	waitText(ctx, t, "#workers", "shell: echo from-the-browser") // its recent activity
	waitText(ctx, t, "#tasks", "echo from-the-browser")
	waitText(ctx, t, "#task-counts", "1 done")

	// A slash command, completed with Tab from the catalog.
	if err := chromedp.Do(ctx, chromedp.SetValue(chromedp.ID("prompt"), "/wor"), chromedp.Focus(chromedp.ID("prompt")), chromedp.KeyEvent(kb.Tab)); err != nil {
		t.Fatal(err)
	}
	if v := eval[string](t, ctx, `document.getElementById("prompt").value`); v != "/workers " {
		t.Fatalf("Tab completed /wor to %q; want \"/workers \"", v)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#prompt-form button"))); err != nil {
		t.Fatal(err)
	}
	waitText(ctx, t, "#feed .line.reply:last-child", "w1")

	// The header, and intel's summary of the runs.
	waitText(ctx, t, "#fleet-info", "0/1 workers")
	waitText(ctx, t, "#intel-summary", "1 runs · 100% succeeded")
	screenshot(ctx, t, "overview.png", "")

	// The timeline draws a bar for the worker, from fleetAnalytics.
	waitText(ctx, t, "#timeline", "w1")
	if bars := eval[int](t, ctx, `document.querySelectorAll("#timeline svg rect.bar").length`); bars != 1 {
		t.Fatalf("the timeline has %d bars; want one, for w1", bars)
	}

	// The feed filtered to tool calls: the command's output, not the reply.
	setSelect(t, ctx, "feed-kind", "toolCall")
	testwait(t, "the feed filtered to tool calls", func() bool {
		feed := eval[string](t, ctx, `document.getElementById("feed").textContent`)
		return strings.Contains(feed, "w1 shell: from-the-browser") && !strings.Contains(feed, "Queued")
	})
	setSelect(t, ctx, "feed-kind", "")

	// The worker's transcript: its output, and its tool call with the
	// input and the result, folded.
	e.selectWorker(t, "w1")
	waitText(ctx, t, "#transcript", "from-the-browser")
	waitText(ctx, t, "#transcript details.tool summary", "shell")
	waitText(ctx, t, "#transcript details.tool", `"command": "echo from-the-browser"`)

	// ? lists the keyboard shortcuts.
	eval[bool](t, ctx, `document.activeElement.blur() || true`)
	if err := chromedp.Do(ctx, chromedp.KeyEvent("?"), chromedp.WaitVisible(chromedp.ID("help"))); err != nil {
		t.Fatal(err)
	}
	waitText(ctx, t, "#help", "type a prompt")
	screenshot(ctx, t, "help.png", "")
	if err := chromedp.Do(ctx, chromedp.KeyEvent(kb.Escape), chromedp.WaitNotVisible(chromedp.ID("help"))); err != nil {
		t.Fatal(err)
	}

	// While the tab is in the background, a new request is notified once
	// (the Notification API is stood in for, with permission granted: the
	// page's decision is what is tested).
	eval[bool](t, ctx, `(() => {
		window.__notes = [];
		Object.defineProperty(document, "hidden", { configurable: true, get: () => true });
		window.Notification = class { constructor(title, o) { window.__notes.push(title + " | " + o.body); } static get permission() { return "granted"; } close() {} };
		return true })()`)

	// An ask: one button per choice, labelled; a second console sees it
	// resolved once the page answers; the tab's title counts it meanwhile.
	watcher, err := client.Dial(ctx, e.fleet, client.Options{ClientKind: protocol.ClientOther, ClientName: "watcher"})
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close()
	resolved := make(chan *protocol.ConfirmResolved, 8)
	go func() {
		for {
			m, _, _, err := watcher.Next()
			if err != nil {
				return
			}
			if r, ok := m.(*protocol.ConfirmResolved); ok {
				resolved <- r
			}
		}
	}()
	e.prompt(t, `$ echo '::ask::{"question":"Which env?","choices":["staging","prod"]}'; read env; echo "deploying to $env"`)
	waitText(ctx, t, "#req-list", "Which env?")
	screenshot(ctx, t, "request.png", "#requests")
	if title := eval[string](t, ctx, `document.title`); !strings.HasPrefix(title, "(1)") {
		t.Fatalf("title %q; want it to count the waiting request", title)
	}
	if notes := eval[[]string](t, ctx, `window.__notes`); len(notes) != 1 || !strings.Contains(notes[0], "Which env?") {
		t.Fatalf("notifications %q; want one, for the ask", notes)
	}
	e.click(t, `//div[@id="req-list"]//button[text()="staging"]`)
	waitResolved(t, resolved, "the ask answered from the page")
	waitText(ctx, t, "#req-gone", "answered here")
	e.selectWorker(t, "w2")
	waitText(ctx, t, "#transcript", "deploying to staging")
	screenshot(ctx, t, "transcript.png", "#transcript-pane")

	// A confirm, its summary in full, approved from the page.
	e.prompt(t, `$ echo '::confirm::Deploy build 7 to production, then tag it?'; read a; echo "the answer was $a"`)
	waitText(ctx, t, "#req-list", "Deploy build 7 to production, then tag it?")
	e.click(t, `//div[@id="req-list"]//button[text()="Approve"]`)
	waitResolved(t, resolved, "the confirm approved from the page")
	e.selectWorker(t, "w3")
	waitText(ctx, t, "#transcript", "the answer was yes")

	// A confirm answered from the TUI leaves the page, saying so.
	e.prompt(t, `$ echo '::confirm::<img src=x onerror="window.__pwned=4"> Answer me from the TUI?'; read a; echo "tui said $a"`)
	waitText(ctx, t, "#req-list", `<img src=x onerror="window.__pwned=4"> Answer me from the TUI?`)
	noHostile(t, ctx)
	tui := startTUI(t, e)
	tui.expect("the TUI's first screen", "1 Workers")
	tui.keys("5")
	tui.expect("the request in the TUI", "Answer me from the TUI?")
	tui.keys("y")
	waitResolved(t, resolved, "the confirm answered from the TUI")
	waitText(ctx, t, "#req-gone", "answered elsewhere")
	if n := eval[int](t, ctx, `document.querySelectorAll("#req-list .req").length`); n != 0 {
		t.Fatalf("%d requests still shown after the TUI answered", n)
	}
	if title := eval[string](t, ctx, `document.title`); strings.HasPrefix(title, "(") {
		t.Fatalf("title %q after every request was answered", title)
	}

	// Four runs failing alike make intel suggest something; it is accepted
	// from the page and leaves the list.
	for range 4 {
		e.prompt(t, "$ false")
	}
	waitText(ctx, t, "#intel-summary", "4 failed")
	e.prompt(t, "/fleet-intel")
	waitText(ctx, t, "#intel-suggestions", "recurring-error")
	e.click(t, `//div[@id="intel-suggestions"]//button[text()="accept"]`)
	waitText(ctx, t, "#feed", "Accepted ")
	testwait(t, "the accepted suggestion gone", func() bool {
		return eval[int](t, ctx, `document.querySelectorAll("#intel-suggestions .req").length`) == 0
	})

	screenshot(ctx, t, "timeline.png", "#timeline-pane")
	screenshot(ctx, t, "tasks.png", "#tasks-pane")
	screenshot(ctx, t, "intel.png", "#intel-pane")
	screenshot(ctx, t, "feed.png", "#feed-pane")

	// Hostile text is shown as text: nothing of it runs, in the feed, the
	// tasks, the workers and the transcript.
	hostile := `$ echo '<img src=x onerror="window.__pwned=1">' '<script>window.__pwned=2</script>' "$(printf '\033[31mred\033[0m')"`
	e.prompt(t, hostile)
	waitText(ctx, t, "#feed", `<img src=x onerror="window.__pwned=1">`)
	waitText(ctx, t, "#tasks", `<script>window.__pwned=2</script>`)
	var owner string
	testwait(t, "the hostile task's worker", func() bool {
		owner = eval[string](t, ctx, `[...document.querySelectorAll("#tasks tbody tr")].filter((r) => r.cells[3].textContent.includes("<script>")).map((r) => r.cells[2].textContent).join()`)
		return owner != ""
	})
	e.selectWorker(t, owner)
	waitText(ctx, t, "#transcript", `<script>window.__pwned=2</script>`)
	noHostile(t, ctx)

	// The fleet stops and a new one starts in its folder under its name:
	// the page follows it.
	e.run.stop(t)
	waitText(ctx, t, "#conn", "stopped")
	e.run = start(t, e.home, e.cwd, "run", "--control-socket", "--headless", "--name", "webfleet")
	next := waitFleet(t, e.home, e.fleet.ID)
	testwait(t, "the page on the new fleet", func() bool {
		return eval[string](t, ctx, `document.getElementById("conn").textContent`) == "" &&
			eval[int](t, ctx, `document.querySelectorAll("#workers tbody tr").length`) == 0
	})
	e.prompt(t, "$ echo after-the-restart")
	waitText(ctx, t, "#feed", "Queued t1: echo after-the-restart")
	if n := eval[int](t, ctx, `[...document.querySelectorAll("#feed .line")].filter((l) => l.textContent.includes("Queued t1: echo after-the-restart")).length`); n != 1 {
		t.Fatalf("the new fleet's line is shown %d times", n)
	}
	_ = next
}

// guards: against the binary, a request without the cookie is 401, one
// with a foreign Host 403 (DNS rebinding), a cross-origin POST 403; the
// token URL gives an HttpOnly SameSite=Strict cookie and a redirect to a
// URL without the token.
func guards(t *testing.T, e *env) {
	t.Helper()
	u, err := neturl.Parse(e.url)
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + u.Host
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	do := func(method, path string, cookie *http.Cookie, hdr map[string]string, body string) int {
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		if cookie != nil {
			req.AddCookie(cookie)
		}
		for k, v := range hdr {
			if k == "Host" {
				req.Host = v
			} else {
				req.Header.Set(k, v)
			}
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	resp, err := hc.Get(e.url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		cookie = c
	}
	if resp.StatusCode != http.StatusSeeOther || strings.Contains(resp.Header.Get("Location"), "token") || cookie == nil ||
		!cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode {
		t.Fatalf("the token URL: %s, Location %q, cookie %+v", resp.Status, resp.Header.Get("Location"), cookie)
	}
	send := "/api/fleets/" + e.fleet.ID + "/send"
	prompt := `{"type":"prompt","text":"$ echo should-not-run"}`
	for _, c := range []struct {
		what   string
		code   int
		method string
		path   string
		cookie *http.Cookie
		hdr    map[string]string
	}{
		{"no cookie", 401, "GET", "/api/fleets", nil, nil},
		{"no cookie, the page", 401, "GET", "/", nil, nil},
		{"a foreign Host", 403, "GET", "/api/fleets", cookie, map[string]string{"Host": "evil.example:" + u.Port()}},
		{"a cross-origin POST", 403, "POST", send, cookie, map[string]string{"Origin": "http://evil.example"}},
		{"a POST without Origin", 403, "POST", send, cookie, nil},
		{"with the cookie", 200, "GET", "/api/fleets", cookie, nil},
	} {
		if got := do(c.method, c.path, c.cookie, c.hdr, prompt); got != c.code {
			t.Errorf("%s: %d; want %d", c.what, got, c.code)
		}
	}
}

// setSelect picks value in the select id, as a user's choice does.
func setSelect(t *testing.T, ctx context.Context, id, value string) {
	t.Helper()
	eval[bool](t, ctx, fmt.Sprintf(`(() => { const s = document.getElementById(%q); s.value = %q; s.dispatchEvent(new Event("change")); return true })()`, id, value))
}

func waitResolved(t *testing.T, resolved <-chan *protocol.ConfirmResolved, what string) {
	t.Helper()
	select {
	case r := <-resolved:
		if r.Reason != protocol.ReasonAnswered {
			t.Fatalf("%s: confirmResolved %+v", what, r)
		}
	case <-time.After(bound):
		t.Fatalf("%s: the second console never saw it resolved", what)
	}
}

// noHostile fails when hostile text ran or became elements.
func noHostile(t *testing.T, ctx context.Context) {
	t.Helper()
	pwned := eval[bool](t, ctx, `window.__pwned !== undefined`)
	imgs := eval[int](t, ctx, `document.querySelectorAll("img,script:not([src])").length`)
	if pwned || imgs != 0 {
		t.Fatalf("hostile text ran or became elements: pwned %v, %d img/inline script elements", pwned, imgs)
	}
}

// testwait waits for cond, polling the page.
func testwait(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, bound)
		}
		time.Sleep(50 * time.Millisecond) // polling the page, a condition
	}
}

// screenshot saves the element css finds (the page's view when css is "")
// as name in $FLEET_WEB_SCREENSHOTS, when set (docs/web.md's pictures are
// taken so).
func screenshot(ctx context.Context, t *testing.T, name, css string) {
	t.Helper()
	dir := os.Getenv("FLEET_WEB_SCREENSHOTS")
	if dir == "" {
		return
	}
	var png []byte
	var err error
	if css == "" {
		png, err = chromedp.Run(ctx, chromedp.CaptureScreenshot())
	} else {
		png, err = chromedp.Run(ctx, chromedp.Screenshot(chromedp.CSS(css)))
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, name), png, 0o644)
	}
	if err != nil {
		t.Errorf("screenshot %s: %v", name, err)
	}
}

// TestBrowserDiffMergeApplyCancel: in a git repository, each worker's git
// state is in its row; a worker's diff opens from its row (per file, added
// lines marked, a hostile file name as text), and merge, apply and cancel,
// each confirmed on the page, do what they say.
func TestBrowserDiffMergeApplyCancel(t *testing.T) {
	e := setup(t, fleetOpts{git: true})
	ctx := e.ctx
	e.open(t)
	e.prompt(t, "$ echo one > one.txt")
	e.prompt(t, "$ echo two > two.txt; touch '<img src=x onerror=window.__pwned=3>.txt'")
	e.prompt(t, "$ sleep 600")
	waitText(ctx, t, `#workers tr[data-id="w1"] td.git`, "mergeable")
	waitText(ctx, t, `#workers tr[data-id="w1"] td.git`, "1 file +1 −0")
	waitText(ctx, t, `#workers tr[data-id="w2"] td.git`, "2 files")
	screenshot(ctx, t, "workers.png", "#workers-pane")

	e.openDiff(t, "w1")
	waitText(ctx, t, "#diff", "one.txt  +1 −0")
	if added := eval[int](t, ctx, `[...document.querySelectorAll("#diff pre.add")].filter((p) => p.textContent === "+one").length`); added != 1 {
		t.Fatalf("%d added lines marked +one; want 1", added)
	}
	screenshot(ctx, t, "diff.png", "#diff-pane")
	e.click(t, `//button[@id="diff-merge"]`)
	waitText(ctx, t, "#diff-question", "Merge w1 into its base branch?")
	e.click(t, `//button[@id="diff-yes"]`)
	waitText(ctx, t, "#feed", "Merged w1")
	waitText(ctx, t, `#workers tr[data-id="w1"] td.git`, "merged into main")
	if got, _ := os.ReadFile(filepath.Join(e.cwd, "one.txt")); string(got) != "one\n" {
		t.Fatalf("one.txt after the merge: %q", got)
	}

	// Apply w2: its files in the work tree, uncommitted and unstaged.
	e.openDiff(t, "w2")
	waitText(ctx, t, "#diff", "<img src=x onerror=window.__pwned=3>.txt")
	noHostile(t, ctx)
	e.click(t, `//button[@id="diff-apply"]`)
	waitText(ctx, t, "#diff-question", "Apply w2's change")
	e.click(t, `//button[@id="diff-yes"]`)
	waitText(ctx, t, "#feed", "Applied w2's change")
	if got, _ := os.ReadFile(filepath.Join(e.cwd, "two.txt")); string(got) != "two\n" {
		t.Fatalf("two.txt after the apply: %q", got)
	}
	if staged := git(t, e.cwd, "diff", "--cached", "--name-only"); staged != "" {
		t.Fatalf("apply staged %s", staged)
	}

	// Cancel w3, which would sleep for ten minutes.
	e.openDiff(t, "w3")
	e.click(t, `//button[@id="diff-cancel"]`)
	waitText(ctx, t, "#diff-question", "Stop w3's task?")
	e.click(t, `//button[@id="diff-yes"]`)
	waitText(ctx, t, "#feed", "Cancelling t3")
	testwait(t, "t3 ended", func() bool {
		return eval[string](t, ctx, `[...document.querySelectorAll("#tasks tbody tr")].filter((r) => r.cells[0].textContent === "t3").map((r) => r.cells[1].textContent).join()`) == "failed"
	})
	noHostile(t, ctx)
}

// TestBrowserClaudeNativeFleet: a Claude Code fleet (the real CLI against
// the scripted model endpoint) in a native session, from the page: a
// permission prompt approved, the worker's tool call with its input and
// result in its transcript, a tool request the policy names approved
// through the native root with a rationale at the revision shown, and the
// root paused.
func TestBrowserClaudeNativeFleet(t *testing.T) {
	bin := modelmock.RequireCLI(t, "claude")
	u := modelmock.Usage{Input: 200, Output: 15}
	mock, err := modelmock.Start(modelmock.Script{Rules: []modelmock.Rule{
		{Name: "b", Match: "worker-b:", Turns: []modelmock.Turn{
			{Usage: u, ToolCalls: []modelmock.ToolCall{{Name: "Bash", Input: map[string]any{"command": "echo bye > bye.txt", "description": "write bye.txt"}}}},
			{Text: "Finished with bye.txt.", Reasoning: "The file is written; <b>say so</b>.", Usage: u},
		}},
		{Name: "push", Match: "pusher:", Turns: []modelmock.Turn{
			{Usage: u, ToolCalls: []modelmock.ToolCall{{Name: "Bash", Input: map[string]any{"command": "git push origin main", "description": "push"}}}},
			{Text: "push attempted", Usage: u},
		}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mock.Close() })
	cfg := map[string]any{
		"limits": map[string]any{"stallGraceMs": 5000},
		"providers": map[string]any{"claude": map[string]any{"path": bin, "env": map[string]string{
			"HOME": t.TempDir(), "ANTHROPIC_BASE_URL": mock.URL(), "ANTHROPIC_API_KEY": "sk-test"}}},
	}
	e := setup(t, fleetOpts{git: true, args: []string{"--provider", "claude", "--native-root"}, config: cfg})
	ctx := e.ctx
	e.open(t)
	waitText(ctx, t, "#fleet-info", "claude")

	// An ordinary permission prompt, approved from the page.
	e.prompt(t, "/spawn worker-b: create bye.txt saying bye")
	waitText(ctx, t, "#req-list", "echo bye > bye.txt")
	e.click(t, `//div[@id="req-list"]//button[text()="Allow once"]`)
	e.selectWorker(t, "w1")
	waitText(ctx, t, "#transcript", "Finished with bye.txt.")
	waitText(ctx, t, "#transcript details.tool summary", "Bash")
	waitText(ctx, t, "#transcript details.tool", `"command": "echo bye > bye.txt"`)
	waitText(ctx, t, "#transcript details.reasoning summary", "reasoning: The file is written; <b>say so</b>.")
	if open := eval[bool](t, ctx, `document.querySelector("#transcript details.reasoning").open`); open {
		t.Fatal("the reasoning is shown unfolded")
	}
	eval[bool](t, ctx, `[...document.querySelectorAll("#transcript details.tool")].forEach((d) => { d.open = true }) || true`)
	screenshot(ctx, t, "transcript-claude.png", "#transcript-pane")

	// A tool request the confirm policy names waits for a native decision.
	e.prompt(t, "/spawn pusher: push it")
	testwait(t, "t2.p1 waiting for a decision in the native root", func() bool {
		eval[bool](t, ctx, `document.getElementById("native-load").click() || true`)
		time.Sleep(500 * time.Millisecond) // the reload's round trip; the condition is polled
		return strings.Contains(eval[string](t, ctx, `document.getElementById("native").textContent`), "t2.p1")
	})
	if err := chromedp.Do(ctx, chromedp.SendKeys(chromedp.ID("native-rationale"), "reviewed the push")); err != nil {
		t.Fatal(err)
	}
	e.click(t, `//div[@id="native"]//tr[td[1][text()="t2.p1"]]//button[text()="approve"]`)
	waitText(ctx, t, "#native-question", "approve task t2.p1 (reviewed the push)")
	waitText(ctx, t, "#native-question", "at revision")
	e.click(t, `//button[@id="native-yes"]`)
	waitText(ctx, t, "#native-last", "receipt: approve")
	e.selectWorker(t, "w2")
	waitText(ctx, t, "#transcript", "push attempted")
	waitText(ctx, t, "#native", "approve")

	// Pause the root at the revision shown.
	rev := eval[string](t, ctx, `document.querySelector("#native .name").textContent`)
	e.click(t, `//div[@id="native"]//button[text()="pause"]`)
	waitText(ctx, t, "#native-question", "pause — root")
	e.click(t, `//button[@id="native-yes"]`)
	waitText(ctx, t, "#native-last", "receipt: pause")
	waitText(ctx, t, "#native .name", "intent pause")
	if after := eval[string](t, ctx, `document.querySelector("#native .name").textContent`); after == rev {
		t.Fatalf("the root shown did not move on: %s", after)
	}
	screenshot(ctx, t, "native.png", "#native-pane")
	noHostile(t, ctx)
}
