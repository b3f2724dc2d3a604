package codex

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/agents-fleet/fleet/provider/agentcli"
)

// userConfig is what the adapter reads of the user's $CODEX_HOME/config.toml
// (never writes): enough to find the active model provider and whether the
// user bounded its retries. It is a small reader for the flat subset of
// TOML that config files use — tables, dotted keys, strings, numbers and
// booleans; array and inline-table values are kept as their raw text, and
// arrays of tables are skipped.
type userConfig struct {
	path   string
	found  bool
	values map[string]string // key path joined by keySep → value (strings unquoted)
}

const (
	keySep     = "\x1f"
	arrayTable = "\x00array" // the table path while inside [[…]]
)

func joinKey(parts ...string) string { return strings.Join(parts, keySep) }

// codexHome is $CODEX_HOME, or ~/.codex.
func codexHome(env []string) string {
	if h, ok := agentcli.LookupEnv(env, "CODEX_HOME"); ok && h != "" {
		return h
	}
	home, ok := agentcli.LookupEnv(env, "HOME")
	if !ok || home == "" {
		home, _ = os.UserHomeDir()
	}
	if home == "" {
		return ""
	}
	return filepath.Join(home, ".codex")
}

// maxConfig bounds how much of config.toml is read.
const maxConfig = 4 << 20

func loadUserConfig(env []string) *userConfig {
	c := &userConfig{values: map[string]string{}}
	home := codexHome(env)
	if home == "" {
		return c
	}
	c.path = filepath.Join(home, "config.toml")
	f, err := os.Open(c.path)
	if err != nil {
		return c
	}
	defer f.Close()
	data := make([]byte, maxConfig)
	n, _ := f.Read(data)
	c.found = true
	c.parse(data[:n])
	return c
}

// parse reads TOML lines into c.values; lines it does not understand are
// skipped, and a value spanning lines (a multi-line string or array) is
// skipped to its end.
func (c *userConfig) parse(data []byte) {
	var table []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), maxConfig)
	skipUntil := ""
	depth := 0
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if skipUntil != "" {
			if strings.Contains(line, skipUntil) {
				skipUntil = ""
			}
			continue
		}
		if depth > 0 {
			depth += strings.Count(line, "[") - strings.Count(line, "]")
			continue
		}
		line = stripComment(line)
		if line == "" {
			continue
		}
		if strings.HasPrefix(line, "[[") {
			table = []string{arrayTable} // arrays of tables are not read
			continue
		}
		if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") {
			table = splitKey(strings.TrimSpace(line[1 : len(line)-1]))
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		key := splitKey(strings.TrimSpace(k))
		v = strings.TrimSpace(v)
		switch {
		case strings.HasPrefix(v, `"""`) && !strings.Contains(v[3:], `"""`):
			skipUntil = `"""`
			continue
		case strings.HasPrefix(v, "'''") && !strings.Contains(v[3:], "'''"):
			skipUntil = "'''"
			continue
		case strings.HasPrefix(v, "["):
			if d := strings.Count(v, "[") - strings.Count(v, "]"); d > 0 {
				depth = d
				continue
			}
		}
		if len(key) == 0 || (len(table) > 0 && table[0] == arrayTable) {
			continue
		}
		c.values[joinKey(append(append([]string{}, table...), key...)...)] = tomlValue(v)
	}
}

// stripComment removes a # comment that is not inside a string.
func stripComment(line string) string {
	var quote byte
	for i := 0; i < len(line); i++ {
		ch := line[i]
		switch {
		case quote != 0:
			if ch == '\\' && quote == '"' {
				i++
			} else if ch == quote {
				quote = 0
			}
		case ch == '"' || ch == '\'':
			quote = ch
		case ch == '#':
			return strings.TrimSpace(line[:i])
		}
	}
	return line
}

// splitKey splits a dotted TOML key, honouring quoted parts.
func splitKey(s string) []string {
	var parts []string
	for s != "" {
		s = strings.TrimSpace(s)
		var part string
		switch {
		case strings.HasPrefix(s, `"`):
			end := closingQuote(s, '"')
			if end < 0 {
				return nil
			}
			if u, err := strconv.Unquote(s[:end+1]); err == nil {
				part = u
			} else {
				part = s[1:end]
			}
			s = s[end+1:]
		case strings.HasPrefix(s, "'"):
			end := strings.IndexByte(s[1:], '\'')
			if end < 0 {
				return nil
			}
			part, s = s[1:end+1], s[end+2:]
		default:
			i := strings.IndexByte(s, '.')
			if i < 0 {
				i = len(s)
			}
			part, s = strings.TrimSpace(s[:i]), s[i:]
		}
		parts = append(parts, part)
		s = strings.TrimSpace(s)
		if strings.HasPrefix(s, ".") {
			s = s[1:]
		} else if s != "" {
			return nil
		}
	}
	return parts
}

func closingQuote(s string, q byte) int {
	for i := 1; i < len(s); i++ {
		if s[i] == '\\' {
			i++
			continue
		}
		if s[i] == q {
			return i
		}
	}
	return -1
}

// tomlValue unquotes a single-line string value; anything else is kept as
// written.
func tomlValue(v string) string {
	switch {
	case strings.HasPrefix(v, `"`):
		if end := closingQuote(v, '"'); end > 0 {
			if u, err := strconv.Unquote(v[:end+1]); err == nil {
				return u
			}
			return v[1:end]
		}
	case strings.HasPrefix(v, "'"):
		if end := strings.IndexByte(v[1:], '\''); end >= 0 {
			return v[1 : end+1]
		}
	}
	return v
}

