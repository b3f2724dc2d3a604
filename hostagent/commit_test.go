package hostagent

import (
	"os"
	"path/filepath"
	"testing"
)

// TestCommitIdentity: the host commits as itself only when its git has no
// identity; one in its environment wins, and a worktree with nothing new
// keeps its HEAD.
func TestCommitIdentity(t *testing.T) {
	dir := testDir(t)
	gitT(t, dir, "init", "-q", "-b", "main")
	put(t, filepath.Join(dir, "a"), "a\n")
	gitT(t, dir, "add", "-A")
	gitT(t, dir, "commit", "-q", "-m", "initial")
	base := gitT(t, dir, "rev-parse", "HEAD")

	c := committer{env: commitEnv(append(os.Environ(), "GIT_DIR=/nonexistent", "GIT_INDEX_FILE=/nonexistent")),
		name: "agents-fleet host h1", email: "fleet@localhost"}
	if head, err := c.commit(t.Context(), dir, "nothing"); err != nil || head != base {
		t.Fatalf("nothing to commit: %q, %v; want %s", head, err, base)
	}
	put(t, filepath.Join(dir, "b"), "b\n")
	head, err := c.commit(t.Context(), dir, "fleet: w1 turn 1")
	if err != nil {
		t.Fatal(err)
	}
	if got := gitT(t, dir, "log", "-1", "--format=%an <%ae>|%cn <%ce>|%s", head); got != "agents-fleet host h1 <fleet@localhost>|agents-fleet host h1 <fleet@localhost>|fleet: w1 turn 1" {
		t.Fatalf("without an identity: %q", got)
	}

	c.env = commitEnv(append(os.Environ(), "GIT_AUTHOR_NAME=Ada", "GIT_AUTHOR_EMAIL=ada@example.com"))
	put(t, filepath.Join(dir, "c"), "c\n")
	if head, err = c.commit(t.Context(), dir, "turn 2"); err != nil {
		t.Fatal(err)
	}
	if got := gitT(t, dir, "log", "-1", "--format=%an <%ae>|%cn <%ce>", head); got != "Ada <ada@example.com>|agents-fleet host h1 <fleet@localhost>" {
		t.Fatalf("with the host's author: %q", got)
	}
}

// TestResetToBase: a worktree a killed turn left dirty, or ahead of what
// the fleet has, is made to show the fleet's base again; ignored build
// output stays; a worktree already there is left alone.
func TestResetToBase(t *testing.T) {
	dir := testDir(t)
	gitT(t, dir, "init", "-q", "-b", "main")
	put(t, filepath.Join(dir, ".gitignore"), "build/\n")
	put(t, filepath.Join(dir, "a"), "a\n")
	gitT(t, dir, "add", "-A")
	gitT(t, dir, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "initial")
	base := gitT(t, dir, "rev-parse", "HEAD")
	c := committer{env: commitEnv(os.Environ()), name: "agents-fleet host h1", email: "fleet@localhost"}
	if reset, err := c.resetTo(t.Context(), dir, base); err != nil || reset {
		t.Fatalf("a clean worktree at the base: reset %v, %v", reset, err)
	}
	put(t, filepath.Join(dir, "a"), "changed\n")
	put(t, filepath.Join(dir, "stray.txt"), "left by a killed turn\n")
	if err := os.Mkdir(filepath.Join(dir, "build"), 0o755); err != nil {
		t.Fatal(err)
	}
	put(t, filepath.Join(dir, "build", "out.o"), "kept\n")
	if _, err := c.commit(t.Context(), dir, "a turn the fleet never got"); err != nil {
		t.Fatal(err)
	}
	put(t, filepath.Join(dir, "more.txt"), "uncommitted\n")
	if reset, err := c.resetTo(t.Context(), dir, base); err != nil || !reset {
		t.Fatalf("reset %v, %v", reset, err)
	}
	if head := gitT(t, dir, "rev-parse", "HEAD"); head != base {
		t.Fatalf("HEAD %s, want %s", head, base)
	}
	if st := gitT(t, dir, "status", "--porcelain=v1", "--untracked-files=all"); st != "" {
		t.Fatalf("status %q", st)
	}
	if _, err := os.Stat(filepath.Join(dir, "build", "out.o")); err != nil {
		t.Fatalf("ignored build output: %v", err)
	}
}
