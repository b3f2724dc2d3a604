package hosts

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agents-fleet/fleet/hosts/naming"
)

// Provider is a worker kind a host can run, as it reports it: the local
// shell, or an agent CLI found by its adapter's probe, with the version
// the CLI printed.
type Provider struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	// Verified says the version is one the adapter was verified with.
	Verified bool `json:"verified"`
}

// Heartbeat is what a host sends on HeartbeatSubject, every third of the
// lease, as a request: the fleet answers with an Ack.
type Heartbeat struct {
	Slots     int        `json:"slots"`
	Labels    []string   `json:"labels"`
	Providers []Provider `json:"providers"`
	Running   int        `json:"running"` // the host's workers now
	// Instance is random per `fleet join` process: a host that restarted,
	// or a second process joined with the same file, shows as a new one.
	Instance string `json:"instance"`
	Version  string `json:"version"` // the fleet build on the host
}

// Ack is the fleet's answer to a heartbeat.
type Ack struct {
	// LeaseMs is the fleet's lease: a host not heard from for this long
	// is lost. The host heartbeats every third of it.
	LeaseMs int64 `json:"leaseMs"`
	// Draining says the host takes no new workers.
	Draining bool `json:"draining"`
}

// MaxHeartbeat bounds a heartbeat's size; a bigger one is refused unread.
const MaxHeartbeat = 64 << 10

// maxProviders bounds the providers a heartbeat lists.
const maxProviders = 16

// DecodeHeartbeat decodes and checks a heartbeat.
func DecodeHeartbeat(data []byte) (Heartbeat, error) {
	if len(data) > MaxHeartbeat {
		return Heartbeat{}, fmt.Errorf("heartbeat of %d bytes; the limit is %d", len(data), MaxHeartbeat)
	}
	var hb Heartbeat
	if err := json.Unmarshal(data, &hb); err != nil {
		return Heartbeat{}, fmt.Errorf("heartbeat: %w", err)
	}
	if err := naming.CheckSlots(hb.Slots); err != nil {
		return Heartbeat{}, fmt.Errorf("heartbeat: %w", err)
	}
	if err := naming.CheckLabels(hb.Labels); err != nil {
		return Heartbeat{}, fmt.Errorf("heartbeat: %w", err)
	}
	if len(hb.Providers) > maxProviders {
		return Heartbeat{}, fmt.Errorf("heartbeat: %d providers; the limit is %d", len(hb.Providers), maxProviders)
	}
	for _, p := range hb.Providers {
		if p.Name == "" || len(p.Name) > 64 || len(p.Version) > 256 {
			return Heartbeat{}, errors.New("heartbeat: a provider without a name, or with an over-long name or version")
		}
	}
	if hb.Running < 0 || hb.Running > naming.MaxSlots || len(hb.Instance) > 64 || len(hb.Version) > 256 {
		return Heartbeat{}, errors.New("heartbeat: running, instance or version out of bounds")
	}
	return hb, nil
}
