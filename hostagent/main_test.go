package hostagent

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine of the hub, the leaf node, their connections and the
// workers ends when they are closed.
func TestMain(m *testing.M) {
	// The host's commits must not see the user's git configuration or
	// identity, nor guess one from the machine: without one, they are the
	// host's own.
	dir, err := os.MkdirTemp("", "hostagent-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	config := filepath.Join(dir, "gitconfig")
	if err := os.WriteFile(config, []byte("[user]\n\tuseConfigOnly = true\n"), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Setenv("GIT_CONFIG_GLOBAL", config)
	os.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	for _, k := range []string{"GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL", "EMAIL"} {
		os.Unsetenv(k)
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { os.RemoveAll(dir) }),
		// nats.go v1.55.0: ObjectStore.Put starts this goroutine and its
		// deferred cleanup can nil the channel before the goroutine reads
		// it, which then waits on a nil channel for ever (one per Put, now
		// and then). Upstream's, not ours; see docs/hosts.md.
		goleak.IgnoreTopFunction("github.com/nats-io/nats.go/jetstream.(*jetStream).resetPendingAcksOnReconnect"))
}
