package gitmove

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// benchRepo clones the repository to measure into a temp dir: the one in
// GITMOVE_BENCH_REPO, else this project's own. It skips a shallow clone or
// one of fewer than 30 commits.
func benchRepo(b *testing.B) string {
	b.Helper()
	src := os.Getenv("GITMOVE_BENCH_REPO")
	if src == "" {
		src = gitT(b, ".", "rev-parse", "--show-toplevel")
	}
	dst := filepath.Join(tempDir(b), "user")
	gitT(b, ".", "clone", "-q", "--no-local", "--no-checkout", src, dst)
	if gitT(b, dst, "rev-parse", "--is-shallow-repository") == "true" {
		b.Skip("a shallow clone")
	}
	if n, _ := strconv.Atoi(gitT(b, dst, "rev-list", "--count", "HEAD")); n < 30 {
		b.Skipf("%d commits; want 30 or more", n)
	}
	return dst
}

// BenchmarkBaseTransfer measures moving a real repository's base to a host
// and back: the full base a new host gets (HEAD~20), the incremental base
// that host gets next (HEAD), and one turn's branch back. Bundle sizes are
// reported as bundle-B.
//
//	go test -run '^$' -bench BaseTransfer -benchtime 3x ./hosts/gitmove/
func BenchmarkBaseTransfer(b *testing.B) {
	repo := benchRepo(b)
	old := gitT(b, repo, "rev-parse", "HEAD~20")
	head := gitT(b, repo, "rev-parse", "HEAD")
	r := newRig(b)
	ctx := b.Context()
	id, err := RepoID(ctx, repo, head, r.lim)
	if err != nil {
		b.Fatal(err)
	}
	// freshCache is a new, empty cache for the repository.
	freshCache := func() *Cache {
		cs, err := OpenCaches(filepath.Join(tempDir(b), "repos"), Limits{})
		if err != nil {
			b.Fatal(err)
		}
		c, err := cs.Open(ctx, id)
		if err != nil {
			b.Fatal(err)
		}
		return c
	}
	send := func(c *Cache, commit string) Sent {
		have, err := c.Have(ctx)
		if err != nil {
			b.Fatal(err)
		}
		s, err := SendBase(ctx, r.store, repo, commit, have, r.lim)
		if err != nil {
			b.Fatal(err)
		}
		if got, err := c.ReceiveBase(ctx, r.store, s.Key); err != nil || got != commit {
			b.Fatalf("ReceiveBase = %s, %v", got, err)
		}
		return s
	}

	b.Run("full", func(b *testing.B) {
		var s Sent
		for b.Loop() {
			b.StopTimer()
			c := freshCache()
			b.StartTimer()
			s = send(c, old)
		}
		b.ReportMetric(float64(s.Size), "bundle-B")
	})
	b.Run("incremental", func(b *testing.B) {
		var s Sent
		for b.Loop() {
			b.StopTimer()
			c := freshCache()
			send(c, old)
			b.StartTimer()
			s = send(c, head)
		}
		b.ReportMetric(float64(s.Size), "bundle-B")
	})
	b.Run("worktree", func(b *testing.B) {
		c := freshCache()
		send(c, head)
		i := 0
		for b.Loop() {
			i++
			dir := filepath.Join(tempDir(b), "w")
			if err := c.Worktree(ctx, head, dir, "fleet/bench/w"+strconv.Itoa(i)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("branch", func(b *testing.B) {
		c := freshCache()
		send(c, head)
		dir := filepath.Join(tempDir(b), "w")
		const branch = "fleet/bench/back"
		if err := c.Worktree(ctx, head, dir, branch); err != nil {
			b.Fatal(err)
		}
		var s Sent
		i := 0
		for b.Loop() {
			b.StopTimer()
			i++
			commitFile(b, dir, "turn.txt", strconv.Itoa(i)+"\n", "turn "+strconv.Itoa(i))
			b.StartTimer()
			if s, err = c.SendBranch(ctx, r.store, branch, head, ""); err != nil {
				b.Fatal(err)
			}
			if _, err := FetchBranch(ctx, r.store, s.Key, repo, branch, head, r.lim); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(s.Size), "bundle-B")
	})
}
