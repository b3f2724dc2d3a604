// Package copilot drives the GitHub Copilot CLI through `copilot --acp`:
// the Agent Client Protocol, newline-delimited JSON-RPC 2.0 over the CLI's
// stdin and stdout, one long-lived process per agent session.
//
// ACP mode is used rather than the SDK server mode (`--headless --stdio`)
// because it reads the BYOK environment (COPILOT_OFFLINE,
// COPILOT_PROVIDER_*, COPILOT_MODEL) as users set it; the SDK mode ignores
// it. A session starts the process, sends initialize and then session/new
// (or session/load for Spec.ResumeID); each Send is a session/prompt whose
// response ends the turn. session/update notifications become text, tool,
// file and usage events; session/request_permission requests become
// Host.Permission prompts, answered at once. docs/providers/copilot.md has
// the mapping, what is not mapped yet, and the version it was verified with.
package copilot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/agents-fleet/fleet/provider/agentcli"

	"github.com/agents-fleet/fleet/provider"
)

const (
	// Command is the CLI's command name, looked up in PATH when
	// Options.Path is empty.
	Command = "copilot"
	// Package is the npm package that installs the CLI.
	Package = "@github/copilot"
	// ConfigKey is where a user sets the CLI's path.
	ConfigKey = "providers.copilot.path"
	// VerifiedVersion is the CLI version this adapter was verified with
	// (docs/providers/copilot.md).
	VerifiedVersion = "1.0.102"

	// instructionsEnv is the CLI's list of extra custom-instruction
	// directories; Spec.Instructions reach the system prompt through it.
	instructionsEnv = "COPILOT_CUSTOM_INSTRUCTIONS_DIRS"
)

// Provider starts Copilot sessions. It is safe for concurrent use.
type Provider struct {
	agentcli.CLI
}

// New returns a Provider with o's configuration; every field is optional.
func New(o provider.Options) *Provider {
	return &Provider{agentcli.NewCLI(agentcli.About{
		Name: "copilot", Command: Command, Package: Package, ConfigKey: ConfigKey,
		// The first start under a fresh HOME unpacks the CLI's package
		// (about 235 MB) before it answers.
		StartBound:   90 * time.Second,
		VersionBound: 20 * time.Second,
	}, o)}
}

var (
	_ provider.Provider  = (*Provider)(nil)
	_ provider.Inspector = (*Provider)(nil)
)

