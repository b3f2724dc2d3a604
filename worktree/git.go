package worktree

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strings"
	"time"
)

// maxStderr bounds how much of git's stderr an error carries.
const maxStderr = 2 << 10

// waitDelay bounds how long a cancelled git may keep its pipes open (a
// credential helper or hook that outlives it) before Wait gives up on them.
const waitDelay = 2 * time.Second

// GitError is a git invocation that failed. Its message names the command
// and carries git's stderr, trimmed and bounded; Unwrap gives the exec error
// (*exec.ExitError, or *exec.Error when git could not be started).
type GitError struct {
	Args   []string // arguments after "git"
	Stderr string   // trimmed, at most ~2 KiB
	Err    error
}

func (e *GitError) Error() string {
	var b strings.Builder
	b.WriteString("git ")
	b.WriteString(strings.Join(e.Args, " "))
	b.WriteString(": ")
	if e.Stderr != "" {
		b.WriteString(e.Stderr)
		b.WriteString(" (")
		b.WriteString(e.Err.Error())
		b.WriteString(")")
	} else {
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

func (e *GitError) Unwrap() error { return e.Err }

// notFound reports whether err says that git itself could not be started.
func notFound(err error) bool {
	var ee *exec.Error
	return errors.As(err, &ee)
}

// cappedBuffer keeps the first max bytes written to it and drops the rest,
// so a chatty git cannot grow an error without bound.
type cappedBuffer struct {
	buf       bytes.Buffer
	max       int
	truncated bool
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	if room := c.max - c.buf.Len(); room > 0 {
		if len(p) > room {
			c.buf.Write(p[:room])
			c.truncated = true
		} else {
			c.buf.Write(p)
		}
	} else if len(p) > 0 {
		c.truncated = true
	}
	return len(p), nil
}

func (c *cappedBuffer) String() string {
	s := strings.TrimSpace(c.buf.String())
	if c.truncated {
		s += " …"
	}
	return s
}

// scrubbedEnv lists variables that would point git at another repository,
// index or object store than the directory it runs in. A fleet started from
// a git hook or an alias inherits them; they must never leak into the
// worktree commands.
var scrubbedEnv = map[string]bool{
	"GIT_DIR":                          true,
	"GIT_WORK_TREE":                    true,
	"GIT_INDEX_FILE":                   true,
	"GIT_COMMON_DIR":                   true,
	"GIT_OBJECT_DIRECTORY":             true,
	"GIT_ALTERNATE_OBJECT_DIRECTORIES": true,
	"GIT_NAMESPACE":                    true,
	"GIT_PREFIX":                       true,
	"GIT_QUARANTINE_PATH":              true,
	"GIT_TERMINAL_PROMPT":              true,
	"GIT_OPTIONAL_LOCKS":               true,
	"GIT_PAGER":                        true,
	"LC_ALL":                           true,
	"LANG":                             true,
	"LANGUAGE":                         true,
}

// gitEnv is the environment every git command runs with: the process's,
// without the variables above, never prompting, never paging (fleet diff
// writes to a terminal itself), in the C locale (messages are matched, so
// they must be English).
func gitEnv() []string {
	env := os.Environ()
	out := make([]string, 0, len(env)+2)
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if runtime.GOOS == "windows" {
			k = strings.ToUpper(k)
		}
		if !scrubbedEnv[k] {
			out = append(out, kv)
		}
	}
	return append(out, "GIT_TERMINAL_PROMPT=0", "GIT_PAGER=cat", "LC_ALL=C")
}

// runGit runs git with args in dir and returns its stdout. The caller's
// context bounds it. A failure is a *GitError; a cancelled or expired
// context is reported as such (wrapping ctx.Err()).
func runGit(ctx context.Context, dir string, args ...string) ([]byte, error) {
	return runGitWith(ctx, dir, gitRun{}, args...)
}

// gitRun is what an invocation needs beyond runGit's defaults.
type gitRun struct {
	env    []string  // extra variables, taking precedence over gitEnv's
	stdin  io.Reader // nil: no input
	stdout io.Writer // when set, stdout streams there and runGitWith returns none of it
	max    int       // with stdout unset and max > 0, more than max bytes of output is errTooMuchOutput
}

// errTooMuchOutput: git wrote more than the caller can hold.
var errTooMuchOutput = errors.New("git output exceeds the limit")

// runGitWith is runGit with extra environment, input, a streaming output
// or an output bound.
func runGitWith(ctx context.Context, dir string, r gitRun, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	cmd.Env = append(gitEnv(), r.env...)
	cmd.WaitDelay = waitDelay
	cmd.Stdin = r.stdin
	var stdout bytes.Buffer
	var limit *limitWriter
	switch {
	case r.stdout != nil:
		cmd.Stdout = r.stdout
	case r.max > 0:
		limit = &limitWriter{w: &stdout, n: r.max}
		cmd.Stdout = limit
	default:
		cmd.Stdout = &stdout
	}
	stderr := &cappedBuffer{max: maxStderr}
	cmd.Stderr = stderr
	err := cmd.Run()
	if ctxErr := ctx.Err(); err != nil && ctxErr != nil {
		return nil, fmt.Errorf("git %s: %w", strings.Join(args, " "), ctxErr)
	}
	if limit != nil && limit.over {
		// The closed pipe may have killed git; either way the output is incomplete.
		return nil, fmt.Errorf("git %s: %w (%d bytes)", strings.Join(args, " "), errTooMuchOutput, r.max)
	}
	if err != nil {
		return stdout.Bytes(), &GitError{Args: args, Stderr: stderr.String(), Err: err}
	}
	return stdout.Bytes(), nil
}

// limitWriter passes on at most n bytes, then fails every write.
type limitWriter struct {
	w    io.Writer
	n    int
	over bool
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if len(p) > l.n {
		l.over = true
		return 0, errTooMuchOutput
	}
	l.n -= len(p)
	return l.w.Write(p)
}

// fieldWriter splits a stream into fields ended by sep and hands each to fn
// as it completes, so long output is parsed in constant memory. A field
// longer than max is an error. Call flush after the stream ends for a last
// field without a separator.
type fieldWriter struct {
	sep byte
	max int
	fn  func(field string) error
	buf []byte
	err error
}

func (f *fieldWriter) Write(p []byte) (int, error) {
	if f.err != nil {
		return 0, f.err
	}
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, f.sep)
		if i < 0 {
			f.buf = append(f.buf, p...)
			if len(f.buf) > f.max {
				f.err = fmt.Errorf("git output field over %d bytes", f.max)
				return 0, f.err
			}
			return n, nil
		}
		f.buf = append(f.buf, p[:i]...)
		p = p[i+1:]
		if len(f.buf) > f.max {
			f.err = fmt.Errorf("git output field over %d bytes", f.max)
			return 0, f.err
		}
		if err := f.fn(string(f.buf)); err != nil {
			f.err = err
			return 0, err
		}
		f.buf = f.buf[:0]
	}
	return n, nil
}

