package hosts

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"time"

	"github.com/agents-fleet/fleet/registry"
)

// State is a host's state as `fleet hosts` shows it.
type State string

const (
	StateUp          State = "up"           // heard from within the lease
	StateLost        State = "lost"         // not heard from for the lease, or the hub is down
	StateDraining    State = "draining"     // up, and takes no new workers
	StateNeverJoined State = "never-joined" // enrolled, never heard from
)

// DefaultLease is hosts.leaseMs's default.
const DefaultLease = 15 * time.Second

// Seen is what the hub last heard from a host.
type Seen struct {
	Name       string     `json:"name"`
	LastSeenMs int64      `json:"lastSeenMs"` // 0: never
	Address    string     `json:"address"`    // the IP address it joined from
	Slots      int        `json:"slots"`
	Labels     []string   `json:"labels"`
	Providers  []Provider `json:"providers"`
	Running    int        `json:"running"`
	Instance   string     `json:"instance"`
	Version    string     `json:"version"`
}

// Status is status.json: written by the fleet that runs the hub, read by
// `fleet hosts` (whether or not that fleet still runs).
type Status struct {
	PID int `json:"pid"` // the fleet's; 0 once it stopped
	// StartedMs is when the hub started: a host last heard from before
	// was heard by an earlier one, and is not up until it heartbeats.
	StartedMs int64 `json:"startedMs"`
	// Applied is the registry generation the hub runs with.
	Applied   int64  `json:"appliedGeneration"`
	Listen    string `json:"listen"`
	Advertise string `json:"advertise"`
	LeaseMs   int64  `json:"leaseMs"`
	UpdatedMs int64  `json:"updatedMs"`
	Hosts     []Seen `json:"hosts"`
}

// Live reports whether the fleet that wrote s still runs its hub.
func (s Status) Live() bool { return s.PID > 0 && registry.PidAlive(s.PID) }

// view is what the hub that wrote s judges its hosts' states by.
func (s Status) view() hubView {
	v := hubView{live: s.Live(), lease: DefaultLease, started: s.StartedMs}
	if s.LeaseMs > 0 {
		v.lease = time.Duration(s.LeaseMs) * time.Millisecond
	}
	return v
}

// hubView is what a host's state is judged by: whether a hub runs, its
// lease, and when it started (epoch ms).
type hubView struct {
	live    bool
	lease   time.Duration
	started int64
}

// ReadStatus reads dir's status.json; a missing file is a zero Status.
func ReadStatus(dir string) (Status, error) {
	path := filepath.Join(dir, statusFile)
	data, err := readFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Status{}, nil
	}
	if err != nil {
		return Status{}, err
	}
	var s Status
	if err := json.Unmarshal(data, &s); err != nil {
		return Status{}, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// writeStatus writes s as dir's status.json.
func writeStatus(dir string, s Status) error {
	data, err := encodeStatus(s)
	if err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(dir, statusFile), data)
}

// encodeStatus is status.json's bytes.
func encodeStatus(s Status) ([]byte, error) {
	data, err := json.MarshalIndent(s, "", "  ")
	return append(data, '\n'), err
}

// HostStatus is one host as `fleet hosts --json` lists it.
type HostStatus struct {
	Name       string     `json:"name"`
	State      State      `json:"state"`
	Slots      int        `json:"slots"`
	Labels     []string   `json:"labels"`
	Running    int        `json:"running"`
	LastSeenMs int64      `json:"lastSeenMs"`
	Address    string     `json:"address"`
	Providers  []Provider `json:"providers"`
}

// state is the state at now of host h, last heard from as seen.
func (v hubView) state(h Host, seen Seen, now time.Time) State {
	switch {
	case seen.LastSeenMs == 0:
		return StateNeverJoined
	case !v.live || seen.LastSeenMs < v.started || now.Sub(time.UnixMilli(seen.LastSeenMs)) > v.lease:
		return StateLost
	case h.Draining:
		return StateDraining
	}
	return StateUp
}

// status is host h's listing. A host that has joined shows the slots and
// labels it reported; one that never did, those it was enrolled with.
func (v hubView) status(h Host, seen Seen, now time.Time) HostStatus {
	hs := HostStatus{Name: h.Name, State: v.state(h, seen, now), Slots: h.Slots, Labels: h.Labels,
		Running: seen.Running, LastSeenMs: seen.LastSeenMs, Address: seen.Address, Providers: seen.Providers}
	if seen.LastSeenMs != 0 {
		hs.Slots, hs.Labels = seen.Slots, seen.Labels
	}
	if hs.Labels == nil {
		hs.Labels = []string{}
	}
	if hs.Providers == nil {
		hs.Providers = []Provider{}
	}
	return hs
}

// List is every enrolled host of dir with its state at now, by name: the
// registry joined with what the running (or last) hub wrote in
// status.json. It needs no running fleet.
func List(dir string, now time.Time) ([]HostStatus, error) {
	reg, err := LoadRegistry(dir)
	if err != nil {
		return nil, err
	}
	st, err := ReadStatus(dir)
	if err != nil {
		return nil, err
	}
	seen := make(map[string]Seen, len(st.Hosts))
	for _, s := range st.Hosts {
		seen[s.Name] = s
	}
	view := st.view()
	out := make([]HostStatus, 0, len(reg.Hosts))
	for _, h := range reg.Hosts {
		out = append(out, view.status(h, seen[h.Name], now))
	}
	slices.SortFunc(out, func(a, b HostStatus) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}

// WaitApplied waits up to bound for the running hub, if there is one, to
// run with registry generation gen, and reports whether one does (false
// when no fleet runs the hub, or it did not apply gen in time).
func WaitApplied(dir string, gen int64, bound time.Duration) (running, applied bool) {
	deadline := time.Now().Add(bound)
	pause := 5 * time.Millisecond
	for {
		st, err := ReadStatus(dir)
		if err != nil || !st.Live() {
			return false, false
		}
		if st.Applied >= gen {
			return true, true
		}
		if time.Now().After(deadline) {
			return true, false
		}
		time.Sleep(pause)
		pause = min(2*pause, 100*time.Millisecond)
	}
}
