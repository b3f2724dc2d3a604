package daemon

import (
	"time"

	"github.com/agents-fleet/fleet/config"
	"github.com/agents-fleet/fleet/engine"
	"github.com/agents-fleet/fleet/internal/memstat"
	"github.com/agents-fleet/fleet/provider"
)

// memory is the engine's Memory: this machine's, read by memstat. A
// worker's processes carry its id in AGENTS_FLEET_WORKER and the session's
// in provider.SessionEnv (engine.agentEnv), which is how its tree is found
// however its processes detached.
type memory struct{ s *memstat.Sampler }

func newMemory(session string) *memory {
	return &memory{s: &memstat.Sampler{Name: provider.WorkerEnv, Scope: provider.SessionEnv, ScopeValue: session}}
}

func (m *memory) Available() (uint64, bool) { return memstat.Available() }

// Workers is called from the engine's memory loop only, one call at a time.
func (m *memory) Workers() map[string]uint64 { return m.s.Sample() }

// engineLimits are the limits /limits may change, from config.json.
func engineLimits(l config.Limits) engine.Limits {
	out := engine.Limits{MinFreeMemoryMiB: engine.DefaultMinFreeMemoryMiB, StallRetries: engine.DefaultStallRetries}
	out.RateLimitMaxWait = engine.DefaultRateLimitMaxWait
	if l.RateLimitMaxWaitMs != nil {
		out.RateLimitMaxWait = time.Duration(*l.RateLimitMaxWaitMs) * time.Millisecond
	}
	if l.StallRetries != nil {
		out.StallRetries = *l.StallRetries
	}
	if l.MinFreeMemoryMiB != nil {
		out.MinFreeMemoryMiB = *l.MinFreeMemoryMiB
	}
	if l.WorkerMemoryMiB != nil {
		out.WorkerMemoryMiB = *l.WorkerMemoryMiB
	}
	return out
}
