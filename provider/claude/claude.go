// Package claude drives Claude Code (the `claude` CLI) as a fleet agent:
// one long-lived process per session, in print mode with stream-json on
// both pipes and the permission prompt on the same pipes:
//
//	claude -p --input-format stream-json --output-format stream-json --verbose \
//	  --permission-prompt-tool stdio [--model M] [--resume ID] \
//	  [--append-system-prompt TEXT] [--mcp-config=JSON --allowedTools=mcp__fleet__a,...] \
//	  [--permission-mode MODE] [Options.Args...]
//
// Each turn is one user message on stdin; the CLI answers with system/init,
// one assistant line per content block, user lines carrying tool results,
// and a result line that ends the turn. Permission prompts arrive as
// can_use_tool control requests and are relayed to Host.Permission; the
// answer goes back as a control_response. docs/providers/claude.md has the
// whole mapping and what was verified with which CLI version.
package claude

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agents-fleet/fleet/provider"
	"github.com/agents-fleet/fleet/provider/agentcli"
)

const (
	// Command is the CLI's command name, looked up in PATH when
	// Options.Path is empty.
	Command = "claude"
	// Package is the npm package that installs the CLI.
	Package = "@anthropic-ai/claude-code"
	// ConfigKey is where config.json sets the CLI's path.
	ConfigKey = "providers.claude.path"
)

// VerifiedVersions are the CLI versions this adapter was verified with
// against the scripted endpoint (docs/providers/claude.md).
var VerifiedVersions = []string{"2.1.197"}

// defaultEnv is set for the CLI unless the environment already sets it: a
// retry bound so a failing endpoint fails the turn in seconds (the CLI's
// own default retries for minutes), no traffic to api.anthropic.com beyond
// the model requests, and no self-update of a pinned binary.
var defaultEnv = []string{
	"CLAUDE_CODE_MAX_RETRIES=2",
	"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
	"DISABLE_AUTOUPDATER=1",
}

// Provider starts Claude Code sessions. Its configuration is fixed at New.
type Provider struct {
	agentcli.CLI
}

// New returns a Provider configured by o (config.json providers.claude).
func New(o provider.Options) *Provider {
	return &Provider{agentcli.NewCLI(agentcli.About{
		Name: "claude", Command: Command, Package: Package, ConfigKey: ConfigKey,
		VersionBound: 10 * time.Second, Defaults: defaultEnv,
	}, o)}
}

var (
	_ provider.Provider  = (*Provider)(nil)
	_ provider.Inspector = (*Provider)(nil)
)

// Start runs the CLI for spec and returns once it answered its initialize
// control request, which is when it reads turns.
func (p *Provider) Start(ctx context.Context, spec provider.Spec, h provider.Host) (provider.Session, error) {
	path, env, err := p.Locate(spec.Env)
	if err != nil {
		return nil, err
	}
	args, err := p.args(spec)
	if err != nil {
		return nil, err
	}
	// The MCP config carries the agent's bearer token: a command line is
	// readable by every local user (/proc/PID/cmdline), so it goes in a
	// 0600 file in a 0700 directory, removed when the session ends.
	dir, err := privateMCPConfig(args)
	if err != nil {
		return nil, err
	}
	proc, err := p.Launch(ctx, agentcli.Command{Path: path, Args: args, Dir: spec.Dir, Env: env})
	if err != nil {
		os.RemoveAll(dir) // "" is none
		return nil, fmt.Errorf("claude: %w", err)
	}
	s := newSession(h, spec)
	if err := s.start(ctx, proc); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if dir != "" {
		go func() { <-s.Done(); os.RemoveAll(dir) }()
	}
	return s, nil
}

// privateMCPConfig moves an inline --mcp-config=JSON argument of args into
// a private file and points the argument at it; it returns the file's
// directory ("" when there was none).
func privateMCPConfig(args []string) (string, error) {
	const flag = "--mcp-config="
	for i, a := range args {
		if !strings.HasPrefix(a, flag) {
			continue
		}
		dir, err := os.MkdirTemp("", "fleet-claude-mcp-")
		if err != nil {
			return "", fmt.Errorf("claude: MCP config: %w", err)
		}
		file := filepath.Join(dir, "mcp.json")
		if err := os.WriteFile(file, []byte(a[len(flag):]), 0o600); err != nil {
			os.RemoveAll(dir)
			return "", fmt.Errorf("claude: MCP config: %w", err)
		}
		args[i] = flag + file
		return dir, nil
	}
	return "", nil
}

// mcpConfig is the --mcp-config document.
type mcpConfig struct {
	MCPServers map[string]mcpServer `json:"mcpServers"`
}

type mcpServer struct {
	Type    string            `json:"type"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers,omitempty"`
}

// args is the CLI's command line for spec (the program name excluded).
func (p *Provider) args(spec provider.Spec) ([]string, error) {
	args := []string{
		"-p",
		"--input-format", "stream-json",
		"--output-format", "stream-json",
		"--verbose",
		"--permission-prompt-tool", "stdio",
	}
	if model := p.Model(spec); model != "" {
		args = append(args, "--model", model)
	}
	if spec.ResumeID != "" {
		args = append(args, "--resume", spec.ResumeID)
	}
	if spec.Instructions != "" {
		args = append(args, "--append-system-prompt", spec.Instructions)
	}
	if len(spec.MCP) > 0 {
		cfg := mcpConfig{MCPServers: map[string]mcpServer{}}
		for _, m := range spec.MCP {
			if m.Name == "" || strings.Contains(m.Name, "__") {
				return nil, fmt.Errorf("claude: MCP server name %q is not usable (tools are named mcp__<server>__<tool>)", m.Name)
			}
			cfg.MCPServers[m.Name] = mcpServer{Type: "http", URL: m.URL, Headers: m.Headers}
		}
		b, err := json.Marshal(cfg)
		if err != nil {
			return nil, fmt.Errorf("claude: encode --mcp-config: %w", err)
		}
		// The = form: both flags take a variable number of values, which
		// would swallow whatever follows them.
		args = append(args, "--mcp-config="+string(b), "--allowedTools="+strings.Join(fleetTools(spec.MCP), ","))
	}
	if p.Options.PermissionMode != "" {
		args = append(args, "--permission-mode", p.Options.PermissionMode)
	}
	return append(args, p.Options.Args...), nil
}

// fleetTools are the tool rules pre-allowed for the fleet's MCP servers:
// each named tool, or the whole server when it lists none.
func fleetTools(servers []provider.MCPServer) []string {
	var rules []string
	for _, m := range servers {
		if len(m.Tools) == 0 {
			rules = append(rules, "mcp__"+m.Name)
			continue
		}
		for _, t := range m.Tools {
			rules = append(rules, "mcp__"+m.Name+"__"+t)
		}
	}
	return rules
}

// isFleetTool reports whether the CLI's tool name (mcp__<server>__<tool>)
// is one of spec's MCP tools, which are allowed without asking anyone.
func isFleetTool(servers []provider.MCPServer, tool string) bool {
	return agentcli.IsFleetTool(servers, tool, "mcp__", "__")
}
