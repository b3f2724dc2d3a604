//go:build linux

// Package wine drives the Windows build of the fleet under Wine the way a
// user on Windows does (issue 24, "Tests in CI, under Wine"): fleet.exe run
// in a folder that is not a git repository, and consoles as second Wine
// processes. What fleet.exe has no command for (a hello with a wrong token,
// the pipe's security descriptor, the processes of a task) is done by
// testdata/wincheck, a Windows helper built beside it.
//
// It is apart from package e2e, which is near go test's 10-minute bound
// already. It needs Wine as scripts/install-wine.sh sets it up, and
// $FLEET_TEST_WINE_EXEC (from `eval "$(scripts/install-wine.sh --env)"`);
// without them it fails under CI and is skipped elsewhere.
package wine

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// wineBound bounds a wait for something a Wine process does: each one
// takes 0.3-1 s to start, more on a loaded 2-core machine, and a wait only
// reaches its bound when what it waits for never happens.
const wineBound = 2 * time.Minute

var (
	// wineExec runs a Windows executable under Wine, headless, in the
	// prefix install-wine.sh made ($FLEET_TEST_WINE_EXEC).
	wineExec string
	// wineMissing says why Wine cannot run the tests; empty when it can.
	wineMissing string
	// fleetExe and wincheckExe are the Windows executables TestMain built.
	fleetExe, wincheckExe string
	// sources are the files of this module the executables are built from.
	sources []string
)

func TestMain(m *testing.M) {
	wineExec = os.Getenv("FLEET_TEST_WINE_EXEC")
	switch _, err := exec.LookPath("wine"); {
	case err != nil:
		wineMissing = "wine is not installed"
	case wineExec == "":
		wineMissing = `$FLEET_TEST_WINE_EXEC is not set: eval "$(scripts/install-wine.sh --env)"`
	}
	var dir string
	if wineMissing == "" {
		var err error
		if dir, err = os.MkdirTemp("", "fleet-wine"); err == nil {
			fleetExe, wincheckExe = filepath.Join(dir, "fleet.exe"), filepath.Join(dir, "wincheck.exe")
			err = buildWindows(fleetExe, wincheckExe)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// buildWindows builds fleet.exe from cmd/fleet and wincheck.exe from
// testdata/wincheck, for windows/amd64, and lists their sources.
func buildWindows(fleet, wincheck string) error {
	env := append(os.Environ(), "GOOS=windows", "GOARCH=amd64")
	for _, b := range [][2]string{{fleet, "../../cmd/fleet"}, {wincheck, "./testdata/wincheck"}} {
		build := exec.Command("go", "build", "-o", b[0], b[1])
		build.Env = env
		build.Stdout, build.Stderr = os.Stdout, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("build %s: %w", b[1], err)
		}
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		return err
	}
	list := exec.Command("go", "list", "-deps", "-f",
		`{{if not .Standard}}{{$d := .Dir}}{{range .GoFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{range .EmbedFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{end}}`,
		"../../cmd/fleet", "./testdata/wincheck")
	list.Env = env
	list.Stderr = os.Stderr
	out, err := list.Output()
	if err != nil {
		return fmt.Errorf("list the sources: %w", err)
	}
	sources = []string{filepath.Join(root, "go.mod"), filepath.Join(root, "go.sum")}
	for _, f := range strings.Fields(string(out)) {
		if strings.HasPrefix(f, root+string(filepath.Separator)) { // not the module cache's: fixed by go.sum
			sources = append(sources, f)
		}
	}
	return nil
}

// statSources looks at the executables' sources from inside the tests, so
// that go test, which caches a result by the files a test looked at, runs
// the tests again when one of them changed. This test's binary is built
// for Linux: without it, a change to a _windows.go file would not count.
var statSources = sync.OnceFunc(func() {
	for _, f := range sources {
		os.Stat(f)
	}
})

// requireWine fails under CI (which must set Wine up) and skips elsewhere
// when Wine cannot run the tests, as package e2e's requireTool does.
func requireWine(t *testing.T) {
	t.Helper()
	if wineMissing != "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s; .ci/run must set Wine up (scripts/install-wine.sh)", wineMissing)
		}
		t.Skip(wineMissing)
	}
	statSources()
}

