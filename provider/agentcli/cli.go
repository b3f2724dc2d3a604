package agentcli

import (
	"context"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/agents-fleet/fleet/provider"
)

// About describes an agent CLI to the code that finds and starts it.
type About struct {
	Name      string // the provider's name: "claude"
	Command   string // the command, looked up in PATH when Options.Path is empty
	Package   string // the npm package that installs it
	ConfigKey string // where config.json sets its path
	// StartBound bounds start-up when the caller's ctx has no deadline
	// (StartContext).
	StartBound time.Duration
	// VersionBound bounds `--version` (Probe).
	VersionBound time.Duration
	// Defaults are NAME=value settings the CLI gets unless its
	// environment sets them (Env).
	Defaults []string
}

// CLI is an agent CLI as its adapter's Provider holds it: what it is and
// the user's settings for it (config.json providers.<name>), fixed at
// NewCLI. Each adapter's Provider embeds one, which gives it its Name.
type CLI struct {
	// Options are the user's settings; read-only after NewCLI.
	Options provider.Options
	// Launcher starts the CLI's sessions; nil starts them here (Start). A
	// session kind that runs the CLI elsewhere sets its own, which gives
	// back the remote process's pipes; ctx bounds the launch only. Set it
	// before the first session starts.
	Launcher func(ctx context.Context, c Command) (Process, error)
	about    About
}

// NewCLI returns the CLI a with the user's settings o.
func NewCLI(a About, o provider.Options) CLI {
	o.Args = slices.Clone(o.Args)
	o.Env = slices.Clone(o.Env)
	return CLI{Options: o, about: a}
}

// Name is the provider's name ("claude").
func (c *CLI) Name() string { return c.about.Name }

// Env is the CLI's environment: base (the daemon's own when nil), then
// Options.Env, then the Defaults that neither sets (a user's own setting
// wins).
func (c *CLI) Env(base []string) []string {
	if base == nil {
		base = os.Environ()
	}
	env := make([]string, 0, len(base)+len(c.Options.Env)+len(c.about.Defaults))
	env = append(env, base...)
	env = append(env, c.Options.Env...)
	return WithDefaults(env, c.about.Defaults...)
}

// Resolve finds the CLI: Options.Path (a path, or a name looked up in
// env's PATH), else its command in PATH; a CLI that is not there is a
// *provider.MissingCLIError.
func (c *CLI) Resolve(env []string) (string, error) {
	missing := provider.MissingCLIError{Provider: c.about.Name, Package: c.about.Package, ConfigKey: c.about.ConfigKey}
	return Find(c.Options.Path, c.about.Command, env, missing)
}

// Locate is Env and Resolve: a session's environment on base, and the
// CLI's path in it.
func (c *CLI) Locate(base []string) (path string, env []string, err error) {
	env = c.Env(base)
	path, err = c.Resolve(env)
	return path, env, err
}

// Launch starts cmd with Launcher, or here when there is none.
func (c *CLI) Launch(ctx context.Context, cmd Command) (Process, error) {
	if c.Launcher != nil {
		return c.Launcher(ctx, cmd)
	}
	p, err := Start(cmd)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// Model is the model a session of spec runs: Spec.Model, else
// Options.Model; "" leaves it to the CLI.
func (c *CLI) Model(spec provider.Spec) string {
	if spec.Model != "" {
		return spec.Model
	}
	return c.Options.Model
}

// Probe is what every Inspect does first: it finds the CLI (in.Path) and
// returns what `--version` printed with env, within VersionBound. On
// failure it sets in.Err and reports false.
func (c *CLI) Probe(ctx context.Context, env []string, in *provider.Inspection) (string, bool) {
	path, err := c.Resolve(env)
	if err != nil {
		in.Err = err
		return "", false
	}
	in.Path = path
	out, err := Version(ctx, path, env, c.about.VersionBound)
	if err != nil {
		in.Err = err
		return "", false
	}
	return out, true
}

// IsFleetTool reports whether name, a CLI's name for an MCP tool
// (prefix, the server's name, sep, the tool's), is a tool of one of the
// fleet's servers: one the server lists, or any when it lists none. The
// adapters allow those without asking anyone.
func IsFleetTool(servers []provider.MCPServer, name, prefix, sep string) bool {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return false
	}
	for _, m := range servers {
		tool, ok := strings.CutPrefix(rest, m.Name+sep)
		if ok && tool != "" && (len(m.Tools) == 0 || slices.Contains(m.Tools, tool)) {
			return true
		}
	}
	return false
}

// StartContext is ctx bounded by StartBound when it has no deadline of
// its own: start-up must not wait for ever on a CLI that does not answer.
func (c *CLI) StartContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, c.about.StartBound)
}
