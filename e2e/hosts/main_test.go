// Package hosts drives worker hosts (docs/hosts.md) the way a user runs
// them, with the built binary: a fleet listening for hosts in one network
// namespace, `fleet hosts add`, and `fleet join` from another over a veth
// pair; workers placed on the hosts, links cut, hosts and fleets killed.
// It makes network namespaces, so it needs root (and iproute2): under CI
// it fails without them, elsewhere it skips. It is apart from package e2e
// to keep each within go test's per-package timeout.
package hosts

import (
	"testing"

	"github.com/agents-fleet/fleet/e2e/e2etest"
)

// TestMain builds the fleet binary the tests drive.
func TestMain(m *testing.M) { e2etest.Main(m) }