// winPath is the Windows name of the Linux path p under Wine (drive Z: is
// the root of the Linux file system).
func winPath(p string) string { return `Z:` + strings.ReplaceAll(p, "/", `\`) }

// host is a Windows user's setting for one fleet: a fleet home, the folder
// the fleet and its consoles run in, and where their output goes. Its
// methods take the test (or subtest) they work for.
type host struct {
	home string // the fleet home (AGENTS_FLEET_HOME, as a Windows path)
	cwd  string // a fresh folder that is not a git repository
	logs string
	n    int
}

func newHost(t *testing.T) *host {
	t.Helper()
	requireWine(t)
	return &host{home: t.TempDir(), cwd: t.TempDir(), logs: t.TempDir()}
}

func (h *host) environ() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "AGENTS_FLEET_") || strings.HasPrefix(kv, "DISPLAY=") || strings.HasPrefix(kv, "WINEDEBUG=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "WINEDEBUG=-all", "AGENTS_FLEET_HOME="+winPath(h.home))
}

// proc is a Wine process. Its stdout and stderr go to files, not pipes: a
// process it starts (a wineserver, a task's child) may hold them open for
// longer than it runs.
type proc struct {
	name           string
	cmd            *exec.Cmd
	stdout, stderr string        // the files
	done           chan struct{} // closed once Wait returned
	err            error         // Wait's error, once done is closed
}

// start starts exe (a Windows executable) under Wine in h.cwd. The process
// is killed at the end of the test if it still runs.
func (h *host) start(t *testing.T, exe string, args ...string) *proc {
	t.Helper()
	h.n++
	base := filepath.Join(h.logs, fmt.Sprintf("%02d-%s", h.n, strings.TrimSuffix(filepath.Base(exe), ".exe")))
	p := &proc{name: filepath.Base(exe) + " " + strings.Join(args, " "), stdout: base + ".out", stderr: base + ".err", done: make(chan struct{})}
	stdout, err := os.Create(p.stdout)
	if err != nil {
		t.Fatal(err)
	}
	defer stdout.Close()
	stderr, err := os.Create(p.stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	p.cmd = exec.Command(wineExec, append([]string{exe}, args...)...)
	p.cmd.Dir, p.cmd.Env = h.cwd, h.environ()
	p.cmd.Stdout, p.cmd.Stderr = stdout, stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", p.name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		if !p.exited() {
			p.cmd.Process.Kill()
			<-p.done // killed: Wait returns
		}
	})
	return p
}

// run runs exe under Wine to its end, within wineBound.
func (h *host) run(t *testing.T, exe string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	p := h.start(t, exe, args...)
	if !p.wait(wineBound) {
		p.cmd.Process.Kill()
		<-p.done
		t.Fatalf("%s did not end within %v\nstdout:\n%s\nstderr:\n%s", p.name, wineBound, tail(p.out()), tail(p.errOut()))
	}
	return p.out(), p.errOut(), p.code()
}

// fleet runs fleet.exe with args to its end.
func (h *host) fleet(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return h.run(t, fleetExe, args...)
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// wait waits up to bound for p to end and reports whether it did.
func (p *proc) wait(bound time.Duration) bool {
	select {
	case <-p.done:
		return true
	case <-time.After(bound):
		return false
	}
}

// code is p's exit status: -1 while it runs or when a signal ended it.
func (p *proc) code() int {
	if !p.exited() {
		return -1
	}
	return p.cmd.ProcessState.ExitCode()
}

func (p *proc) out() string    { return readFile(p.stdout) }
func (p *proc) errOut() string { return readFile(p.stderr) }

// lines returns the complete lines p wrote to stdout so far.
func (p *proc) lines() []string {
	out := p.out()
	if i := strings.LastIndexByte(out, '\n'); i >= 0 {
		return strings.Split(out[:i], "\n")
	}
	return nil
}

// interrupt sends p SIGINT: Wine gives the Windows process a CTRL_C_EVENT.
func (p *proc) interrupt() error { return p.cmd.Process.Signal(syscall.SIGINT) }

// tail is the end of a process's output, for a failure's message.
func tail(s string) string {
	const max = 8 << 10
	if len(s) <= max {
		return s
	}
	return "…" + s[len(s)-max:]
}

func readFile(name string) string {
	b, _ := os.ReadFile(name)
	return string(bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n")))
}
