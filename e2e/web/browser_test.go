//go:build linux

// Package web drives `fleet web` in a real browser (Debian's chromium,
// through chromedp) against the built binary and a real fleet, as an
// operator uses it (issue 25, "Tests in CI"). It is apart from package e2e,
// which is near go test's 10-minute bound already.
package web

import (
	"bufio"
	"context"
	"fmt"
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
	"github.com/agents-fleet/fleet/protocol"
	"github.com/agents-fleet/fleet/registry"
)

var fleetBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fleet-web")
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

func (p *proc) errOut() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

func start(t *testing.T, home, dir string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(fleetBin, args...)
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

// setup runs a fleet (local provider, in a folder that is not a git
// repository) and fleet web, and opens a browser on the URL it printed.
func setup(t *testing.T, gitRepo bool) (ctx context.Context, url string, fleet registry.Descriptor, home string) {
	t.Helper()
	browser := browserPath(t)
	home, err := os.MkdirTemp("", "fw")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	cwd := t.TempDir()
	if gitRepo {
		os.WriteFile(filepath.Join(cwd, "README"), []byte("hello\n"), 0o644)
		for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "README"},
			{"-c", "user.name=t", "-c", "user.email=t@example.test", "commit", "-q", "-m", "start"}} {
			if out, err := exec.Command("git", append([]string{"-C", cwd}, args...)...).CombinedOutput(); err != nil {
				t.Fatalf("git %v: %v\n%s", args, err, out)
			}
		}
	}
	start(t, home, cwd, "run", "--control-socket", "--headless", "--name", "webfleet")
	regDir := filepath.Join(home, "sockets")
	deadline := time.Now().Add(bound)
	for {
		if es, _ := registry.Live(regDir); len(es) == 1 {
			fleet = es[0].Descriptor
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the fleet did not announce itself")
		}
		time.Sleep(50 * time.Millisecond) // polling the registry, a condition
	}
	web := start(t, home, cwd, "web", "--addr", "127.0.0.1:0")
	select {
	case url = <-web.lines:
	case <-time.After(bound):
		t.Fatalf("fleet web printed no URL\n%s", web.errOut())
	}
	if !strings.Contains(url, "?token=") {
		t.Fatalf("fleet web printed %q; want a URL with a token", url)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(browser), chromedp.NoSandbox)
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, bcancel := chromedp.NewContext(actx)
	t.Cleanup(func() { bcancel(); acancel() })
	ctx, cancel := context.WithTimeout(bctx, 3*bound)
	t.Cleanup(cancel)
	return ctx, url, fleet, home
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
			t.Fatalf("%s never showed %q; it shows:\n%s", sel, want, got)
		}
		time.Sleep(50 * time.Millisecond) // polling the page, a condition
	}
}

