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

// Selection is a session's default provider and the model asked of it,
// as the flags and config.json choose them.
type Selection struct {
	Provider string // --provider, else config "provider", else local
	// Model is --model, else config "model", else the provider's own
	// "providers.<name>.model"; "" when none is set.
	Model string
}

// SelectProvider decides a session's default provider and its model from
// the flags (name, model; "" when not given) and file. It is the one place
// that does: the providers are built from its Selection and the fleet
// reports its ReportedModel.
func SelectProvider(name, model string, file config.File) (Selection, error) {
	if name == "" {
		name = file.Provider
	}
	if name == "" {
		name = "local"
	}
	if err := config.CheckProvider(name); err != nil {
		return Selection{}, fmt.Errorf("--provider: %w", err)
	}
	if model == "" {
		model = file.Model
	}
	if model == "" {
		model = file.Providers[name].Model
	}
	return Selection{Provider: name, Model: model}, nil
}

// ReportedModel is the model the fleet names in welcome, status and
// fleetState frames and records in its stores: the model asked for, else
// the provider's name ("local").
func (s Selection) ReportedModel() string {
	if s.Model != "" {
		return s.Model
	}
	return s.Provider
}

// Providers are a session's providers: the default one (workers and, for
// an agent provider, the coordinator) and the others /spawn --provider
// may name.
type Providers struct {
	Default provider.Provider
	Others  map[string]provider.Provider
}

// All is every provider, by name.
func (p Providers) All() map[string]provider.Provider {
	all := maps.Clone(p.Others)
	all[p.Default.Name()] = p.Default
	return all
}

// IsAgent reports whether name drives an agent CLI (not the local shell).
func IsAgent(name string) bool { return name != "" && name != "local" }

// BuildProviders builds every known provider from file's "providers"
// settings, sel's the default one, with sel's model. The local provider
// asks before commands that match shellPolicy (nil: never; native sessions
// let their root approve).
func BuildProviders(sel Selection, file config.File, shellPolicy *provider.Policy) (Providers, error) {
	shell := file.Providers["local"].Shell
	if err := local.CheckShell(shell); err != nil {
		return Providers{}, fmt.Errorf("providers.local.shell: %w", err)
	}
	all := map[string]provider.Provider{"local": &local.Provider{Policy: shellPolicy, Shell: shell}}
	for n, build := range agentAdapters {
		o := options(file.Providers[n])
		if n == sel.Provider && sel.Model != "" {
			o.Model = sel.Model
		}
		all[n] = build(o)
	}
	name := sel.Provider
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
