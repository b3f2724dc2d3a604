package claude

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/agents-fleet/fleet/provider/agentcli/agentclitest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newHost records a session's events and allows each tool call once.
func newHost() *agentclitest.Host { return agentclitest.NewHost(agentclitest.Allow(optAllow)) }
