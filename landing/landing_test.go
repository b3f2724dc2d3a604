package landing

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/agents-fleet/fleet/worktree"
)

func TestMain(m *testing.M) {
	// Keep the user's git configuration out of the tests' repositories.
	home, err := os.MkdirTemp("", "landing-test-home-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	global := filepath.Join(home, "gitconfig")
	os.WriteFile(global, nil, 0o600)
	for k, v := range map[string]string{
		"HOME": home, "GIT_CONFIG_GLOBAL": global, "GIT_CONFIG_NOSYSTEM": "1",
		"GIT_AUTHOR_NAME": "Fleet Test", "GIT_AUTHOR_EMAIL": "fleet@example.com",
		"GIT_COMMITTER_NAME": "Fleet Test", "GIT_COMMITTER_EMAIL": "fleet@example.com",
	} {
		os.Setenv(k, v)
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { os.RemoveAll(home) }))
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// repoWith makes a repository on main with one commit and a worktree
// manager per session.
func repoWith(t *testing.T) (repo, fw string) {
	t.Helper()
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	repo = filepath.Join(dir, "repo")
	os.Mkdir(repo, 0o755)
	git(t, repo, "init", "-q", "-b", "main")
	os.WriteFile(filepath.Join(repo, "a.txt"), []byte("a\n"), 0o644)
	git(t, repo, "add", "a.txt")
	git(t, repo, "commit", "-q", "-m", "a")
	return repo, filepath.Join(dir, "worktrees")
}

func worker(t *testing.T, repo, fw, session, name string) worktree.Worktree {
	t.Helper()
	m, err := worktree.Open(t.Context(), repo, filepath.Join(fw, session), session)
	if err != nil {
		t.Fatal(err)
	}
	wt, err := m.Create(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	return wt
}

func TestResolve(t *testing.T) {
	repo, fw := repoWith(t)
	worker(t, repo, fw, "aaa111", "w1")
	worker(t, repo, fw, "bbb222", "w1")
	worker(t, repo, fw, "bbb222", "w2")

	if f, err := Resolve(t.Context(), repo, "w2", "", nil); err != nil || f.Branch != "fleet/bbb222/w2" || f.Chosen != "" {
		t.Fatalf("w2: %+v %v", f, err)
	}
	if _, err := Resolve(t.Context(), repo, "w1", "", nil); err == nil || !strings.Contains(err.Error(), "fleet/aaa111/w1, fleet/bbb222/w1") {
		t.Fatalf("ambiguous w1 without recency: %v", err)
	}
	f, err := Resolve(t.Context(), repo, "w1", "", []string{"zzz", "bbb222", "aaa111"})
	if err != nil || f.Session != "bbb222" || !strings.Contains(f.Chosen, "--session") {
		t.Fatalf("w1 by recency: %+v %v", f, err)
	}
	for _, spec := range []string{"aaa/w1", "fleet/aaa111/w1"} {
		if f, err := Resolve(t.Context(), repo, spec, "", nil); err != nil || f.Session != "aaa111" {
			t.Fatalf("%s: %+v %v", spec, f, err)
		}
	}
	if f, err := Resolve(t.Context(), repo, "w1", "aa", nil); err != nil || f.Session != "aaa111" || f.Path == "" {
		t.Fatalf("--session prefix: %+v %v", f, err)
	}
	for _, spec := range []string{"w9", "../w1", "W1"} {
		if _, err := Resolve(t.Context(), repo, spec, "", nil); err == nil {
			t.Fatalf("%s resolved", spec)
		}
	}
}

func TestCommitMessage(t *testing.T) {
	msg := CommitMessage(Settled{TaskID: "t3", Task: "fix the parser\n\nIt drops the last token.", Worker: "w3",
		Provider: "claude", Model: "sonnet", Session: "s1", Failed: true, Reason: "cancelled by the operator"})
	want := "t3: fix the parser\n\nfix the parser\n\nIt drops the last token.\n\nFleet-Worker: w3 (claude, model sonnet)\nFleet-Session: s1\nFleet-Outcome: failed: cancelled by the operator\n"
	if msg != want {
		t.Fatalf("got\n%q\nwant\n%q", msg, want)
	}
	long := CommitMessage(Settled{TaskID: "t1", Task: strings.Repeat("x", 200), Worker: "w1", Provider: "local"})
	if subj, _, _ := strings.Cut(long, "\n"); len([]rune(subj)) != maxSubject {
		t.Fatalf("subject %q is not cut to %d", subj, maxSubject)
	}
}

// committedWorker is a worker with one commit of work and a remote.
func committedWorker(t *testing.T) (Worker, string) {
	t.Helper()
	repo, fw := repoWith(t)
	wt := worker(t, repo, fw, "s1", "w1")
	os.WriteFile(filepath.Join(wt.Path, "b.txt"), []byte("b\n"), 0o644)
	if _, err := worktree.CommitAll(t.Context(), wt.Path, "t1: add b"); err != nil {
		t.Fatal(err)
	}
	remote := filepath.Join(filepath.Dir(repo), "remote.git")
	git(t, repo, "init", "-q", "--bare", remote)
	git(t, repo, "remote", "add", "origin", remote)
	return Worker{Repo: repo, Branch: wt.Branch, Session: "s1", Name: "w1", Path: wt.Path, Task: "t1: add b"}, remote
}

// PATH with git but without gh.
func pathWithoutGh(t *testing.T) string {
	gitPath, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(gitPath, filepath.Join(dir, "git")); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestPRWithoutGhPrintsTheCommands(t *testing.T) {
	w, remote := committedWorker(t)
	t.Setenv("PATH", pathWithoutGh(t))
	var out bytes.Buffer
	if err := PR(t.Context(), w, PROptions{Draft: true, Out: &out}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"gh is not installed", "nothing was pushed",
		"git -C " + w.Repo + " push --set-upstream origin fleet/s1/w1",
		"gh pr create --head fleet/s1/w1 --title 't1: add b'", "--base main --draft"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("output lacks %q:\n%s", want, out.String())
		}
	}
	if refs := git(t, remote, "for-each-ref"); refs != "" {
		t.Fatalf("something was pushed: %s", refs)
	}
}

func TestPRHook(t *testing.T) {
	w, remote := committedWorker(t)
	t.Setenv("PATH", pathWithoutGh(t)+string(os.PathListSeparator)+"/bin:/usr/bin")
	seen := filepath.Join(t.TempDir(), "seen")
	var out bytes.Buffer
	hook := `printf '%s|%s|%s|%s|%s\n' "$FLEET_PR_BRANCH" "$FLEET_PR_BASE" "$FLEET_PR_TITLE" "$FLEET_PR_DRAFT" "$FLEET_WORKER" > ` + seen + `; echo opened`
	if err := PR(t.Context(), w, PROptions{Hook: hook, Out: &out}); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	got, _ := os.ReadFile(seen)
	if string(got) != "fleet/s1/w1|main|t1: add b|0|w1\n" || !strings.Contains(out.String(), "opened") {
		t.Fatalf("hook saw %q, printed %q", got, out.String())
	}
	if git(t, remote, "rev-parse", "fleet/s1/w1") != git(t, w.Repo, "rev-parse", "fleet/s1/w1") {
		t.Fatal("the branch was not pushed before the hook ran")
	}
}