// argOverrides reads the -c/--config key=value and -p/--profile options
// in the user's extra arguments, which win over config.toml.
func argOverrides(args []string) (values map[string]string, profile string) {
	values = map[string]string{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		var kv string
		switch {
		case (a == "-c" || a == "--config") && i+1 < len(args):
			i++
			kv = args[i]
		case strings.HasPrefix(a, "--config="):
			kv = strings.TrimPrefix(a, "--config=")
		case strings.HasPrefix(a, "-c") && len(a) > 2:
			kv = a[2:]
		case (a == "-p" || a == "--profile") && i+1 < len(args):
			i++
			profile = args[i]
			continue
		case strings.HasPrefix(a, "--profile="):
			profile = strings.TrimPrefix(a, "--profile=")
			continue
		default:
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		if key := splitKey(strings.TrimSpace(k)); len(key) > 0 {
			values[joinKey(key...)] = tomlValue(strings.TrimSpace(v))
		}
	}
	return values, profile
}

// settings is the user's configuration with the argument overrides on top.
type settings struct {
	cfg       *userConfig
	overrides map[string]string
	profile   string
}

func newSettings(cfg *userConfig, args []string) settings {
	o, p := argOverrides(args)
	if p == "" {
		if v, ok := o[joinKey("profile")]; ok {
			p = v
		} else {
			p = cfg.values[joinKey("profile")]
		}
	}
	return settings{cfg: cfg, overrides: o, profile: p}
}

func (s settings) get(key ...string) (string, bool) {
	k := joinKey(key...)
	if v, ok := s.overrides[k]; ok {
		return v, true
	}
	v, ok := s.cfg.values[k]
	return v, ok
}

// hasTable reports whether any key lies under the table path.
func (s settings) hasTable(key ...string) bool {
	prefix := joinKey(key...) + keySep
	for _, m := range []map[string]string{s.overrides, s.cfg.values} {
		for k := range m {
			if strings.HasPrefix(k, prefix) {
				return true
			}
		}
	}
	return false
}

// modelProvider is the active model provider's id: -c model_provider, the
// profile's, config.toml's, or the built-in "openai".
func (s settings) modelProvider() string {
	if v, ok := s.overrides[joinKey("model_provider")]; ok {
		return v
	}
	if s.profile != "" {
		if v, ok := s.get("profiles", s.profile, "model_provider"); ok {
			return v
		}
	}
	if v, ok := s.cfg.values[joinKey("model_provider")]; ok {
		return v
	}
	return "openai"
}

// retryKeys returns the active provider's id and which of its retry keys
// the adapter should set: each one the user left unset, on a custom
// provider the user defined. Built-in providers (openai, ollama…) cannot be
// overridden with -c, so their retries stay the CLI's default.
func retryKeys(cfg *userConfig, args []string) (name string, keys []string) {
	s := newSettings(cfg, args)
	name = s.modelProvider()
	if !bareKey.MatchString(name) || !s.hasTable("model_providers", name) {
		return name, nil
	}
	for _, k := range []string{"request_max_retries", "stream_max_retries"} {
		if _, ok := s.get("model_providers", name, k); !ok {
			keys = append(keys, k)
		}
	}
	return name, keys
}

// describeEndpoint says where model requests go and which credential the
// CLI will use, never the credential itself.
func describeEndpoint(cfg *userConfig, args, env []string) (endpoint, credentials string) {
	s := newSettings(cfg, args)
	name := s.modelProvider()
	where := "config " + cfg.path
	if !cfg.found {
		where = "no config.toml at " + cfg.path
	}
	if s.hasTable("model_providers", name) {
		base, _ := s.get("model_providers", name, "base_url")
		if base == "" {
			base = "(no base_url)"
		}
		endpoint = "model_provider=" + name + " base_url=" + base + " (" + where + ")"
		if k, ok := s.get("model_providers", name, "env_key"); ok && k != "" {
			if v, ok := agentcli.LookupEnv(env, k); ok && v != "" {
				return endpoint, k + " set"
			}
			return endpoint, k + " not set"
		}
		if _, ok := s.get("model_providers", name, "experimental_bearer_token"); ok {
			return endpoint, "experimental_bearer_token in config"
		}
		return endpoint, "none configured for model_provider " + name
	}
	if name != "openai" {
		endpoint = "built-in model_provider=" + name + " (" + where + ")"
	} else if base, ok := s.get("openai_base_url"); ok && base != "" {
		endpoint = "openai_base_url=" + base + " (" + where + ")"
	} else {
		endpoint = "default (api.openai.com, built-in openai provider; " + where + ")"
	}
	for _, k := range []string{"CODEX_API_KEY", "OPENAI_API_KEY"} {
		if v, ok := agentcli.LookupEnv(env, k); ok && v != "" {
			return endpoint, k + " set"
		}
	}
	if cfg.path != "" {
		auth := filepath.Join(filepath.Dir(cfg.path), "auth.json")
		if _, err := os.Stat(auth); err == nil {
			return endpoint, auth + " present (codex login)"
		}
	}
	return endpoint, "none found"
}