// Start starts `copilot --acp` in spec.Dir, initialises it and opens or
// loads the session. See the package comment.
func (p *Provider) Start(ctx context.Context, spec provider.Spec, h provider.Host) (provider.Session, error) {
	path, env, err := p.Locate(spec.Env)
	if err != nil {
		return nil, err
	}
	modeArgs, err := permissionArgs(p.Options.PermissionMode)
	if err != nil {
		return nil, err
	}
	ctx, cancel := p.StartContext(ctx)
	defer cancel()
	// A private directory for what must not go on the command line (MCP
	// headers carry bearer tokens) and for the instructions file.
	scratch, err := os.MkdirTemp("", "fleet-copilot-")
	if err != nil {
		return nil, fmt.Errorf("copilot: %w", err)
	}
	args, extraEnv, err := p.commandLine(spec, env, scratch)
	if err != nil {
		_ = os.RemoveAll(scratch)
		return nil, err
	}
	args = append(args, modeArgs...)
	args = append(args, p.Options.Args...)

	proc, err := p.Launch(ctx, agentcli.Command{Path: path, Args: args, Dir: spec.Dir, Env: append(env, extraEnv...)})
	if err != nil {
		_ = os.RemoveAll(scratch)
		return nil, fmt.Errorf("copilot: %w", err)
	}
	s, err := startSession(ctx, proc, sessionConfig{spec: spec, host: h, scratch: scratch, model: p.model(spec, env)})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// model is the model the session runs: Spec.Model, Options.Model, or the
// CLI's COPILOT_MODEL; "" when none says (the CLI's own default).
func (p *Provider) model(spec provider.Spec, env []string) string {
	if m := p.Model(spec); m != "" {
		return m
	}
	m, _ := agentcli.LookupEnv(env, "COPILOT_MODEL")
	return m
}

// permissionArgs maps Options.PermissionMode to the CLI's flags. "" and
// "default" ask the operator for everything the CLI asks about.
func permissionArgs(mode string) ([]string, error) {
	switch mode {
	case "", "default":
		return nil, nil
	case "allow-all-tools":
		return []string{"--allow-all-tools"}, nil
	case "allow-all", "yolo":
		return []string{"--allow-all"}, nil
	case "plan", "autopilot":
		return []string{"--mode", mode}, nil
	}
	return nil, fmt.Errorf("copilot: unknown permissionMode %q (want default, allow-all-tools, allow-all, plan or autopilot)", mode)
}

// commandLine returns the adapter's own arguments (Options' permission
// flags and Args come after them) and the variables the CLI needs on top
// of env. Files it refers to are written into scratch.
func (p *Provider) commandLine(spec provider.Spec, env []string, scratch string) (args, extraEnv []string, err error) {
	args = []string{"--acp", "--no-auto-update"}
	if m := p.Model(spec); m != "" {
		args = append(args, "--model", m)
	}
	if _, ok := agentcli.LookupEnv(env, "COPILOT_AUTO_UPDATE"); !ok {
		extraEnv = append(extraEnv, "COPILOT_AUTO_UPDATE=false")
	}
	if len(spec.MCP) > 0 {
		cfg, err := mcpConfig(spec.MCP)
		if err != nil {
			return nil, nil, err
		}
		file := filepath.Join(scratch, "mcp-config.json")
		if err := os.WriteFile(file, cfg, 0o600); err != nil {
			return nil, nil, fmt.Errorf("copilot: write the MCP config: %w", err)
		}
		// @file keeps the servers' headers (bearer tokens) off the command
		// line, where every local user could read them.
		args = append(args, "--additional-mcp-config", "@"+file)
		for _, m := range spec.MCP {
			for _, pat := range allowPatterns(m) {
				// --allow-tool takes several values; the = form keeps it
				// from taking the next flag as one.
				args = append(args, "--allow-tool="+pat)
			}
		}
	}
	if strings.TrimSpace(spec.Instructions) != "" {
		dir := filepath.Join(scratch, "instructions")
		file := filepath.Join(dir, ".github", "instructions", "fleet.instructions.md")
		if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
			return nil, nil, fmt.Errorf("copilot: write the instructions: %w", err)
		}
		if err := os.WriteFile(file, []byte(spec.Instructions+"\n"), 0o600); err != nil {
			return nil, nil, fmt.Errorf("copilot: write the instructions: %w", err)
		}
		dirs := dir
		if prev, ok := agentcli.LookupEnv(env, instructionsEnv); ok && prev != "" {
			dirs = prev + "," + dir
		}
		extraEnv = append(extraEnv, instructionsEnv+"="+dirs)
	}
	return args, extraEnv, nil
}

