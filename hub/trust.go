package hub

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/agents-fleet/fleet/registry"
)

// trustFile is <fleetHome>/hub/trust.json: the operator's approve/deny
// decisions, kept for each fleet's lifetime (so a hub restart does not ask
// again) and, for approvals, the name and folder, so the question for a
// restarted fleet can say it looks like one approved before. A decision
// never carries over to another fleet id.
type trustFile struct {
	Fleets   map[string]trustEntry `json:"fleets"`
	Approved []namedPlace          `json:"approvedBefore"`
}

type trustEntry struct {
	Approved bool   `json:"approved"`
	Name     string `json:"name"`
	Cwd      string `json:"cwd"`
	At       int64  `json:"at"`
	By       string `json:"by,omitempty"`
}

type namedPlace struct {
	Name string `json:"name"`
	Cwd  string `json:"cwd"`
}

const (
	maxTrustFleets = 1024
	maxTrustPlaces = 256
	maxTrustSize   = 1 << 20
)

type trustStore struct {
	path string
	f    trustFile
}

// loadTrust reads the file; a missing one is empty, a broken one is set
// aside as empty with an error to log (the operator is asked again: safe).
func loadTrust(dir string) (*trustStore, error) {
	t := &trustStore{path: filepath.Join(dir, "trust.json"), f: trustFile{Fleets: map[string]trustEntry{}}}
	f, err := os.OpenFile(t.path, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return t, nil
	}
	if err != nil {
		return t, fmt.Errorf("read %s: %w", t.path, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxTrustSize+1))
	if err == nil && len(data) > maxTrustSize {
		err = errors.New("file too large")
	}
	if err == nil {
		err = json.Unmarshal(data, &t.f)
	}
	if err != nil {
		t.f = trustFile{Fleets: map[string]trustEntry{}}
		return t, fmt.Errorf("read %s: %w (decisions forgotten; fleets will be asked again)", t.path, err)
	}
	if t.f.Fleets == nil {
		t.f.Fleets = map[string]trustEntry{}
	}
	return t, nil
}

func (t *trustStore) decision(id string) (trustEntry, bool) {
	e, ok := t.f.Fleets[id]
	return e, ok
}

// approvedBefore says whether a fleet with this name and folder was approved before.
func (t *trustStore) approvedBefore(name, cwd string) bool {
	for _, p := range t.f.Approved {
		if p.Name == name && p.Cwd == cwd {
			return true
		}
	}
	return false
}

func (t *trustStore) decide(d registry.Descriptor, approved bool, by string, at int64) error {
	t.f.Fleets[d.ID] = trustEntry{Approved: approved, Name: d.Name, Cwd: d.Cwd, At: at, By: by}
	if approved && !t.approvedBefore(d.Name, d.Cwd) {
		t.f.Approved = append(t.f.Approved, namedPlace{Name: d.Name, Cwd: d.Cwd})
		if len(t.f.Approved) > maxTrustPlaces {
			t.f.Approved = t.f.Approved[len(t.f.Approved)-maxTrustPlaces:]
		}
	}
	for len(t.f.Fleets) > maxTrustFleets {
		oldest := ""
		for id, e := range t.f.Fleets {
			if oldest == "" || e.At < t.f.Fleets[oldest].At {
				oldest = id
			}
		}
		delete(t.f.Fleets, oldest)
	}
	return t.save()
}

// forget drops the decisions for fleets that are gone (their lifetime is over).
func (t *trustStore) forget(live map[string]bool) error {
	changed := false
	for id := range t.f.Fleets {
		if !live[id] {
			delete(t.f.Fleets, id)
			changed = true
		}
	}
	if !changed {
		return nil
	}
	return t.save()
}

func (t *trustStore) save() error {
	data, err := json.MarshalIndent(t.f, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(t.path), ".trust.json.tmp*")
	if err != nil {
		return fmt.Errorf("save hub decisions: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err = tmp.Write(append(data, '\n')); err == nil {
		err = tmp.Close()
	} else {
		tmp.Close()
	}
	if err == nil {
		err = os.Rename(tmp.Name(), t.path)
	}
	if err != nil {
		return fmt.Errorf("save hub decisions: %w", err)
	}
	return nil
}
