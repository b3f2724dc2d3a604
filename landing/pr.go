package landing

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/agents-fleet/fleet/worktree"
)

// PROptions configure PR.
type PROptions struct {
	Draft  bool
	Remote string // default "origin"
	// Hook, when set (config.json landing.prCommand), is run with sh -c
	// after the push instead of gh, with the pull request's fields in the
	// environment (FLEET_PR_*).
	Hook string
	Out  io.Writer // what PR did and what gh or the hook printed
	Env  []string  // environment for gh and the hook; default os.Environ()
}

// ghTimeout bounds one gh or hook run.
const ghTimeout = 2 * time.Minute

// maxBody bounds the pull request's body.
const maxBody = 16 << 10

// PR hands w's work on as a pull request: it commits what the worktree
// has uncommitted, and when gh is installed and authenticated it pushes the
// branch and runs gh pr create (title and body from the task and the diff
// stat). With a hook configured it pushes and runs the hook instead. With
// neither it changes nothing and prints the exact commands to run.
func PR(ctx context.Context, w Worker, o PROptions) error {
	if o.Remote == "" {
		o.Remote = "origin"
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Env == nil {
		o.Env = os.Environ()
	}
	committed, err := commitPending(ctx, w, "fleet pr")
	if err != nil {
		return err
	}
	if committed {
		fmt.Fprintf(o.Out, "Committed %s's uncommitted changes on %s first.\n", w.Name, w.Branch)
	}
	st, err := worktree.ReadState(ctx, w.Repo, w.Branch, w.Path)
	if err != nil {
		return fmt.Errorf("read %s's state: %w", w.Name, err)
	}
	if st.Ahead == 0 {
		return fmt.Errorf("%s has nothing to hand on: %s has no commits that %s lacks", w.Name, w.Branch, orUnknown(st.BaseBranch))
	}
	base := st.BaseBranch
	title, body, err := prText(ctx, w, st)
	if err != nil {
		return err
	}
	args := []string{"pr", "create", "--head", w.Branch, "--title", title, "--body", body}
	if base != "" {
		args = append(args, "--base", base)
	}
	if o.Draft {
		args = append(args, "--draft")
	}
	if _, err := worktree.RemoteURL(ctx, w.Repo, o.Remote); err != nil {
		return fmt.Errorf("%s has no remote %q to push %s to (git remote add %s URL, or --remote NAME): %w", w.Repo, o.Remote, w.Branch, o.Remote, err)
	}
	push := []string{"git", "-C", w.Repo, "push", "--set-upstream", o.Remote, w.Branch}

	if o.Hook == "" {
		if why := ghUnusable(ctx, w.Repo, o.Env); why != "" {
			fmt.Fprintf(o.Out, "%s, so nothing was pushed. To open the pull request yourself, run:\n\n  %s\n  %s\n",
				why, shellJoin(push), shellJoin(append([]string{"gh"}, args...)))
			return nil
		}
	}
	if err := worktree.Push(ctx, w.Repo, o.Remote, w.Branch); err != nil {
		return fmt.Errorf("push %s to %s: %w", w.Branch, o.Remote, err)
	}
	fmt.Fprintf(o.Out, "Pushed %s to %s.\n", w.Branch, o.Remote)
	hctx, cancel := context.WithTimeout(ctx, ghTimeout)
	defer cancel()
	var cmd *exec.Cmd
	if o.Hook != "" {
		cmd = exec.CommandContext(hctx, "sh", "-c", o.Hook)
		draft := "0"
		if o.Draft {
			draft = "1"
		}
		cmd.Env = append(o.Env, "FLEET_PR_BRANCH="+w.Branch, "FLEET_PR_BASE="+base, "FLEET_PR_REMOTE="+o.Remote,
			"FLEET_PR_TITLE="+title, "FLEET_PR_BODY="+body, "FLEET_PR_DRAFT="+draft,
			"FLEET_WORKER="+w.Name, "FLEET_SESSION="+w.Session)
	} else {
		cmd = exec.CommandContext(hctx, "gh", args...)
		cmd.Env = o.Env
	}
	cmd.Dir = w.Repo
	cmd.Stdout, cmd.Stderr = o.Out, o.Out
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Run(); err != nil {
		what := "gh pr create"
		if o.Hook != "" {
			what = "the pull request hook (landing.prCommand)"
		}
		return fmt.Errorf("%s failed: %w (the branch is pushed; run it again or open the pull request by hand)", what, err)
	}
	return nil
}

// ghUnusable says why gh cannot open the pull request, "" when it can.
func ghUnusable(ctx context.Context, repo string, env []string) string {
	if _, err := exec.LookPath("gh"); err != nil {
		return "gh is not installed"
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, "gh", "auth", "status")
	cmd.Dir, cmd.Env = repo, env
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		return "gh is not authenticated (gh auth login)"
	}
	return ""
}

// prText is the pull request's title (the task) and body (the task, the
// diff stat and where it came from).
func prText(ctx context.Context, w Worker, st worktree.State) (title, body string, err error) {
	id, text := taskOf(w.Task)
	title = subject(id, text)
	var stat bytes.Buffer
	if err := worktree.Diff(ctx, &stat, w.Repo, w.Branch, w.Path, worktree.DiffOptions{Stat: true}); err != nil {
		return "", "", fmt.Errorf("diff stat of %s: %w", w.Name, err)
	}
	var b strings.Builder
	if strings.TrimSpace(text) != "" {
		b.WriteString(truncate(strings.TrimSpace(text), maxTaskBody) + "\n\n")
	}
	b.WriteString("```\n" + truncate(strings.TrimRight(stat.String(), "\n"), maxBody/2) + "\n```\n\n")
	fmt.Fprintf(&b, "Opened by agents-fleet from worker %s (session %s), branch `%s`.\n", w.Name, w.Session, w.Branch)
	return title, truncate(b.String(), maxBody), nil
}

func orUnknown(s string) string {
	if s == "" {
		return "its base"
	}
	return s
}

// shellJoin quotes args for a POSIX shell, so a printed command can be
// pasted as is.
func shellJoin(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if a != "" && strings.IndexFunc(a, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:@%+,", r))
		}) < 0 {
			q[i] = a
			continue
		}
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}