// flush hands on a last unterminated field and returns the first error.
func (f *fieldWriter) flush() error {
	if f.err == nil && len(f.buf) > 0 {
		f.err = f.fn(string(f.buf))
		f.buf = nil
	}
	return f.err
}

// gitFields runs git and hands each sep-ended field of its stdout to fn.
// A failure of fn or of the parse wins over git's own exit, which a closed
// pipe caused.
func gitFields(ctx context.Context, dir string, sep byte, fn func(string) error, args ...string) error {
	fw := &fieldWriter{sep: sep, max: maxField, fn: fn}
	_, err := runGitWith(ctx, dir, gitRun{stdout: fw}, args...)
	if ferr := fw.flush(); ferr != nil && ctx.Err() == nil {
		return fmt.Errorf("git %s: %w", strings.Join(args, " "), ferr)
	}
	return err
}

// maxField bounds one record of git output (a path, a status line).
const maxField = 64 << 10

// gitLine runs git and returns its stdout trimmed of surrounding space.
func gitLine(ctx context.Context, dir string, args ...string) (string, error) {
	out, err := runGit(ctx, dir, args...)
	return strings.TrimSpace(string(out)), err
}

// exitCode returns git's exit status, or -1 when err is not an exit.
func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// transient reports whether err is git losing a race against a concurrent
// command in the same repository, which a retry resolves: a lock file
// (index.lock, config.lock, a ref lock) held by the other command, or
// another worktree's administrative directory read while `worktree add` is
// still writing it.
func transient(err error) bool {
	var ge *GitError
	if !errors.As(err, &ge) {
		return false
	}
	s := strings.ToLower(ge.Stderr)
	for _, m := range []string{"could not lock", "cannot lock", "unable to lock", ".lock'"} {
		if strings.Contains(s, m) {
			return true
		}
	}
	return strings.Contains(s, "worktrees/") && (strings.Contains(s, "failed to read") || strings.Contains(s, "no such file"))
}

// retryLocked runs f until it succeeds, fails for a reason that is not
// transient, or has been tried attempts times, backing off 25 ms, 50 ms,
// 100 ms … between tries.
func retryLocked(ctx context.Context, attempts int, f func() error) error {
	delay := 25 * time.Millisecond
	for i := 1; ; i++ {
		err := f()
		if err == nil || i >= attempts || !transient(err) {
			return err
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (gave up retrying: %w)", err, ctx.Err())
		case <-t.C:
		}
		delay *= 2
	}
}

var (
	workerRE  = regexp.MustCompile(`^[a-z0-9-]{1,64}$`)
	sessionRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
)

// ValidWorker reports whether name is a usable worker name: 1–64 of
// [a-z0-9-]. Such a name is one path element and one ref component, so it
// can never escape the session's directory or branch namespace.
func ValidWorker(name string) error {
	if !workerRE.MatchString(name) {
		return fmt.Errorf("invalid worker name %q: want 1-64 of [a-z0-9-]", name)
	}
	return nil
}

// ValidSession reports whether name is a usable session name: 1–128 of
// [A-Za-z0-9._-], starting with a letter or digit, without "..", not ending
// in "." or ".lock" (git's ref rules).
func ValidSession(name string) error {
	if !sessionRE.MatchString(name) || strings.Contains(name, "..") ||
		strings.HasSuffix(name, ".") || strings.HasSuffix(name, ".lock") {
		return fmt.Errorf("invalid session name %q: want 1-128 of [A-Za-z0-9._-], starting with a letter or digit, no \"..\", not ending in \".\" or \".lock\"", name)
	}
	return nil
}