func TestBrowserPromptAskAndHostileText(t *testing.T) {
	ctx, url, fleet, home := setup(t, false)

	// The token is traded for a cookie; the page's URL no longer has it,
	// and the page's script cannot read the cookie.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1200, 800), chromedp.Navigate(url), chromedp.WaitVisible(chromedp.ID("prompt"))); err != nil {
		t.Fatal(err)
	}
	loc, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	cookies, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.cookie`))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(loc, "token=") || cookies != "" {
		t.Fatalf("after the exchange: location %q, document.cookie %q; want no token and an HttpOnly cookie", loc, cookies)
	}
	waitText(ctx, t, "#fleet-name", "webfleet")

	// A prompt from the page runs on the fleet.
	if err := chromedp.Do(ctx, chromedp.SendKeys(chromedp.ID("prompt"), "$ echo from-the-browser"), chromedp.Click(chromedp.CSS("#prompt-form button"))); err != nil {
		t.Fatal(err)
	}
	waitText(ctx, t, "#feed", "Queued t1: echo from-the-browser")
	waitText(ctx, t, "#workers", "w1")
	waitText(ctx, t, "#workers", "shell: echo from-the-browser") // its recent activity
	waitText(ctx, t, "#tasks", "echo from-the-browser")
	waitText(ctx, t, "#task-counts", "1 done")

	// The header, and intel's summary of the runs.
	waitText(ctx, t, "#fleet-info", "0/1 workers")
	waitText(ctx, t, "#intel-summary", "1 runs · 100% succeeded")

	// The timeline draws a bar for the worker, from fleetAnalytics.
	waitText(ctx, t, "#timeline", "w1")
	if bars, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#timeline svg rect.bar").length`)); err != nil || bars != 1 {
		t.Fatalf("the timeline has %d bars (%v); want one, for w1", bars, err)
	}

	// The feed filtered to tool calls: the command's output, not the reply.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { const s = document.getElementById("feed-kind"); s.value = "toolCall"; s.dispatchEvent(new Event("change")); return true })()`)); err != nil {
		t.Fatal(err)
	}
	waitText(ctx, t, "#feed", "w1 shell: from-the-browser")
	if feed, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("feed").textContent`)); err != nil || strings.Contains(feed, "Queued") {
		t.Fatalf("the feed filtered to tool calls shows %q (%v)", feed, err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { const s = document.getElementById("feed-kind"); s.value = ""; s.dispatchEvent(new Event("change")); return true })()`)); err != nil {
		t.Fatal(err)
	}

	// ? lists the keyboard shortcuts.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.activeElement.blur() || true`)); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.KeyEvent("?"), chromedp.WaitVisible(chromedp.ID("help"))); err != nil {
		t.Fatal(err)
	}
	waitText(ctx, t, "#help", "type a prompt")
	screenshot(ctx, t, "help.png")
	if err := chromedp.Do(ctx, chromedp.KeyEvent(kb.Escape), chromedp.WaitNotVisible(chromedp.ID("help"))); err != nil {
		t.Fatal(err)
	}

	// While the tab is in the background, a new request is notified once
	// (the Notification API is stood in for, with permission granted: the
	// page's decision is what is tested).
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => {
		window.__notes = [];
		Object.defineProperty(document, "hidden", { configurable: true, get: () => true });
		window.Notification = class { constructor(title, o) { window.__notes.push(title + " | " + o.body); } static get permission() { return "granted"; } close() {} };
		return true })()`)); err != nil {
		t.Fatal(err)
	}

	// An ask: one button per choice, labelled; a second console sees it
	// resolved once the page answers; the tab's title counts it meanwhile.
	watcher, err := client.Dial(ctx, fleet, client.Options{ClientKind: protocol.ClientOther, ClientName: "watcher"})
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close()
	resolved := make(chan *protocol.ConfirmResolved, 4)
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
	ask := `$ echo '::ask::{"question":"Which env?","choices":["staging","prod"]}'; read env; echo "deploying to $env"`
	if err := chromedp.Do(ctx, chromedp.SetValue(chromedp.ID("prompt"), ask), chromedp.Click(chromedp.CSS("#prompt-form button"))); err != nil {
		t.Fatal(err)
	}
	waitText(ctx, t, "#req-list", "Which env?")
	screenshot(ctx, t, "request.png")
	if title, err := chromedp.Run(ctx, chromedp.Title()); err != nil || !strings.HasPrefix(title, "(1)") {
		t.Fatalf("title %q (%v); want it to count the waiting request", title, err)
	}
	if notes, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`window.__notes`)); err != nil || len(notes) != 1 || !strings.Contains(notes[0], "Which env?") {
		t.Fatalf("notifications %q (%v); want one, for the ask", notes, err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.Search(`//div[@id="req-list"]//button[text()="staging"]`))); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-resolved:
		if r.Reason != protocol.ReasonAnswered {
			t.Fatalf("confirmResolved %+v", r)
		}
	case <-time.After(bound):
		t.Fatal("the second console never saw the ask resolved")
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.Search(`//tr[@data-id="w2"]`))); err != nil {
		t.Fatal(err)
	}
	waitText(ctx, t, "#transcript", "deploying to staging")
	screenshot(ctx, t, "transcript.png")

	// Hostile text is shown as text: nothing of it runs.
	hostile := `$ echo '<img src=x onerror="window.__pwned=1">' '<script>window.__pwned=2</script>' "$(printf '\033[31mred\033[0m')"`
	if err := chromedp.Do(ctx, chromedp.SetValue(chromedp.ID("prompt"), hostile), chromedp.Click(chromedp.CSS("#prompt-form button"))); err != nil {
		t.Fatal(err)
	}
	waitText(ctx, t, "#feed", `<img src=x onerror="window.__pwned=1">`)
	pwned, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.__pwned !== undefined`))
	if err != nil {
		t.Fatal(err)
	}
	imgs, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("img,script:not([src])").length`))
	if err != nil {
		t.Fatal(err)
	}
	if pwned || imgs != 0 {
		t.Fatalf("hostile text ran or became elements: pwned %v, %d img/inline script elements", pwned, imgs)
	}
	_ = home
}

// screenshot saves the page as name in $FLEET_WEB_SCREENSHOTS, when set
// (docs/web.md's pictures are taken so).
func screenshot(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	dir := os.Getenv("FLEET_WEB_SCREENSHOTS")
	if dir == "" {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, name), png, 0o644)
	}
	if err != nil {
		t.Errorf("screenshot %s: %v", name, err)
	}
}

// TestBrowserDiffAndMerge: in a git repository, a worker's diff opens from
// its row (per file, added lines marked), and merge, confirmed on the page,
// lands it.
func TestBrowserDiffAndMerge(t *testing.T) {
	ctx, url, _, _ := setup(t, true)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1200, 800), chromedp.Navigate(url), chromedp.WaitVisible(chromedp.ID("prompt"))); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.SetValue(chromedp.ID("prompt"), "$ echo one > one.txt"), chromedp.Click(chromedp.CSS("#prompt-form button"))); err != nil {
		t.Fatal(err)
	}
	waitText(ctx, t, "#task-counts", "1 done")
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.Search(`//tr[@data-id="w1"]//button[text()="diff"]`))); err != nil {
		t.Fatal(err)
	}
	waitText(ctx, t, "#diff", "one.txt  +1 −0")
	waitText(ctx, t, "#diff", "+one")
	added, err := chromedp.Run(ctx, chromedp.Evaluate[int](`[...document.querySelectorAll("#diff pre.add")].filter((p) => p.textContent === "+one").length`))
	if err != nil || added != 1 {
		t.Fatalf("%d added lines marked +one (%v); want 1", added, err)
	}
	screenshot(ctx, t, "diff.png")
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("diff-merge"))); err != nil {
		t.Fatal(err)
	}
	waitText(ctx, t, "#diff-question", "Merge w1 into its base branch?")
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("diff-yes"))); err != nil {
		t.Fatal(err)
	}
	waitText(ctx, t, "#feed", "Merged w1")
}
