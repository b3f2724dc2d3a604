package gitmove

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
)

// keptEnv are the only variables of the process git sees: it finds git's
// helpers on PATH and its temporary files in TMPDIR. Nothing else, so no
// GIT_DIR, GIT_INDEX_FILE, GIT_CONFIG_PARAMETERS or alternates of a fleet
// started from a hook or an alias can steer it.
var keptEnv = []string{"PATH", "TMPDIR", "SYSTEMROOT"}

// fixedEnv is the rest of git's environment: no system or global
// configuration, attributes or replace refs (the user's repository's own
// config still applies), never a prompt, messages in English (some are
// matched).
var fixedEnv = []string{
	"GIT_CONFIG_NOSYSTEM=1",
	"GIT_CONFIG_GLOBAL=" + os.DevNull,
	"GIT_ATTR_NOSYSTEM=1",
	"GIT_NO_REPLACE_OBJECTS=1",
	"GIT_TERMINAL_PROMPT=0",
	"LC_ALL=C",
}

// safeConfig precedes every command, overriding what the repository's
// config says: no hooks (reference-transaction, post-checkout), no
// fsmonitor daemon, no background maintenance or gc, no submodule
// recursion, and no transport but local files (bundles).
var safeConfig = []string{
	"-c", "core.hooksPath=" + os.DevNull,
	"-c", "core.fsmonitor=false",
	"-c", "gc.auto=0",
	"-c", "maintenance.auto=false",
	"-c", "submodule.recurse=false",
	"-c", "fetch.recurseSubmodules=false",
	"-c", "fetch.writeCommitGraph=false",
	"-c", "protocol.allow=never",
	"-c", "protocol.file.allow=always",
}

func gitEnv() []string {
	env := append([]string(nil), fixedEnv...)
	for _, k := range keptEnv {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// maxOutput bounds the stdout of a git command that is read into memory
// (a ref, a list of heads); more is an error, not an allocation.
const maxOutput = 1 << 20

// stderrTail is how much of git's stderr an error carries: the end, where
// git puts its fatal reason.
const stderrTail = 2 << 10

// cmdWaitDelay bounds how long a killed git may keep its pipes open.
const cmdWaitDelay = 2 * time.Second

// gitCmd is one git invocation.
type gitCmd struct {
	dir   string
	args  []string  // after safeConfig
	stdin io.Reader // nil: none
	// out receives stdout when set; otherwise at most maxOutput bytes are
	// returned.
	out io.Writer
}

// run runs c bounded by lim.GitTimeout and ctx. A failure names the
// command and carries the tail of git's stderr.
func (l Limits) run(ctx context.Context, c gitCmd) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, l.gitTimeout())
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", append(append([]string(nil), safeConfig...), c.args...)...)
	cmd.Dir = c.dir
	cmd.Env = gitEnv()
	cmd.Stdin = c.stdin
	cmd.WaitDelay = cmdWaitDelay
	var stdout bytes.Buffer
	capped := &capWriter{w: &stdout, n: maxOutput}
	if c.out != nil {
		cmd.Stdout = c.out
	} else {
		cmd.Stdout = capped
	}
	stderr := &tailBuffer{max: stderrTail}
	cmd.Stderr = stderr
	err := cmd.Run()
	name := "git " + strings.Join(c.args, " ")
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, fmt.Errorf("%s: %w", name, ctx.Err())
	case capped.over:
		return nil, fmt.Errorf("%s: output over %d bytes", name, maxOutput)
	case err != nil && stderr.Len() > 0:
		return stdout.Bytes(), fmt.Errorf("%s: %s (%w)", name, stderr, err)
	case err != nil:
		return stdout.Bytes(), fmt.Errorf("%s: %w", name, err)
	}
	return stdout.Bytes(), nil
}

// git runs git args in dir and returns its stdout, trimmed.
func (l Limits) git(ctx context.Context, dir string, args ...string) (string, error) {
	out, err := l.run(ctx, gitCmd{dir: dir, args: args})
	return strings.TrimSpace(string(out)), err
}

// exitedWith reports whether err is git exiting with status code: how
// rev-parse --verify and merge-base --is-ancestor answer "no".
func exitedWith(err error, code int) bool {
	var ee *exec.ExitError
	return errors.As(err, &ee) && ee.ExitCode() == code
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	buf []byte
	max int
	cut bool
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
		t.cut = true
	}
	return len(p), nil
}

func (t *tailBuffer) Len() int { return len(strings.TrimSpace(string(t.buf))) }

func (t *tailBuffer) String() string {
	s := strings.Join(strings.Fields(string(t.buf)), " ")
	if t.cut {
		s = "… " + s
	}
	return s
}

// capWriter passes on at most n bytes; a write past that fails and marks
// it over, so git stops on a broken pipe.
type capWriter struct {
	w    io.Writer
	n    int64
	over bool
}

func (c *capWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > c.n {
		c.over = true
		return 0, ErrTooLarge
	}
	c.n -= int64(len(p))
	return c.w.Write(p)
}
