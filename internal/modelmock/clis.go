package modelmock

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// cliEnv names the environment variable that overrides each CLI's path.
var cliEnv = map[string]string{
	"claude":  "FLEET_TEST_CLAUDE_PATH",
	"codex":   "FLEET_TEST_CODEX_PATH",
	"copilot": "FLEET_TEST_COPILOT_PATH",
}

// installHint is how to get the CLIs the tests drive.
const installHint = "install them with scripts/install-agent-clis.sh"

// CLIPath finds an agent CLI ("claude", "codex" or "copilot") for tests:
// $FLEET_TEST_<NAME>_PATH when set, otherwise
// ~/.cache/agents-fleet/agent-clis/node_modules/.bin/<name>, where
// scripts/install-agent-clis.sh puts it.
func CLIPath(name string) (string, error) {
	env, ok := cliEnv[name]
	if !ok {
		return "", fmt.Errorf("modelmock: unknown agent CLI %q (want claude, codex or copilot)", name)
	}
	if p := os.Getenv(env); p != "" {
		if err := executable(p); err != nil {
			return "", fmt.Errorf("modelmock: %s=%s: %w", env, p, err)
		}
		return p, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("modelmock: %s not set and no home directory: %w", env, err)
	}
	p := filepath.Join(home, ".cache", "agents-fleet", "agent-clis", "node_modules", ".bin", name)
	if err := executable(p); err != nil {
		return "", fmt.Errorf("modelmock: %s CLI not found (%s not set; %w); %s", name, env, err, installHint)
	}
	return p, nil
}

func executable(p string) error {
	fi, err := os.Stat(p) // follows the node_modules/.bin symlink
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", p)
	}
	return nil
}

// RequireCLI returns CLIPath(name) for a test that needs that CLI. When the
// CLI is missing it fails the test under CI (CI set to anything but "",
// "0" or "false"), where the CLIs must have been installed, and skips it
// otherwise, naming the install script.
func RequireCLI(t testing.TB, name string) string {
	t.Helper()
	p, err := CLIPath(name)
	if err == nil {
		return p
	}
	switch os.Getenv("CI") {
	case "", "0", "false":
		t.Skipf("%v (install: scripts/install-agent-clis.sh)", err)
	default:
		t.Fatalf("%v; CI is set, so the CLI tests must run: run scripts/install-agent-clis.sh first", err)
	}
	return ""
}
