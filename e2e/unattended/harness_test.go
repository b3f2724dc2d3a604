//go:build linux

package unattended

import (
	"os"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/e2e/e2etest"
)

// TestMain builds the fleet binary the tests drive (e2etest has the rest
// of the harness).
func TestMain(m *testing.M) { e2etest.Main(m) }

// start is Env.Start for these tests' fleets, which run real CLIs for
// minutes: one still running when the test ends is stopped as a user
// stops it, so that it ends its CLIs, and a failed test shows the end of
// its log.
func start(e *e2etest.Env, args ...string) *e2etest.Daemon {
	e.T.Helper()
	d := e.Start(args...)
	e.T.Cleanup(func() {
		stop(d)
		if e.T.Failed() {
			e.T.Logf("fleet stderr (end):\n%s", tail(d.Stderr.String(), 4000))
		}
	})
	return d
}

// stop stops the fleet with SIGINT and waits for it to end, whatever its
// exit status.
func stop(d *e2etest.Daemon) {
	select {
	case <-d.Done:
		return
	default:
	}
	d.Cmd.Process.Signal(os.Interrupt)
	select {
	case <-d.Done:
	case <-time.After(time.Minute):
		d.Cmd.Process.Kill()
		<-d.Done
		d.T.Errorf("fleet did not stop within a minute of SIGINT")
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
