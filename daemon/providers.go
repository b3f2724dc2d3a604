// Package daemon composes a fleet: the session (new or resumed, and its
// lock), the store and journal, the control server and its endpoint, the
// providers from config.json and the flags, the fleet's MCP tools, the
// native root, the engine, signals and shutdown (Run). The cli package
// keeps only commands: it parses flags and calls Run.
//
// Events flow engine → journal (saved first) → control server (fanned out);
// requests flow back from the server to the engine through a small
// Backend. The server is built before the engine (it is where the engine's
// events go) and the engine is attached to it once built: no lazy
// pointers.
package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/agents-fleet/fleet/config"
	"github.com/agents-fleet/fleet/provider"
	"github.com/agents-fleet/fleet/provider/claude"
	"github.com/agents-fleet/fleet/provider/codex"
	"github.com/agents-fleet/fleet/provider/copilot"
	"github.com/agents-fleet/fleet/provider/local"
)

// Providers are a session's providers: the default one (workers and, for
// an agent provider, the coordinator) and the others /spawn --provider
// may name.
type Providers struct {
	Default provider.Provider
	Others  map[string]provider.Provider
}

// IsAgent reports whether name drives an agent CLI (not the local shell).
func IsAgent(name string) bool { return name != "" && name != "local" }

// BuildProviders builds every known provider from file's "providers"
// settings. name is the default (--provider, else config "provider", else
// local); model overrides the default provider's model (--model, else
// config "model"). The local provider asks before commands that match
// shellPolicy (nil: never; native sessions let their root approve).
func BuildProviders(name, model string, file config.File, shellPolicy *provider.Policy) (Providers, error) {
	if name == "" {
		name = file.Provider
	}
	if name == "" {
		name = "local"
	}
	if err := config.CheckProvider(name); err != nil {
		return Providers{}, fmt.Errorf("--provider: %w", err)
	}
	if model == "" {
		model = file.Model
	}
	all := map[string]provider.Provider{"local": &local.Provider{Policy: shellPolicy}}
	for n, build := range agentAdapters {
		o := options(file.Providers[n])
		if n == name && model != "" {
			o.Model = model
		}
		all[n] = build(o)
	}
	if all[name] == nil {
		return Providers{}, fmt.Errorf("--provider %s: this build has no %s adapter yet (docs/providers.md says which providers are available)", name, name)
	}
	p := Providers{Default: all[name], Others: map[string]provider.Provider{}}
	for n, prov := range all {
		if n != name {
			p.Others[n] = prov
		}
	}
	return p, nil
}

// agentAdapters build the agent CLI providers, by name.
var agentAdapters = map[string]func(provider.Options) provider.Provider{
	"claude":  func(o provider.Options) provider.Provider { return claude.New(o) },
	"codex":   func(o provider.Options) provider.Provider { return codex.New(o) },
	"copilot": func(o provider.Options) provider.Provider { return copilot.New(o) },
}

// options turns a config entry into provider options.
func options(pc config.ProviderConfig) provider.Options {
	o := provider.Options{Path: pc.Path, Args: slices.Clone(pc.Args), Model: pc.Model, PermissionMode: pc.PermissionMode}
	for _, k := range slices.Sorted(maps.Keys(pc.Env)) {
		o.Env = append(o.Env, k+"="+pc.Env[k])
	}
	return o
}

// CheckDefault inspects the default provider's CLI before the session
// starts: a missing CLI is an error that names the npm package and the
// config key; an unverified version is a warning, logged once.
func CheckDefault(ctx context.Context, p provider.Provider, env []string, log *slog.Logger) (provider.Inspection, error) {
	in, ok := p.(provider.Inspector)
	if !ok {
		return provider.Inspection{}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ins := in.Inspect(ctx, env)
	if ins.Err != nil {
		return ins, ins.Err
	}
	if !ins.Verified {
		warnOnce(p.Name(), func() {
			log.Warn("this CLI version was not verified with the fleet (docs/providers.md lists the ones that were)",
				"provider", p.Name(), "version", ins.Version, "path", ins.Path)
		})
	}
	return ins, nil
}

var warned sync.Map

func warnOnce(key string, f func()) {
	if _, loaded := warned.LoadOrStore(key, true); !loaded {
		f()
	}
}
