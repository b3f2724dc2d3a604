package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/agents-fleet/fleet/config"
	"github.com/agents-fleet/fleet/provider"
	"github.com/agents-fleet/fleet/registry"
)

// Report is what fleet doctor found.
type Report struct {
	Home      HomeReport       `json:"home"`
	Default   string           `json:"defaultProvider"`
	Providers []ProviderReport `json:"providers"`
}

// HomeReport is the fleet home's health.
type HomeReport struct {
	Path        string   `json:"path"`
	Config      string   `json:"config"` // "ok", "absent" or the error
	LiveFleets  int      `json:"liveFleets"`
	StaleFleets int      `json:"staleDescriptors"`
	Problems    []string `json:"problems,omitempty"`
}

// ProviderReport is one provider's CLI as found.
type ProviderReport struct {
	Name        string `json:"name"`
	Available   bool   `json:"available"` // this build has the adapter
	Path        string `json:"path,omitempty"`
	Version     string `json:"version,omitempty"`
	Verified    bool   `json:"verified"`
	Endpoint    string `json:"endpoint,omitempty"`
	Credentials string `json:"credentials,omitempty"`
	Problem     string `json:"problem,omitempty"`
}

// Why says why the report is not OK ("" when it is).
func (r Report) Why() string {
	if len(r.Home.Problems) > 0 {
		return r.Home.Problems[0]
	}
	for _, p := range r.Providers {
		if p.Name == r.Default && p.Problem != "" {
			return "the default provider (" + p.Name + ") cannot run: " + p.Problem
		}
	}
	return ""
}

// OK reports whether the default provider can run and the home is sound.
func (r Report) OK() bool {
	if len(r.Home.Problems) > 0 {
		return false
	}
	for _, p := range r.Providers {
		if p.Name == r.Default {
			return p.Problem == ""
		}
	}
	return false
}

// Doctor inspects the fleet home and every provider's CLI.
func Doctor(ctx context.Context, home string, env []string) Report {
	r := Report{Home: HomeReport{Path: home, Config: "ok"}}
	file, err := config.Load(home)
	switch {
	case err != nil:
		r.Home.Config = err.Error()
		r.Home.Problems = append(r.Home.Problems, err.Error())
	default:
		if _, serr := os.Stat(config.Path(home)); serr != nil {
			r.Home.Config = "absent (defaults)"
		}
	}
	r.Home.Problems = append(r.Home.Problems, checkDirs(home)...)
	entries, _ := registry.List(config.RegistryDir(home))
	for _, e := range entries {
		if e.Err == nil && e.Alive {
			r.Home.LiveFleets++
		} else {
			r.Home.StaleFleets++
		}
	}
	r.Default = file.Provider
	if r.Default == "" {
		r.Default = "local"
	}
	r.Providers = append(r.Providers, ProviderReport{Name: "local", Available: true, Verified: true,
		Endpoint: "none (runs shell commands)", Credentials: "none needed"})
	names := []string{"claude", "codex", "copilot"}
	reports := make([]ProviderReport, len(names))
	var wg sync.WaitGroup
	for i, n := range names {
		build, ok := agentAdapters[n]
		if !ok {
			reports[i] = ProviderReport{Name: n, Problem: "this build has no " + n + " adapter yet (docs/providers.md)"}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			pr := ProviderReport{Name: n, Available: true}
			if in, ok := build(options(file.Providers[n])).(provider.Inspector); ok {
				ins := in.Inspect(ctx, env)
				pr.Path, pr.Version, pr.Verified = ins.Path, ins.Version, ins.Verified
				pr.Endpoint, pr.Credentials = ins.Endpoint, ins.Credentials
				if ins.Err != nil {
					pr.Problem = ins.Err.Error()
				}
			}
			reports[i] = pr
		}()
	}
	wg.Wait()
	r.Providers = append(r.Providers, reports...)
	return r
}

// checkDirs reports fleet-home directories that let others in (mode bits
// on Unix, the access list on Windows: registry.CheckPrivateDir).
func checkDirs(home string) []string {
	var out []string
	for _, d := range []string{filepath.Join(home, "control"), filepath.Join(home, "state"), config.RegistryDir(home)} {
		if _, err := os.Lstat(d); err != nil {
			continue // made on first use
		}
		if err := registry.CheckPrivateDir(d); err != nil {
			out = append(out, fmt.Sprintf("%s %v; the fleet keeps it private to you (%s)", d, err, privateFix(d)))
		}
	}
	return slices.Clip(out)
}
