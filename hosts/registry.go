package hosts

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"time"

	"github.com/agents-fleet/fleet/hosts/naming"
	"github.com/nats-io/nkeys"
)

// Host is one enrolled host, as hosts.json keeps it. The fleet keeps only
// the public half of the host's credential: the seed is in the join file
// alone.
type Host struct {
	Name string `json:"name"`
	// NKey is the public key of the host's credential (a NATS user NKey):
	// the hub takes a leaf node that signs its nonce with the seed.
	NKey     string   `json:"nkey"`
	Slots    int      `json:"slots"`
	Labels   []string `json:"labels,omitempty"`
	Draining bool     `json:"draining,omitempty"`
	AddedMs  int64    `json:"addedMs"`
}

// Registry is hosts.json: the enrolled hosts, by name.
type Registry struct {
	Version int `json:"version"`
	// Generation counts the changes made to the file; the running hub
	// writes the one it has applied into status.json, so a command knows
	// when its change is in force.
	Generation int64  `json:"generation"`
	Hosts      []Host `json:"hosts"`
}

// registryVersion is the format of hosts.json this build writes and reads.
const registryVersion = 1

// Find returns the host called name.
func (r Registry) Find(name string) (Host, bool) {
	i := slices.IndexFunc(r.Hosts, func(h Host) bool { return h.Name == name })
	if i < 0 {
		return Host{}, false
	}
	return r.Hosts[i], true
}

// LoadRegistry reads dir's hosts.json; a missing file is an empty
// registry.
func LoadRegistry(dir string) (Registry, error) {
	path := filepath.Join(dir, registryFile)
	data, err := readFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Registry{Version: registryVersion}, nil
	}
	if err != nil {
		return Registry{}, err
	}
	var r Registry
	if err := json.Unmarshal(data, &r); err != nil {
		return Registry{}, fmt.Errorf("%s: %w", path, err)
	}
	if r.Version != registryVersion {
		return Registry{}, fmt.Errorf("%s: format version %d; this fleet reads %d", path, r.Version, registryVersion)
	}
	for _, h := range r.Hosts {
		if err := naming.CheckName(h.Name); err != nil {
			return Registry{}, fmt.Errorf("%s: %w", path, err)
		}
		if !nkeys.IsValidPublicUserKey(h.NKey) {
			return Registry{}, fmt.Errorf("%s: host %s has no valid public key", path, h.Name)
		}
	}
	return r, nil
}

// saveLocked writes r as dir's hosts.json, one generation on; the hosts
// lock must be held.
func (r *Registry) saveLocked(dir string) error {
	r.Version = registryVersion
	r.Generation++
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(dir, registryFile), append(data, '\n'))
}

// Enrolment is what `fleet hosts add` enrols a host with.
type Enrolment struct {
	Name   string
	Slots  int
	Labels []string
	// Hub is the address (host:port) the host dials; the hub's
	// certificate is made to cover it.
	Hub string
}

// Errors callers branch on.
var (
	// ErrExists is returned by Enrol for a name the registry has.
	ErrExists = errors.New("a host by that name is enrolled")
	// ErrNoHost is returned for a name the registry does not have.
	ErrNoHost = errors.New("no such host")
)

// Enrol enrols a host: it makes the PKI if need be (covering e.Hub), mints
// the host's credential, hands the join file to write and, only when that
// succeeded, saves the host. All under the hosts lock, so that concurrent
// enrolments lose nothing. It returns the registry's new generation.
func Enrol(dir string, e Enrolment, write func(JoinFile) error) (int64, error) {
	if err := naming.CheckName(e.Name); err != nil {
		return 0, err
	}
	if err := naming.CheckSlots(e.Slots); err != nil {
		return 0, err
	}
	if err := naming.CheckLabels(e.Labels); err != nil {
		return 0, err
	}
	if err := checkHubAddr(e.Hub); err != nil {
		return 0, err
	}
	return update(dir, func(reg *Registry) error {
		if _, ok := reg.Find(e.Name); ok {
			return fmt.Errorf("%s: %w (fleet hosts remove %s first)", e.Name, ErrExists, e.Name)
		}
		caPEM, err := ensurePKILocked(dir, []string{e.Hub})
		if err != nil {
			return err
		}
		kp, err := nkeys.CreateUser()
		if err != nil {
			return fmt.Errorf("mint a credential: %w", err)
		}
		defer kp.Wipe()
		seed, err := kp.Seed()
		if err != nil {
			return err
		}
		pub, err := kp.PublicKey()
		if err != nil {
			return err
		}
		jf := JoinFile{Version: joinVersion, Name: e.Name, Hub: e.Hub, CA: string(caPEM), Seed: string(seed),
			Slots: e.Slots, Labels: slices.Clone(e.Labels)}
		if err := write(jf); err != nil {
			return err
		}
		reg.Hosts = append(reg.Hosts, Host{Name: e.Name, NKey: pub, Slots: e.Slots, Labels: slices.Clone(e.Labels),
			AddedMs: time.Now().UnixMilli()})
		return nil
	})
}

// Drain marks host name draining: it takes no new workers, its running
// ones finish. It returns the registry's new generation.
func Drain(dir, name string) (int64, error) {
	return change(dir, name, func(r *Registry, i int) { r.Hosts[i].Draining = true })
}

// Remove removes host name: its credential stops working, and the running
// hub cuts it off. It returns the registry's new generation.
func Remove(dir, name string) (int64, error) {
	return change(dir, name, func(r *Registry, i int) { r.Hosts = slices.Delete(r.Hosts, i, i+1) })
}

// change applies edit to host name's entry under the hosts lock.
func change(dir, name string, edit func(r *Registry, i int)) (int64, error) {
	return update(dir, func(reg *Registry) error {
		i := slices.IndexFunc(reg.Hosts, func(h Host) bool { return h.Name == name })
		if i < 0 {
			return fmt.Errorf("%s: %w", name, ErrNoHost)
		}
		edit(reg, i)
		return nil
	})
}

// update loads dir's registry under the hosts lock, lets edit change it,
// and saves it one generation on, unless edit failed. It returns the new
// generation.
func update(dir string, edit func(reg *Registry) error) (int64, error) {
	lock, err := lockDir(dir)
	if err != nil {
		return 0, err
	}
	defer lock.Release()
	reg, err := LoadRegistry(dir)
	if err != nil {
		return 0, err
	}
	if err := edit(&reg); err != nil {
		return 0, err
	}
	if err := reg.saveLocked(dir); err != nil {
		return 0, err
	}
	return reg.Generation, nil
}
