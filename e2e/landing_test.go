package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/e2e/e2etest"
	"github.com/agents-fleet/fleet/internal/modelmock"
	"github.com/agents-fleet/fleet/protocol"
	"github.com/creack/pty"
)

// gitIn runs git in dir and returns its trimmed output.
func gitIn(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.email=t@example.com", "-c", "user.name=t"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// treeState is everything about the user's repository that a refused
// landing must leave as it was.
func treeState(t testing.TB, dir string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString(gitIn(t, dir, "rev-parse", "HEAD") + "\n")
	b.WriteString(gitIn(t, dir, "status", "--porcelain=v1", "--untracked-files=all") + "\n")
	b.WriteString(gitIn(t, dir, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads/") + "\n")
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if !d.IsDir() {
			c, _ := os.ReadFile(p)
			b.WriteString(p + "\x00" + string(c) + "\x00")
		}
		return nil
	})
	return b.String()
}

func replyWith(prefix string) func(protocol.Message) bool {
	return func(m protocol.Message) bool {
		r, ok := m.(*protocol.Reply)
		return ok && strings.HasPrefix(r.Text, prefix)
	}
}

// The walk-through with the local provider: review each worker's
// diff, merge one, refuse a conflicting one (the tree byte-identical),
// apply part of another, squash one from the console, open a PR for one
// (fake gh), then try every clean-up on what was not merged.
func TestLandingWorkersWork(t *testing.T) {
	e := e2etest.NewEnv(t)
	e.GitRepo()
	repo := e.Dir
	// A remote for fleet pr, and a fake gh that records its arguments.
	remote := filepath.Join(t.TempDir(), "remote.git")
	gitIn(t, repo, "init", "-q", "--bare", remote)
	gitIn(t, repo, "remote", "add", "origin", remote)
	ghDir := t.TempDir()
	ghLog := filepath.Join(ghDir, "gh.log")
	os.WriteFile(filepath.Join(ghDir, "gh"), []byte("#!/bin/sh\nprintf '%s\\n' \"$@\" >> "+ghLog+"\necho ---- >> "+ghLog+
		"\n[ \"$1\" = pr ] && echo https://example.test/pull/7\nexit 0\n"), 0o755)
	t.Setenv("PATH", ghDir+string(os.PathListSeparator)+os.Getenv("PATH"))

	d := e.Start("--control-socket", "--workers", "6")
	c := d.Dial(protocol.ClientREPL, "review")
	session := c.Welcome().SessionID
	s := e2etest.Watch(t, c)
	s.WaitFor("replayEnd", e2etest.IsType(protocol.TypeReplayEnd))
	c.Prompt("$ echo one > one.txt\n$ printf 'hello from w2\\n' > README\n$ echo three > three.txt; echo extra > extra.txt\n$ echo four > four.txt\n$ echo five > five.txt\n$ echo six > six.txt")
	// One snapshot with all six settled (so their worktrees are released)
	// and their git states read. The local provider does not commit on
	// settle by default: the work shows as uncommitted, and it merges
	// cleanly.
	workers := []string{"w1", "w2", "w3", "w4", "w5", "w6"}
	fs := s.WaitLong("all six settled with their git states", func(m protocol.Message) bool {
		fs, ok := m.(*protocol.FleetState)
		if !ok {
			return false
		}
		ready := 0
		for _, w := range fs.Workers {
			if slices.Contains(workers, w.ID) && w.Status == protocol.WorkerCompleted &&
				w.Git != nil && w.Git.FilesChanged > 0 && w.Git.Mergeable != nil {
				ready++
			}
		}
		return ready == len(workers)
	}).(*protocol.FleetState)
	for _, w := range fs.Workers {
		g := w.Git
		if g.Branch != "fleet/"+session+"/"+w.ID || g.BaseBranch != "main" || g.Uncommitted == 0 || !*g.Mergeable || g.Merged {
			t.Fatalf("%s: %+v", w.ID, g)
		}
	}

	// Review.
	out, _, code := e.Fleet("", "diff", "w1")
	if code != 0 || !strings.Contains(out, "+one") || strings.Contains(out, "\x1b[") {
		t.Fatalf("fleet diff w1 (%d): %s", code, out)
	}
	out, _, _ = e.Fleet("", "diff", "w3", "--stat")
	if !strings.Contains(out, "three.txt") || !strings.Contains(out, "extra.txt") || strings.Contains(out, "+three") {
		t.Fatalf("fleet diff --stat: %s", out)
	}
	out, _, _ = e.Fleet("", "diff", "w3", "extra.txt")
	if !strings.Contains(out, "+extra") || strings.Contains(out, "three") {
		t.Fatalf("fleet diff by path: %s", out)
	}

	// Merge w1 from the command line: a merge commit on main, the user's
	// checked-out tree moved forward, w1 shown as merged.
	out, errOut, code := e.Fleet("", "merge", "w1")
	if code != 0 || !strings.Contains(out, "Merged w1") {
		t.Fatalf("fleet merge w1 (%d): %s%s", code, out, errOut)
	}
	if got, _ := os.ReadFile(filepath.Join(repo, "one.txt")); string(got) != "one\n" {
		t.Fatalf("one.txt in the repository: %q", got)
	}
	if parents := strings.Fields(gitIn(t, repo, "log", "-1", "--format=%P", "main")); len(parents) != 2 {
		t.Fatalf("not a merge commit: parents %v", parents)
	}
	e2etest.GitOf(s, "w1 merged", "w1", func(g *protocol.WorkerGit) bool { return g.Merged && g.MergedInto == "main" })
	// A merged worker's commits and change can still be reviewed.
	if out, _, _ := e.Fleet("", "log", "w1"); !strings.Contains(out, "t1: echo one > one.txt") || !strings.Contains(out, "one.txt | 1 +") {
		t.Fatalf("fleet log of a merged worker: %s", out)
	}
	if out, _, _ := e.Fleet("", "diff", "w1"); !strings.Contains(out, "+one") {
		t.Fatalf("fleet diff of a merged worker: %s", out)
	}

	// main moves on with a conflicting README: w2 no longer merges, and
	// merging it is refused without touching anything.
	os.WriteFile(filepath.Join(repo, "README"), []byte("hello from main\n"), 0o644)
	gitIn(t, repo, "commit", "-q", "-am", "main edits README")
	g := e2etest.GitOf(s, "w2 conflicts", "w2", func(g *protocol.WorkerGit) bool { return g.Mergeable != nil && !*g.Mergeable })
	if len(g.Conflicts) != 1 || g.Conflicts[0] != "README" || g.Behind == 0 {
		t.Fatalf("w2 after main moved: %+v", g)
	}
	before := treeState(t, repo)
	out, errOut, code = e.Fleet("", "merge", "w2")
	if code == 0 || !strings.Contains(errOut, "conflict") || !strings.Contains(errOut, "README") {
		t.Fatalf("conflicting merge (%d): %s%s", code, out, errOut)
	}
	if after := treeState(t, repo); after != before {
		t.Fatalf("a refused merge changed the repository:\n%s\n----\n%s", before, after)
	}

	// A dirty target is refused too.
	os.WriteFile(filepath.Join(repo, "README"), []byte("local edit\n"), 0o644)
	before = treeState(t, repo)
	_, errOut, code = e.Fleet("", "merge", "w4")
	if code == 0 || !strings.Contains(errOut, "uncommitted") {
		t.Fatalf("merge into a dirty tree (%d): %s", code, errOut)
	}
	if after := treeState(t, repo); after != before {
		t.Fatal("a refused merge changed the dirty repository")
	}
	gitIn(t, repo, "checkout", "-q", "--", "README")

	// Apply part of w3: only three.txt, uncommitted and unstaged.
	out, errOut, code = e.Fleet("", "apply", "w3", "three.txt")
	if code != 0 {
		t.Fatalf("fleet apply (%d): %s%s", code, out, errOut)
	}
	if got, _ := os.ReadFile(filepath.Join(repo, "three.txt")); string(got) != "three\n" {
		t.Fatalf("three.txt: %q", got)
	}
	if _, err := os.Stat(filepath.Join(repo, "extra.txt")); err == nil {
		t.Fatal("apply by path applied extra.txt too")
	}
	if staged := gitIn(t, repo, "diff", "--cached", "--name-only"); staged != "" {
		t.Fatalf("apply staged %s", staged)
	}
	os.Remove(filepath.Join(repo, "three.txt"))

	// /apply from a console: the same, into the repository's work tree.
	c.Prompt("/apply w5")
	s.WaitLong("/apply reply", replyWith("Applied w5's change"))
	if got, _ := os.ReadFile(filepath.Join(repo, "five.txt")); string(got) != "five\n" {
		t.Fatalf("five.txt after /apply: %q", got)
	}
	if staged := gitIn(t, repo, "diff", "--cached", "--name-only"); staged != "" {
		t.Fatalf("/apply staged %s", staged)
	}
	os.Remove(filepath.Join(repo, "five.txt"))
	c.Prompt("/apply w5 nothing-here.txt")
	s.WaitLong("/apply refusal", func(m protocol.Message) bool {
		r, ok := m.(*protocol.Reply)
		return ok && strings.Contains(r.Text, "w5 changed none of nothing-here.txt")
	})

	// /diff and /merge --squash from a console.
	c.Prompt("/diff w4")
	r := s.WaitLong("/diff reply", replyWith("diff --git")).(*protocol.Reply)
	if !strings.Contains(r.Text, "+four") {
		t.Fatalf("/diff: %s", r.Text)
	}
	c.Prompt("/merge w4 --squash")
	s.WaitLong("/merge reply", func(m protocol.Message) bool {
		r, ok := m.(*protocol.Reply)
		return ok && strings.Contains(r.Text, "Squashed w4")
	})
	if parents := strings.Fields(gitIn(t, repo, "log", "-1", "--format=%P", "main")); len(parents) != 1 {
		t.Fatalf("squash made a merge commit: %v", parents)
	}
	if got, _ := os.ReadFile(filepath.Join(repo, "four.txt")); string(got) != "four\n" {
		t.Fatalf("four.txt after the squash: %q", got)
	}
	e2etest.GitOf(s, "w4 merged", "w4", func(g *protocol.WorkerGit) bool { return g.Merged })

	// Hand w3 on as a pull request, through the fake gh.
	out, errOut, code = e.Fleet("", "pr", "w3", "--draft")
	if code != 0 || !strings.Contains(out, "https://example.test/pull/7") {
		t.Fatalf("fleet pr (%d): %s%s", code, out, errOut)
	}
	branch := "fleet/" + session + "/w3"
	if got := gitIn(t, remote, "rev-parse", branch); got != gitIn(t, repo, "rev-parse", branch) {
		t.Fatalf("remote has %s at %s", branch, got)
	}
	logged, _ := os.ReadFile(ghLog)
	for _, want := range []string{"pr\ncreate\n", "--head\n" + branch + "\n", "--base\nmain\n", "--draft\n", "t3: echo three"} {
		if !bytes.Contains(logged, []byte(want)) {
			t.Fatalf("gh was not run with %q:\n%s", want, logged)
		}
	}

	// /pr from a console: the push goes through the confirm policy.
	c.Prompt("/pr w6")
	confirm := s.WaitLong("the push's confirm", e2etest.IsType(protocol.TypeConfirmRequest)).(*protocol.ConfirmRequest)
	if !strings.Contains(confirm.Summary, "git push --set-upstream origin fleet/"+session+"/w6") {
		t.Fatalf("confirm: %s", confirm.Summary)
	}
	c.Send(&protocol.ConfirmResponse{ID: confirm.ID, Approve: true})
	s.WaitLong("/pr reply", func(m protocol.Message) bool {
		r, ok := m.(*protocol.Reply)
		return ok && strings.Contains(r.Text, "Pushed fleet/"+session+"/w6") && strings.Contains(r.Text, "example.test/pull/7")
	})
	if gitIn(t, remote, "rev-parse", "fleet/"+session+"/w6") == "" {
		t.Fatal("w6 not pushed")
	}

	// Clean-up never loses work. w1 and w4 are merged and w3 is pushed:
	// their worktrees go, and w6's (pushed). w2 (unmerged, conflicting)
	// and w5 (never landed) stay.
	c.Prompt("/clean")
	r = s.WaitLong("/clean", replyWith("Removed")).(*protocol.Reply)
	if !strings.Contains(r.Text, "Removed 4 worktree(s): w1, w3, w4, w6") || !strings.Contains(r.Text, "Kept 2") {
		t.Fatalf("/clean: %s", r.Text)
	}
	out, _, _ = e.Fleet("", "worktrees", "prune")
	if strings.Contains(out, "removed") || !strings.Contains(out, "w2") || !strings.Contains(out, "w5") {
		t.Fatalf("prune removed unlanded work:\n%s", out)
	}
	out, _, _ = e.Fleet("", "worktrees", "prune", "--force")
	if !strings.Contains(out, "w2 (branch fleet/"+session+"/w2 kept") {
		t.Fatalf("prune --force: %s", out)
	}
	// The branches are still there, with the work that was uncommitted
	// saved on them.
	if got := gitIn(t, repo, "show", "fleet/"+session+"/w2:README"); got != "hello from w2" {
		t.Fatalf("w2's work: %q", got)
	}
	if got := gitIn(t, repo, "show", "fleet/"+session+"/w5:five.txt"); got != "five" {
		t.Fatalf("w5's work: %q", got)
	}
	d.Stop()
}

// With an agent provider the worker's work is committed on its branch
// when it settles, and merges like any other.
func TestClaudeWorkIsCommittedOnSettleAndMerges(t *testing.T) {
	u := func(in, out int64) modelmock.Usage { return modelmock.Usage{Input: in, Output: out} }
	ae := e2etest.NewAgentEnv(t, "claude", modelmock.Script{Rules: []modelmock.Rule{
		{Name: "write", Match: "greet:", Turns: []modelmock.Turn{
			{Usage: u(100, 10), ToolCalls: []modelmock.ToolCall{{Name: "Write", Input: map[string]any{"file_path": "hello.txt", "content": "hello\n"}}}},
			{Text: "Wrote hello.txt.", Usage: u(110, 5)},
		}},
	}})
	d := ae.Start("--control-socket", "--provider", "claude")
	c := d.Dial(protocol.ClientOther, "op")
	s := e2etest.Watch(t, c)
	s.WaitFor("replayEnd", e2etest.IsType(protocol.TypeReplayEnd))
	c.Send(&protocol.Prompt{Text: "/spawn greet: add hello.txt"})
	ask := s.WaitLong("the Write permission", e2etest.IsType(protocol.TypeAskRequest)).(*protocol.AskRequest)
	c.Send(&protocol.AskResponse{ID: ask.ID, Text: "allow"})
	g := e2etest.GitOf(s, "w1 committed", "w1", func(g *protocol.WorkerGit) bool { return g.Ahead == 1 && g.Uncommitted == 0 })
	if g.FilesChanged != 1 || len(g.Files) != 1 || g.Files[0].Path != "hello.txt" || g.Files[0].Added != 1 || g.Mergeable == nil || !*g.Mergeable {
		t.Fatalf("w1 after settling: %+v", g)
	}
	msg := gitIn(t, ae.Dir, "log", "-1", "--format=%B", g.Branch)
	if !strings.Contains(msg, "greet: add hello.txt") || !strings.Contains(msg, "Fleet-Worker: w1 (claude") {
		t.Fatalf("commit message: %s", msg)
	}
	out, errOut, code := ae.Fleet("", "merge", "w1", "--rebase")
	if code != 0 || !strings.Contains(out, "Rebased w1") {
		t.Fatalf("fleet merge --rebase (%d): %s%s", code, out, errOut)
	}
	if got, _ := os.ReadFile(filepath.Join(ae.Dir, "hello.txt")); string(got) != "hello\n" {
		t.Fatalf("hello.txt: %q", got)
	}
	out, _, _ = ae.Fleet("", "workers", "--json")
	var rows []struct {
		Worker string             `json:"worker"`
		Git    protocol.WorkerGit `json:"git"`
	}
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 1 || !rows[0].Git.Merged {
		t.Fatalf("fleet workers --json: %v %s", err, out)
	}
	d.Stop()
}

// On a terminal fleet diff is coloured, and git's pager is never started
// (it would wait for a key in scripts that happen to have a tty).
func TestDiffOnATerminalIsColouredWithoutAPager(t *testing.T) {
	e := e2etest.NewEnv(t)
	e.GitRepo()
	d := e.Start("--control-socket")
	c := d.Dial(protocol.ClientREPL, "op")
	s := e2etest.Watch(t, c)
	s.WaitFor("replayEnd", e2etest.IsType(protocol.TypeReplayEnd))
	c.Prompt("$ echo one > one.txt")
	e2etest.GitOf(s, "w1's change", "w1", func(g *protocol.WorkerGit) bool { return g.FilesChanged == 1 })
	d.Stop()

	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	cmd := exec.Command(e2etest.Bin(), "diff", "w1")
	cmd.Dir, cmd.Env = e.Dir, append(e.Environ(), "TERM=xterm", "PAGER=less", "GIT_PAGER=less")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	out := &ptyOutput{changed: make(chan struct{})}
	go io.Copy(out, ptmx)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("fleet diff: %v", err)
		}
	case <-time.After(ptyWait):
		cmd.Process.Kill()
		t.Fatal("fleet diff on a terminal did not exit (a pager waiting?)")
	}
	deadline := time.After(ptyWait)
	for {
		text, more := out.snapshot()
		if strings.Contains(text, "+one") {
			out.mu.Lock()
			raw := out.raw.String()
			out.mu.Unlock()
			if !strings.Contains(raw, "\x1b[32m") || strings.Contains(raw, "\x1b[?1h") {
				t.Fatalf("not coloured, or paged: %q", raw)
			}
			return
		}
		select {
		case <-deadline:
			t.Fatalf("no diff on the terminal: %q", text)
		case <-more:
		}
	}
}
