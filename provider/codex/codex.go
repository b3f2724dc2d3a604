// Package codex drives the OpenAI Codex CLI through `codex app-server`:
// newline-delimited JSON-RPC over the CLI's stdin and stdout, one
// long-lived process per agent session.
//
// A session starts the process, sends initialize (+ initialized) and then
// thread/start (or thread/resume for Spec.ResumeID); each Send is a
// turn/start on that thread, and turn/completed ends it. Item notifications
// become tool, text and file events; thread/tokenUsage/updated becomes
// per-request Usage; the CLI's approval requests become Host.Permission
// prompts answered at once on stdin. docs/providers/codex.md has the
// mapping, what is not mapped yet, and the version it was verified with.
package codex

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/agents-fleet/fleet/provider/agentcli"

	"github.com/agents-fleet/fleet/internal/proctree"
	"github.com/agents-fleet/fleet/provider"
)

const (
	// Command is the CLI's command name, looked up in PATH when
	// Options.Path is empty.
	Command = "codex"
	// Package is the npm package that installs the CLI.
	Package = "@openai/codex"
	// ConfigKey is where a user sets the CLI's path.
	ConfigKey = "providers.codex.path"
	// VerifiedVersion is the CLI version this adapter was verified with
	// (docs/providers/codex.md).
	VerifiedVersion = "0.171.0"

	// defaultApproval is the approval policy when Options.PermissionMode is
	// empty: "untrusted" asks the operator before anything but known-safe
	// read-only commands.
	defaultApproval = "untrusted"
	// sandboxMode is the sandbox every thread runs in: writes inside the
	// worktree, nothing outside it without an approval.
	sandboxMode = "workspace-write"
	// retryBound is request_max_retries and stream_max_retries for the
	// active custom model provider when the user set neither: an endpoint
	// answering 500 then fails a turn after (2+1)×(2+1) requests, a few
	// seconds, instead of minutes.
	retryBound = 2

	// commandEnv marks the commands the CLI runs for the model (set through
	// shell_environment_policy.set), so an interrupt can end them without
	// ending the app-server; its value is the session tree's mark.
	commandEnv = "AGENTS_FLEET_CODEX_COMMAND"
	// mcpHeaderEnv prefixes the variables that carry MCP headers to the
	// CLI (env_http_headers), so no secret is on its command line.
	mcpHeaderEnv = "AGENTS_FLEET_MCP_HEADER_"
)

// Provider starts Codex sessions. It is safe for concurrent use.
type Provider struct {
	agentcli.CLI
}

// New returns a Provider with o's configuration; every field is optional.
func New(o provider.Options) *Provider {
	return &Provider{agentcli.NewCLI(agentcli.About{
		Name: "codex", Command: Command, Package: Package, ConfigKey: ConfigKey,
		StartBound:   60 * time.Second,
		VersionBound: 15 * time.Second,
	}, o)}
}

var (
	_ provider.Provider  = (*Provider)(nil)
	_ provider.Inspector = (*Provider)(nil)
)

// Start starts `codex app-server` in spec.Dir, initialises it and starts or
// resumes the thread. See the package comment.
func (p *Provider) Start(ctx context.Context, spec provider.Spec, h provider.Host) (provider.Session, error) {
	path, env, err := p.Locate(spec.Env)
	if err != nil {
		return nil, err
	}
	ctx, cancel := p.StartContext(ctx)
	defer cancel()
	// The tree's mark marks the commands the CLI runs too (commandEnv).
	tree := proctree.New()
	args, extraEnv := p.commandLine(spec, env, tree.Mark())
	proc, err := p.Launch(ctx, agentcli.Command{Path: path, Args: args, Dir: spec.Dir, Env: append(env, extraEnv...), Tree: tree})
	if err != nil {
		return nil, fmt.Errorf("codex: %w", err)
	}
	s, err := startSession(ctx, p, spec, h, proc, tree.Mark())
	if err != nil {
		return nil, err
	}
	return s, nil
}

// commandLine returns the CLI's arguments and the variables it needs on
// top of env: `app-server`, the adapter's -c overrides (TOML values), then
// Options.Args.
func (p *Provider) commandLine(spec provider.Spec, env []string, mark string) (args, extraEnv []string) {
	args = []string{"app-server"}
	set := func(key, tomlValue string) { args = append(args, "-c", key+"="+tomlValue) }

	// The retry bound, on the active custom provider, unless the user set one.
	name, keys := retryKeys(loadUserConfig(env), p.Options.Args)
	for _, k := range keys {
		set("model_providers."+name+"."+k, fmt.Sprint(retryBound))
	}
	// Commands the model runs carry a mark of their own: Interrupt ends
	// them (Codex keeps them running after turn/interrupt) and nothing else.
	set("shell_environment_policy.set."+commandEnv, tomlString(mark))

	used := map[string]bool{}
	for i, m := range spec.MCP {
		key := mcpKey(m.Name, used)
		base := "mcp_servers." + key
		set(base+".url", tomlString(m.URL))
		set(base+".enabled", "true")
		// The fleet's own tools never ask the operator.
		set(base+".default_tools_approval_mode", tomlString("approve"))
		if len(m.Headers) > 0 {
			names := make([]string, 0, len(m.Headers))
			for k := range m.Headers {
				names = append(names, k)
			}
			slices.Sort(names)
			var tbl []string
			for j, k := range names {
				v := fmt.Sprintf("%s%d_%d", mcpHeaderEnv, i, j)
				extraEnv = append(extraEnv, v+"="+m.Headers[k])
				tbl = append(tbl, tomlString(k)+"="+tomlString(v))
			}
			set(base+".env_http_headers", "{"+strings.Join(tbl, ",")+"}")
		}
	}
	args = append(args, p.Options.Args...)
	return args, extraEnv
}

var bareKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// mcpKey is the config key for an MCP server named name: the name itself
// when it is a bare TOML key (the CLI splits -c keys on dots), else a
// sanitised one, unique among used.
func mcpKey(name string, used map[string]bool) string {
	key := name
	if !bareKey.MatchString(key) {
		key = strings.Map(func(r rune) rune {
			if r < 128 && bareKey.MatchString(string(r)) {
				return r
			}
			return '_'
		}, key)
		if key == "" {
			key = "mcp"
		}
	}
	for base, n := key, 2; used[key]; n++ {
		key = fmt.Sprintf("%s_%d", base, n)
	}
	used[key] = true
	return key
}

// tomlString quotes s as a TOML basic string.
func tomlString(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// Inspect reports the CLI's path and version and where it will send model
// requests, as far as the environment and the user's config.toml tell.
func (p *Provider) Inspect(ctx context.Context, env []string) provider.Inspection {
	env = p.Env(env)
	var in provider.Inspection
	cfg := loadUserConfig(env)
	in.Endpoint, in.Credentials = describeEndpoint(cfg, p.Options.Args, env)
	version, ok := p.Probe(ctx, env, &in)
	if !ok {
		return in
	}
	in.Version = version
	in.Verified = versionOf(in.Version) == VerifiedVersion
	return in
}

// versionOf extracts "0.171.0" from "codex-cli 0.171.0".
func versionOf(s string) string {
	f := strings.Fields(s)
	if len(f) == 0 {
		return ""
	}
	return f[len(f)-1]
}

func lastBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
