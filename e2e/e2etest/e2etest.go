// Package e2etest is the harness the end-to-end test packages share (e2e,
// e2e/hosts, e2e/unattended, e2e/web): the fleet binary built once per
// test binary, an isolated fleet home and folder to run it in, a started
// fleet, the consoles attached to it and the frames they read. It is
// imported only by tests; it exists so that the packages, split to stay
// well within go test's per-package timeout, do not each carry a copy.
package e2etest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/agents-fleet/fleet/cli"
)

// bin is the fleet binary Main built.
var bin string

// Bin is the path of the fleet binary Main built.
func Bin() string { return bin }

// Main is a test package's TestMain: it builds cmd/fleet into a temporary
// folder, runs the tests, removes the folder and exits with their code.
func Main(m *testing.M) {
	// The tests run the fleet as a separate binary built from cmd/fleet,
	// which is cli.Main. go test reuses a cached result when the test
	// binary's content is unchanged, and a test binary that only imported
	// cli had the linker drop all of the fleet's code: a change to the
	// daemon left e2e/hosts "(cached)". A call the linker cannot prove
	// dead keeps every line of the fleet in the test binary, so any change
	// to it runs these tests again. (os.Args always holds the program name.)
	if len(os.Args) == 0 {
		cli.Main()
	}
	dir, err := os.MkdirTemp("", "fleet-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "fleet")
	build := exec.Command("go", "build", "-o", bin, "github.com/agents-fleet/fleet/cmd/fleet")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build fleet:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// RequireTool fails t under CI (which must install the tool) and skips it
// elsewhere when name is not on PATH.
func RequireTool(t testing.TB, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not installed; .ci/run must install it", name)
		}
		t.Skipf("%s is not installed", name)
	}
}
