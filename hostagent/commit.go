package hostagent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// keptGitEnv are the GIT_ variables of the host's environment its commits
// honour: who commits, and where git's configuration is. Any other (a
// GIT_DIR or GIT_INDEX_FILE of a shell that started the host) could point
// git at another repository.
var keptGitEnv = map[string]bool{
	"GIT_AUTHOR_NAME": true, "GIT_AUTHOR_EMAIL": true,
	"GIT_COMMITTER_NAME": true, "GIT_COMMITTER_EMAIL": true,
	"GIT_CONFIG_GLOBAL": true, "GIT_CONFIG_NOSYSTEM": true, "GIT_CONFIG_SYSTEM": true,
}

// commitEnv is the environment of the host's own git commands in a
// worker's worktree: env (the host's) without the GIT_ variables that
// could steer git elsewhere, never prompting, messages in English.
func commitEnv(env []string) []string {
	out := make([]string, 0, len(env)+2)
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(k, "GIT_") && !keptGitEnv[k]:
		case k == "LC_ALL" || k == "LANG" || k == "LANGUAGE":
		default:
			out = append(out, kv)
		}
	}
	return append(out, "GIT_TERMINAL_PROMPT=0", "LC_ALL=C")
}

// gitConfig precedes each of the host's git commands in a worktree: no
// hooks, no signing prompt, nothing in the background.
var gitConfig = []string{
	"-c", "core.hooksPath=" + os.DevNull,
	"-c", "core.fsmonitor=false",
	"-c", "commit.gpgSign=false",
	"-c", "gc.auto=0",
	"-c", "maintenance.auto=false",
}

// committer is who commits a worker's work on the host.
type committer struct {
	env []string // commitEnv of the host's environment
	// name and email are used when the host's git has no identity of its
	// own ("agents-fleet host <name>" <fleet@localhost>).
	name, email string
}

// commit commits every change in the worktree dir (git add -A, then a
// commit without hooks) with message, and returns the worktree's HEAD:
// the new commit, or the old one when there was nothing to commit.
func (c committer) commit(ctx context.Context, dir, message string) (string, error) {
	fail := func(err error) (string, error) { return "", fmt.Errorf("commit the work in %s: %w", dir, err) }
	if _, err := c.git(ctx, dir, nil, nil, "add", "-A"); err != nil {
		return fail(err)
	}
	_, err := c.git(ctx, dir, nil, nil, "diff", "--cached", "--quiet", "--ignore-submodules=none")
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee) && ee.ExitCode() == 1:
		if _, err := c.git(ctx, dir, c.identity(ctx, dir), strings.NewReader(message),
			"commit", "--no-verify", "--quiet", "--file=-"); err != nil {
			return fail(err)
		}
	case err != nil:
		return fail(err)
	}
	head, err := c.git(ctx, dir, nil, nil, "rev-parse", "--verify", "HEAD")
	if err != nil {
		return fail(err)
	}
	return head, nil
}

// resetTo makes the worktree dir show commit and nothing else (tracked
// changes undone, untracked files removed; ignored ones, such as build
// output, kept), when it does not already: a worker claimed again starts
// where the fleet says, not where a killed turn left it. It reports
// whether it had to.
func (c committer) resetTo(ctx context.Context, dir, commit string) (bool, error) {
	head, err := c.git(ctx, dir, nil, nil, "rev-parse", "--verify", "HEAD")
	if err != nil {
		return false, fmt.Errorf("worktree %s: %w", dir, err)
	}
	status, err := c.git(ctx, dir, nil, nil, "status", "--porcelain=v1", "--untracked-files=all")
	if err != nil {
		return false, fmt.Errorf("worktree %s: %w", dir, err)
	}
	if head == commit && status == "" {
		return false, nil
	}
	if _, err := c.git(ctx, dir, nil, nil, "reset", "--hard", "--quiet", commit); err != nil {
		return false, fmt.Errorf("worktree %s: %w", dir, err)
	}
	if _, err := c.git(ctx, dir, nil, nil, "clean", "-d", "-f", "--quiet"); err != nil {
		return false, fmt.Errorf("worktree %s: %w", dir, err)
	}
	return true, nil
}

// identity is the environment that gives a commit in dir an author and a
// committer: none for what the host's git has configured, the fallback for
// what it does not.
func (c committer) identity(ctx context.Context, dir string) []string {
	var env []string
	for _, who := range []string{"AUTHOR", "COMMITTER"} {
		if _, err := c.git(ctx, dir, nil, nil, "var", "GIT_"+who+"_IDENT"); err != nil {
			env = append(env, "GIT_"+who+"_NAME="+c.name, "GIT_"+who+"_EMAIL="+c.email)
		}
	}
	return env
}

// gitWaitDelay bounds how long a killed git may keep its pipes open.
const gitWaitDelay = 2 * time.Second

// maxGitOutput bounds what is kept of a git command's output.
const maxGitOutput = 4 << 10

// git runs git args in dir with the extra environment env and input in,
// and returns its trimmed stdout. An error carries git's stderr and wraps
// the *exec.ExitError.
func (c committer) git(ctx context.Context, dir string, env []string, in *strings.Reader, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append(append([]string(nil), gitConfig...), args...)...)
	cmd.Dir = dir
	cmd.Env = append(append([]string(nil), c.env...), env...)
	cmd.WaitDelay = gitWaitDelay
	if in != nil {
		cmd.Stdin = in
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &capped{&stdout}, &capped{&stderr}
	err := cmd.Run()
	if err != nil {
		if ctx.Err() != nil {
			return "", fmt.Errorf("git %s: %w", args[0], ctx.Err())
		}
		return "", fmt.Errorf("git %s: %s (%w)", args[0], strings.TrimSpace(stderr.String()), err)
	}
	return strings.TrimSpace(stdout.String()), nil
}

// capped keeps the first maxGitOutput bytes written to it and takes the
// rest without keeping it (git is not stopped by a broken pipe).
type capped struct{ b *bytes.Buffer }

func (c *capped) Write(p []byte) (int, error) {
	if room := maxGitOutput - c.b.Len(); room > 0 {
		c.b.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}