// cmp returns the first non-empty string.
func cmp(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// allowPatterns are the --allow-tool patterns that pre-allow m's tools:
// "<server>(<tool>)" for each listed tool, or "<server>" (all its tools)
// when it lists none.
func allowPatterns(m provider.MCPServer) []string {
	if len(m.Tools) == 0 {
		return []string{m.Name}
	}
	out := make([]string, 0, len(m.Tools))
	for _, t := range m.Tools {
		out = append(out, m.Name+"("+t+")")
	}
	return out
}

// serverName is what Copilot accepts as an MCP server name (it prefixes
// the server's tools with "<name>-").
var serverName = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// Inspect reports the CLI's path and version and where it will send model
// requests, from env (the daemon's environment) and the provider's own.
// It never prints a secret.
func (p *Provider) Inspect(ctx context.Context, env []string) provider.Inspection {
	env = p.Env(env)
	var in provider.Inspection
	in.Endpoint, in.Credentials = describeEndpoint(env)
	out, ok := p.Probe(ctx, append(slices.Clip(env), "COPILOT_AUTO_UPDATE=false"), &in)
	if !ok {
		return in
	}
	in.Version = versionOf(out)
	in.Verified = in.Version == VerifiedVersion
	return in
}

var versionRE = regexp.MustCompile(`\d+\.\d+\.\d+[0-9A-Za-z.+-]*`)

// versionOf finds the version in `copilot --version`'s output ("GitHub
// Copilot CLI 1.0.102.").
func versionOf(s string) string {
	v := versionRE.FindString(s)
	return strings.TrimRight(v, ".")
}

// describeEndpoint says where the CLI sends model requests and with which
// credential, as far as env tells, naming variables but never values of
// secrets.
func describeEndpoint(env []string) (endpoint, credentials string) {
	get := func(k string) string { v, _ := agentcli.LookupEnv(env, k); return v }
	if base := get("COPILOT_PROVIDER_BASE_URL"); base != "" {
		typ := cmp(get("COPILOT_PROVIDER_TYPE"), "openai")
		endpoint = "COPILOT_PROVIDER_BASE_URL=" + redactURL(base) + " (BYOK, type " + typ
		if w := get("COPILOT_PROVIDER_WIRE_API"); w != "" {
			endpoint += ", wire API " + w
		}
		endpoint += ")"
		if isTrue(get("COPILOT_OFFLINE")) {
			endpoint += ", COPILOT_OFFLINE"
		}
		var set []string
		for _, k := range []string{"COPILOT_PROVIDER_BEARER_TOKEN", "COPILOT_PROVIDER_API_KEY_COMMAND", "COPILOT_PROVIDER_API_KEY"} {
			if get(k) != "" {
				set = append(set, k)
			}
		}
		if len(set) == 0 {
			return endpoint, "none found (COPILOT_PROVIDER_API_KEY unset; fine for a local provider without keys)"
		}
		return endpoint, strings.Join(set, ", ") + " set"
	}
	if isTrue(get("COPILOT_OFFLINE")) {
		return "COPILOT_OFFLINE is set without COPILOT_PROVIDER_BASE_URL: the CLI will refuse to run", "none"
	}
	endpoint = "default (GitHub Copilot)"
	if h := cmp(get("COPILOT_GH_HOST"), get("GH_HOST")); h != "" {
		endpoint += " via " + h
	}
	for _, k := range []string{"COPILOT_GITHUB_TOKEN", "GH_TOKEN", "GITHUB_TOKEN"} {
		if get(k) != "" {
			return endpoint, k + " set"
		}
	}
	return endpoint, "none in the environment (a stored `copilot login` is not checked)"
}

func isTrue(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "1", "true", "yes", "on", "y":
		return true
	}
	return false
}

// redactURL drops a URL's user info, which may hold a password.
func redactURL(u string) string {
	scheme, rest, ok := strings.Cut(u, "://")
	if !ok {
		return u
	}
	host, path, _ := strings.Cut(rest, "/")
	if i := strings.LastIndexByte(host, '@'); i >= 0 {
		host = "…@" + host[i+1:]
	}
	if path != "" {
		return scheme + "://" + host + "/" + path
	}
	return scheme + "://" + host
}

// lastBytes is s's last n bytes, cut at a rune boundary.
func lastBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	for i := 0; i < len(s) && i < 4; i++ {
		if s[i]&0xC0 != 0x80 {
			return "…" + s[i:]
		}
	}
	return "…" + s
}

// errMCPName is returned for a Spec.MCP server name the CLI cannot take.
var errMCPName = errors.New("copilot: an MCP server name may hold only letters, digits, '_', '.' and '-'")

// mcpConfig is the --additional-mcp-config document offering servers to
// the CLI as streamable-HTTP servers with all their tools.
func mcpConfig(servers []provider.MCPServer) ([]byte, error) {
	type server struct {
		Type    string            `json:"type"`
		URL     string            `json:"url"`
		Headers map[string]string `json:"headers,omitempty"`
		Tools   []string          `json:"tools"`
	}
	doc := struct {
		MCPServers map[string]server `json:"mcpServers"`
	}{MCPServers: map[string]server{}}
	for _, m := range servers {
		if !serverName.MatchString(m.Name) {
			return nil, fmt.Errorf("%w: %q", errMCPName, m.Name)
		}
		if _, dup := doc.MCPServers[m.Name]; dup {
			return nil, fmt.Errorf("copilot: MCP server %q is given twice", m.Name)
		}
		doc.MCPServers[m.Name] = server{Type: "http", URL: m.URL, Headers: m.Headers, Tools: []string{"*"}}
	}
	return json.Marshal(doc)
}
