package hostagent

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agents-fleet/fleet/hosts"
	"github.com/agents-fleet/fleet/provider"
)

// probeTimeout bounds each CLI's probe (`claude --version` and the like).
const probeTimeout = 30 * time.Second

// probe finds which of provs this machine can run, with versions: a
// provider that wraps a CLI through its Inspector (the probe fleet doctor
// and fleet run use), one that does not (the local shell) as part of this
// build. The probes run at once; the result is sorted by name.
func probe(ctx context.Context, provs map[string]provider.Provider, env []string, version string) []hosts.Provider {
	var (
		mu  sync.Mutex
		out []hosts.Provider
		wg  sync.WaitGroup
	)
	for name, p := range provs {
		in, ok := p.(provider.Inspector)
		if !ok {
			mu.Lock()
			out = append(out, hosts.Provider{Name: name, Version: version, Verified: true})
			mu.Unlock()
			continue
		}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, probeTimeout)
			defer cancel()
			ins := in.Inspect(ctx, env)
			if ins.Err != nil {
				return
			}
			mu.Lock()
			out = append(out, hosts.Provider{Name: name, Version: ins.Version, Verified: ins.Verified})
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.SortFunc(out, func(a, b hosts.Provider) int { return strings.Compare(a.Name, b.Name) })
	return out
}
