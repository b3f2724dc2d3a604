// Package agentcli is what the agent CLI adapters (claude, codex, copilot)
// share about running a CLI:
//
//   - CLI (embedded in each adapter's Provider): the CLI's description and
//     the user's settings; its environment, finding its binary the way the
//     CLI's own environment would (Find), `--version` (Probe).
//   - Start and Proc: a local CLI with its three pipes, in a process group
//     of its own, its environment marked so that Kill ends its whole tree.
//   - Conn: a session's hold on a running CLI: reaping it, the tail of its
//     stderr, its stdout as bounded lines (Read), its stdin with write
//     deadlines (Writer), how it ended (ExitText, Stopped).
//   - Prompts: a session's questions for the operator, each on a goroutine
//     of its own, withdrawable by the CLI.
//
// A Conn runs over any Process, not only a local Proc: a session kind that
// runs the CLI on another machine gives the CLI a Launcher that returns
// the remote process's pipes, and every adapter runs on them unchanged.
// The JSON-RPC 2.0 client that codex and copilot speak over a Conn is in
// the jsonrpc subpackage; agentclitest has what the adapters' tests share.
package agentcli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

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

// Version runs `path --version` with env, bounded by timeout, and returns
// what it printed on stdout, trimmed. A failure carries the CLI's own
// words (the end of its stderr, or of its stdout).
func Version(ctx context.Context, path string, env []string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "--version")
	cmd.Env = env
	cmd.WaitDelay = time.Second
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("timed out after %v", timeout)
		}
		msg := strings.TrimSpace(errOut.String())
		if msg == "" {
			msg = strings.TrimSpace(out.String())
		}
		if len(msg) > 500 {
			msg = "…" + msg[len(msg)-500:]
		}
		if msg != "" {
			err = fmt.Errorf("%w: %s", err, strings.Join(strings.Fields(msg), " "))
		}
		return "", fmt.Errorf("%s --version failed: %w", path, err)
	}
	return strings.TrimSpace(out.String()), nil
}
