package claude

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agents-fleet/fleet/provider"
	"github.com/agents-fleet/fleet/provider/agentcli"
)

// Inspect finds the CLI, asks its version, and says where it will send
// model requests and with which credential, from env (the daemon's
// environment when nil), Options.Env and the CLI's settings file. It prints
// no secret: only which variable or file holds one.
func (p *Provider) Inspect(ctx context.Context, env []string) provider.Inspection {
	env = p.Env(env)
	var in provider.Inspection
	settings := readSettings(env)
	in.Endpoint, in.Credentials = endpoint(env, settings)
	out, ok := p.Probe(ctx, env, &in)
	if !ok {
		return in
	}
	in.Version, _, _ = strings.Cut(out, "\n")
	in.Version = strings.TrimSpace(in.Version)
	number, _, _ := strings.Cut(in.Version, " ")
	in.Verified = slices.Contains(VerifiedVersions, number)
	return in
}

// settings is the part of the CLI's settings.json that bears on the
// endpoint and credentials.
type settings struct {
	Env          map[string]string `json:"env"`
	APIKeyHelper string            `json:"apiKeyHelper"`
	dir          string
}

// readSettings reads $CLAUDE_CONFIG_DIR/settings.json (~/.claude by
// default); a missing or unreadable file is an empty one.
func readSettings(env []string) settings {
	dir, ok := agentcli.LookupEnv(env, "CLAUDE_CONFIG_DIR")
	if !ok || dir == "" {
		home, _ := agentcli.LookupEnv(env, "HOME")
		if home == "" {
			home, _ = os.UserHomeDir()
		}
		dir = filepath.Join(home, ".claude")
	}
	s := settings{dir: dir}
	if b, err := os.ReadFile(filepath.Join(dir, "settings.json")); err == nil {
		_ = json.Unmarshal(b, &s)
	}
	return s
}

// endpoint describes the model endpoint and the credential in use.
func endpoint(env []string, s settings) (where, cred string) {
	get := func(name string) (string, string) {
		if v, ok := agentcli.LookupEnv(env, name); ok && v != "" {
			return v, name
		}
		if v := s.Env[name]; v != "" {
			return v, name + " (settings.json)"
		}
		return "", ""
	}
	switch {
	case truthy(get("CLAUDE_CODE_USE_BEDROCK")):
		where = "Amazon Bedrock (CLAUDE_CODE_USE_BEDROCK)"
	case truthy(get("CLAUDE_CODE_USE_VERTEX")):
		where = "Google Vertex AI (CLAUDE_CODE_USE_VERTEX)"
	default:
		if u, from := get("ANTHROPIC_BASE_URL"); u != "" {
			where = strings.TrimSuffix(from, " (settings.json)") + "=" + redactURL(u)
			if strings.HasSuffix(from, "(settings.json)") {
				where += " (settings.json)"
			}
		} else {
			where = "default (api.anthropic.com)"
		}
	}
	for _, name := range []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"} {
		if v, from := get(name); v != "" {
			return where, from + " set"
		}
	}
	if s.APIKeyHelper != "" {
		return where, "apiKeyHelper in " + filepath.Join(s.dir, "settings.json")
	}
	if _, err := os.Stat(filepath.Join(s.dir, ".credentials.json")); err == nil {
		return where, "claude login credentials in " + filepath.Join(s.dir, ".credentials.json")
	}
	if strings.HasPrefix(where, "Amazon") || strings.HasPrefix(where, "Google") {
		return where, "the cloud provider's own credentials (not checked)"
	}
	return where, "none found"
}

func truthy(v, _ string) bool {
	switch strings.ToLower(v) {
	case "1", "true", "yes", "on":
		return true
	}
	return false
}

// redactURL hides a URL's user info (a token is sometimes put there).
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(an unparsable URL)"
	}
	if u.User == nil {
		return s
	}
	u.User = nil
	scheme, rest, _ := strings.Cut(u.String(), "://")
	return scheme + "://***@" + rest
}
