// Package agentcli holds what the agent CLI adapters (claude, codex,
// copilot) share about starting a CLI: finding its binary the way the CLI's
// own environment would, and building that environment.
package agentcli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/agents-fleet/fleet/provider"
)

// LookupEnv returns the last value of name in env, as exec does.
func LookupEnv(env []string, name string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == name {
			return v, true
		}
	}
	return "", false
}

// WithDefaults returns env with each NAME=value of defaults appended when
// env does not set NAME: a user's own setting (a retry bound, say) wins.
func WithDefaults(env []string, defaults ...string) []string {
	for _, kv := range defaults {
		name, _, _ := strings.Cut(kv, "=")
		if _, ok := LookupEnv(env, name); !ok {
			env = append(env, kv)
		}
	}
	return env
}

// Find resolves a CLI binary: path when set (a file path, or a name looked
// up in PATH), else command, looked up in env's PATH (this process's when
// env has none). A CLI that is not there is missing, with Command set to
// what was looked for.
func Find(path, command string, env []string, missing provider.MissingCLIError) (string, error) {
	want := path
	if want == "" {
		want = command
	}
	missing.Command = want
	if strings.ContainsRune(want, filepath.Separator) {
		abs, err := filepath.Abs(want)
		if err != nil || executable(abs) != nil {
			return "", &missing
		}
		return abs, nil
	}
	pathVar, ok := LookupEnv(env, "PATH")
	if !ok {
		pathVar = os.Getenv("PATH")
	}
	for _, dir := range filepath.SplitList(pathVar) {
		if dir == "" {
			dir = "."
		}
		if p := filepath.Join(dir, want); executable(p) == nil {
			if abs, err := filepath.Abs(p); err == nil {
				return abs, nil
			}
			return p, nil
		}
	}
	return "", &missing
}

var errNotExecutable = errors.New("not an executable file")

func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s: %w", p, errNotExecutable)
	}
	return nil
}
