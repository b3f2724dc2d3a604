package gitmove

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestBaseFullThenIncremental: the first base is a full bundle, the next
// only what the cache lacks; a base the cache has moves nothing.
func TestBaseFullThenIncremental(t *testing.T) {
	r := newRig(t)
	ctx := t.Context()
	repo, a := userRepo(t, 40, 16<<10) // 640 KiB that do not compress
	c := r.cache(t, repo, a)

	have, err := c.Have(ctx)
	if err != nil || len(have) != 0 {
		t.Fatalf("Have of a new cache = %v, %v; want none", have, err)
	}
	full, err := SendBase(ctx, r.store, repo, a, have, r.lim)
	if err != nil {
		t.Fatal(err)
	}
	if !full.Full || full.Key == "" || full.Commit != a || full.Size < 40*16<<10 {
		t.Fatalf("first base = %+v; want a full bundle of at least %d bytes", full, 40*16<<10)
	}
	if got, err := c.ReceiveBase(ctx, r.store, full.Key); err != nil || got != a {
		t.Fatalf("ReceiveBase = %q, %v; want %s", got, err, a)
	}

	b := commitFile(t, repo, "src/f007.bin", "changed\n", "second")
	if have, err = c.Have(ctx); err != nil || len(have) != 1 || have[0] != a {
		t.Fatalf("Have after the first base = %v, %v; want [%s]", have, err, a)
	}
	inc, err := SendBase(ctx, r.store, repo, b, have, r.lim)
	if err != nil {
		t.Fatal(err)
	}
	if inc.Full || inc.Key == "" || inc.Commit != b {
		t.Fatalf("second base = %+v; want an incremental bundle of %s", inc, b)
	}
	if inc.Size*20 > full.Size {
		t.Fatalf("incremental bundle is %d bytes, full %d: want it under 1/20 of the full one", inc.Size, full.Size)
	}
	t.Logf("full bundle %d bytes, incremental %d bytes", full.Size, inc.Size)
	if got, err := c.ReceiveBase(ctx, r.store, inc.Key); err != nil || got != b {
		t.Fatalf("ReceiveBase = %q, %v; want %s", got, err, b)
	}
	if got := gitT(t, c.Dir(), "rev-parse", "refs/fleet/base/"+b); got != b {
		t.Fatalf("cache's base ref = %s, want %s", got, b)
	}

	// The cache has b now: nothing moves.
	have, _ = c.Have(ctx)
	again, err := SendBase(ctx, r.store, repo, b, have, r.lim)
	if err != nil || again.Key != "" || again.Commit != b {
		t.Fatalf("SendBase of a commit the host has = %+v, %v; want no key", again, err)
	}
	// A have the fleet does not know is ignored: a full bundle again.
	unknown := strings.Repeat("ab", 20)
	if s, err := SendBase(ctx, r.store, repo, b, []string{unknown}, r.lim); err != nil || !s.Full {
		t.Fatalf("SendBase with an unknown have = %+v, %v; want a full bundle", s, err)
	}
}

// TestWorktreeAndBranchRoundTrip: the host makes the worktree at the base,
// the worker commits, and each turn's branch arrives in the user's
// repository as fleet/<session>/<worker> without touching anything else.
func TestWorktreeAndBranchRoundTrip(t *testing.T) {
	r := newRig(t)
	ctx := t.Context()
	repo, base := userRepo(t, 3, 1<<10)
	put(t, repo, "dirty.txt", []byte("the user's uncommitted file\n"))
	c := r.cache(t, repo, base)
	sent, err := SendBase(ctx, r.store, repo, base, nil, r.lim)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ReceiveBase(ctx, r.store, sent.Key); err != nil {
		t.Fatal(err)
	}
	const branch = "fleet/s1/w1"
	wt := filepath.Join(r.work, "worktrees", "s1", "w1")
	if err := c.Worktree(ctx, base, wt, branch); err != nil {
		t.Fatal(err)
	}
	if got := gitT(t, wt, "rev-parse", "HEAD"); got != base {
		t.Fatalf("worktree HEAD = %s, want %s", got, base)
	}
	if got := gitT(t, wt, "symbolic-ref", "HEAD"); got != "refs/heads/"+branch {
		t.Fatalf("worktree is on %s, want %s", got, branch)
	}
	if b, err := os.ReadFile(filepath.Join(wt, "README")); err != nil || string(b) != "hello\n" {
		t.Fatalf("worktree README = %q, %v", b, err)
	}
	if err := c.Worktree(ctx, base, wt, branch); !errors.Is(err, ErrExists) {
		t.Fatalf("a second Worktree at the same place = %v; want ErrExists", err)
	}

	before := refs(t, repo)
	status := gitT(t, repo, "status", "--porcelain")
	var acked string // the tip the fleet last took
	fetchTurn := func(want string) Sent {
		t.Helper()
		s, err := c.SendBranch(ctx, r.store, branch, base, acked)
		if err != nil {
			t.Fatal(err)
		}
		if s.Commit != want || s.Key == "" {
			t.Fatalf("SendBranch = %+v, want a bundle of %s", s, want)
		}
		tip, err := FetchBranch(ctx, r.store, s.Key, repo, branch, base, r.lim)
		if err != nil {
			t.Fatal(err)
		}
		if tip != want || gitT(t, repo, "rev-parse", "refs/heads/"+branch) != want {
			t.Fatalf("fetched %s, want %s", tip, want)
		}
		acked = tip
		after := refs(t, repo)
		others := strings.Join(slicesWithout(strings.Split(after, "\n"), "refs/heads/"+branch), "\n")
		if others != before {
			t.Fatalf("other refs changed:\nbefore\n%s\nafter\n%s", before, after)
		}
		if got := gitT(t, repo, "status", "--porcelain"); got != status {
			t.Fatalf("the user's work tree changed: %q, was %q", got, status)
		}
		return s
	}

	put(t, wt, "big.bin", noise(1, 64<<10))
	turn1 := commitFile(t, wt, "a.txt", "turn 1\n", "turn 1")
	first := fetchTurn(turn1)
	if got := gitT(t, repo, "show", branch+":a.txt"); got != "turn 1" {
		t.Fatalf("a.txt on the fetched branch = %q", got)
	}
	// No new commit: nothing moves.
	if s, err := c.SendBranch(ctx, r.store, branch, base, acked); err != nil || s.Key != "" || s.Commit != turn1 {
		t.Fatalf("SendBranch of an unchanged branch = %+v, %v; want no key", s, err)
	}
	turn2 := commitFile(t, wt, "b.txt", "turn 2\n", "turn 2")
	second := fetchTurn(turn2)
	if second.Size*10 > first.Size {
		t.Fatalf("turn 2's bundle is %d bytes, turn 1's %d: want only what is new since turn 1", second.Size, first.Size)
	}
	// The worker amends its own commit: not a fast-forward, still on base.
	put(t, wt, "b.txt", []byte("turn 2, amended\n"))
	gitT(t, wt, "commit", "-q", "-a", "--amend", "-m", "turn 2 amended")
	fetchTurn(gitT(t, wt, "rev-parse", "HEAD"))
	// Back to turn 1, which the fleet had: the branch follows.
	gitT(t, wt, "reset", "-q", "--hard", turn1)
	fetchTurn(turn1)
	// The worker undoes everything: the branch is back at base.
	gitT(t, wt, "reset", "-q", "--hard", base)
	fetchTurn(base)

	if err := c.Remove(ctx, wt, branch); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(wt); !os.IsNotExist(err) {
		t.Fatalf("worktree still there after Remove: %v", err)
	}
	if err := c.Worktree(ctx, base, wt, branch); err != nil {
		t.Fatalf("Worktree after Remove: %v", err)
	}
}

func slicesWithout(lines []string, ref string) []string {
	var out []string
	for _, l := range lines {
		if !strings.HasSuffix(l, " "+ref) {
			out = append(out, l)
		}
	}
	return out
}

// TestSizeLimit: a bundle over the limit is neither stored nor accepted,
// whatever size the object claims.
func TestSizeLimit(t *testing.T) {
	w := newWorker(t, 4, 16<<10)
	ctx := t.Context()
	small := w.lim
	small.MaxBundle = 8 << 10

	before, err := w.store.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = SendBase(ctx, w.store, w.repo, w.base, nil, small)
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("SendBase over the limit = %v; want ErrTooLarge", err)
	}
	put(t, w.wt, "big.bin", noise(99, 32<<10))
	gitT(t, w.wt, "add", "-A")
	gitT(t, w.wt, "commit", "-q", "-m", "big")
	if _, err := (&Cache{dir: w.c.dir, lim: small}).SendBranch(ctx, w.store, testBranch, w.base, ""); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("SendBranch over the limit = %v; want ErrTooLarge", err)
	}
	if after, err := w.store.List(ctx); err != nil || len(after) != len(before) {
		t.Fatalf("the store holds %d objects after refused sends, %d before (%v)", len(after), len(before), err)
	}

	// The fleet refuses it on the way in, by the recorded size and, when
	// the host lies about that, by what it reads.
	sent := w.send(t)
	check := unchanged(t, w.repo)
	if _, err := w.fetch(t, sent.Key, small); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("FetchBranch over the limit = %v; want ErrTooLarge", err)
	}
	lieAboutSize(t, w.rig, sent.Key, 100)
	if _, err := w.fetch(t, sent.Key, small); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("FetchBranch of an object claiming 100 bytes = %v; want ErrTooLarge", err)
	}
	check()
}

// lieAboutSize rewrites the object's metadata as a host could, claiming
// size bytes.
func lieAboutSize(t *testing.T, r *rig, key string, size uint64) {
	t.Helper()
	info, err := r.store.GetInfo(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	info.Size = size
	publishMeta(t, r, info)
	if got, err := r.store.GetInfo(t.Context(), key); err != nil || got.Size != size {
		t.Fatalf("metadata not rewritten: %+v, %v", got, err)
	}
}

// publishMeta writes an object's metadata message directly, as a host with
// publish rights on its bucket can.
func publishMeta(t *testing.T, r *rig, info *jetstream.ObjectInfo) {
	t.Helper()
	data, err := json.Marshal(info)
	if err != nil {
		t.Fatal(err)
	}
	msg := nats.NewMsg(fmt.Sprintf("$O.%s.M.%s", info.Bucket, base64.URLEncoding.EncodeToString([]byte(info.Name))))
	msg.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
	msg.Data = data
	if _, err := r.js.PublishMsg(t.Context(), msg); err != nil {
		t.Fatal(err)
	}
}

// TestCorruptBundleRefused: what is not a sound bundle of the branch is
// refused with a clear error, and the user's repository is left as it was.
func TestCorruptBundleRefused(t *testing.T) {
	w := newWorker(t, 2, 4<<10)
	ctx := t.Context()
	put(t, w.wt, "more.bin", noise(5, 8<<10))
	gitT(t, w.wt, "add", "-A")
	gitT(t, w.wt, "commit", "-q", "-m", "more")
	sent := w.send(t)
	good, err := w.store.GetBytes(ctx, sent.Key)
	if err != nil {
		t.Fatal(err)
	}
	header := bytes.Index(good, []byte("\n\n")) + 2
	flipped := bytes.Clone(good)
	for i := header + 64; i < len(flipped); i += 97 {
		flipped[i] ^= 0x5a
	}
	w.hostBranch(t, "fleet/s1/w2")
	w2, err := w.c.SendBranch(ctx, w.store, "fleet/s1/w2", w.base, "")
	if err != nil {
		t.Fatal(err)
	}
	w2Bundle, err := w.store.GetBytes(ctx, w2.Key)
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name, want string
		data       []byte
	}{
		{"not a bundle", "does not look like a v2 or v3 bundle", []byte("hello, fleet\n")},
		{"empty", "does not look like a v2 or v3 bundle", nil},
		{"truncated pack", "index-pack", good[:header+(len(good)-header)/2]},
		{"corrupt pack", "index-pack", flipped},
		{"another branch", "must hold exactly refs/heads/" + testBranch, w2Bundle},
	} {
		t.Run(tc.name, func(t *testing.T) {
			check := unchanged(t, w.repo)
			key := "work/" + testBranch + "/" + strings.ReplaceAll(tc.name, " ", "-")
			if _, err := w.store.PutBytes(ctx, key, tc.data); err != nil {
				t.Fatal(err)
			}
			_, err := w.fetch(t, key, w.lim)
			if !errors.Is(err, ErrBadBundle) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("FetchBranch = %v; want ErrBadBundle mentioning %q", err, tc.want)
			}
			t.Logf("refused: %v", err)
			check()
		})
	}
	// The sound one is still taken.
	if tip, err := w.fetch(t, sent.Key, w.lim); err != nil || tip != sent.Commit {
		t.Fatalf("FetchBranch of the sound bundle = %s, %v", tip, err)
	}
}

// TestKeysThatEscape: keys are checked before the store is asked.
func TestKeysThatEscape(t *testing.T) {
	for _, key := range []string{
		"", "/etc/passwd", "../x", "base/../../x", "work/fleet/s1/w1/..", "work//fleet", "work/fleet/s1/w1/",
		"work/fleet/s1/w1/a\nb", "work/fleet/s1/w1/a b", "work/fleet/s1/w1/.hidden", "work\\fleet",
		"work/fleet/s1/w1/" + strings.Repeat("a", 300), "work/fleet/s1/w1/x\x00",
	} {
		if err := ValidKey(key); !errors.Is(err, ErrBadKey) {
			t.Errorf("ValidKey(%q) = %v; want ErrBadKey", key, err)
		}
	}
	w := newWorker(t, 1, 100)
	ctx := t.Context()
	check := unchanged(t, w.repo)
	for _, key := range []string{
		"../../etc/passwd",
		"work/fleet/s1/w2/0011",           // another worker's
		"work/fleet/s1/w1/0011/more",      // deeper than a nonce
		"base/" + w.base + "/0011",        // a base is no branch
		"work/fleet/s1/w1/../../w2/0011",  // climbing
		"work/fleet/s1/w1/%2e%2e%2f0011x", // not our alphabet
	} {
		if _, err := w.fetch(t, key, w.lim); !errors.Is(err, ErrBadKey) {
			t.Errorf("FetchBranch(%q) = %v; want ErrBadKey", key, err)
		}
	}
	for _, key := range []string{"base/../x", "base/HEAD/0011", "work/fleet/s1/w1/0011", "base/" + w.base, "base/" + w.base + "/a/b"} {
		if _, err := w.c.ReceiveBase(ctx, w.store, key); !errors.Is(err, ErrBadKey) {
			t.Errorf("ReceiveBase(%q) = %v; want ErrBadKey", key, err)
		}
	}
	for _, b := range []string{"main", "fleet/s1", "fleet/../w1/x", "fleet/s1/W1", "refs/heads/fleet/s1/w1", "fleet/s1/w1/x"} {
		if _, err := FetchBranch(ctx, w.store, "work/"+b+"/0011", w.repo, b, w.base, w.lim); err == nil {
			t.Errorf("FetchBranch into %q succeeded", b)
		}
		if _, err := w.c.SendBranch(ctx, w.store, b, w.base, ""); err == nil {
			t.Errorf("SendBranch of %q succeeded", b)
		}
	}
	check()
}

// TestLinkRefused: a host cannot make the fleet read another bucket's
// object through a link in its own bucket.
func TestLinkRefused(t *testing.T) {
	w := newWorker(t, 1, 100)
	ctx := t.Context()
	sent := w.send(t)
	// The "other host's" bundle, a sound one, lies in another bucket.
	other := bucket(t, w.js, "fleet-host-h2")
	data, err := w.store.GetBytes(ctx, sent.Key)
	if err != nil {
		t.Fatal(err)
	}
	info, err := other.PutBytes(ctx, sent.Key, data)
	if err != nil {
		t.Fatal(err)
	}
	key := "work/" + testBranch + "/link"
	if _, err := w.store.AddLink(ctx, key, info); err != nil {
		t.Fatal(err)
	}
	same, err := w.store.GetInfo(ctx, sent.Key)
	if err != nil {
		t.Fatal(err)
	}
	sameKey := "work/" + testBranch + "/samebucketlink"
	if _, err := w.store.AddLink(ctx, sameKey, same); err != nil {
		t.Fatal(err)
	}
	check := unchanged(t, w.repo)
	for _, k := range []string{key, sameKey} {
		if _, err := w.fetch(t, k, w.lim); !errors.Is(err, ErrBadBundle) || !strings.Contains(err.Error(), "link") {
			t.Errorf("FetchBranch of link %s = %v; want ErrBadBundle naming the link", k, err)
		}
	}
	check()
}

// TestNotDescendantRefused: a branch rewritten below its base is refused by
// the host and, should a host send it anyway, by the fleet.
func TestNotDescendantRefused(t *testing.T) {
	w := newWorker(t, 1, 100)
	ctx := t.Context()
	// The worker amends the base commit itself: a new root.
	gitT(t, w.wt, "reset", "-q", "--hard", w.base)
	gitT(t, w.wt, "commit", "-q", "--amend", "-m", "rewritten below the base")
	if _, err := w.c.SendBranch(ctx, w.store, testBranch, w.base, ""); !errors.Is(err, ErrNotDescendant) {
		t.Fatalf("SendBranch = %v; want ErrNotDescendant", err)
	}
	// A host that sends it anyway: the bundle git makes, under a good key.
	f := filepath.Join(tempDir(t), "b")
	gitT(t, w.c.Dir(), "bundle", "create", "-q", f, "refs/heads/"+testBranch, "^"+w.base)
	data, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	key := "work/" + testBranch + "/0011"
	if _, err := w.store.PutBytes(ctx, key, data); err != nil {
		t.Fatal(err)
	}
	check := unchanged(t, w.repo)
	if _, err := w.fetch(t, key, w.lim); !errors.Is(err, ErrNotDescendant) {
		t.Fatalf("FetchBranch = %v; want ErrNotDescendant", err)
	}
	check()
}

// TestHaveFromHostValidated: what a host says it has is an object id or
// the request is refused; a base against a stale have is refused by the
// cache, which then asks again.
func TestHaveFromHostValidated(t *testing.T) {
	r := newRig(t)
	ctx := t.Context()
	repo, a := userRepo(t, 2, 1<<10)
	for _, have := range [][]string{
		{"--output=/tmp/x"}, {"HEAD"}, {a[:12]}, {strings.ToUpper(a)}, {a + "\n" + a},
		make([]string, MaxHave+1),
	} {
		if _, err := SendBase(ctx, r.store, repo, a, have, r.lim); err == nil {
			t.Errorf("SendBase with have %q succeeded", have)
		}
	}
	if _, err := SendBase(ctx, r.store, repo, "HEAD", nil, r.lim); err == nil {
		t.Error("SendBase of HEAD (not an object id) succeeded")
	}

	b := commitFile(t, repo, "b.txt", "b\n", "b")
	inc, err := SendBase(ctx, r.store, repo, b, []string{a}, r.lim)
	if err != nil {
		t.Fatal(err)
	}
	c := r.cache(t, repo, a) // empty: it does not have a
	if _, err := c.ReceiveBase(ctx, r.store, inc.Key); !errors.Is(err, ErrMissingPrerequisites) {
		t.Fatalf("ReceiveBase of a bundle against a stale have = %v; want ErrMissingPrerequisites", err)
	}
	if err := c.Worktree(ctx, b, filepath.Join(r.work, "w"), "fleet/s1/w1"); !errors.Is(err, ErrMissingCommit) {
		t.Fatalf("Worktree of a commit the cache lacks = %v; want ErrMissingCommit", err)
	}
	have, err := c.Have(ctx)
	if err != nil {
		t.Fatal(err)
	}
	full, err := SendBase(ctx, r.store, repo, b, have, r.lim)
	if err != nil || !full.Full {
		t.Fatalf("SendBase with the cache's Have = %+v, %v; want full", full, err)
	}
	if got, err := c.ReceiveBase(ctx, r.store, full.Key); err != nil || got != b {
		t.Fatalf("ReceiveBase = %s, %v", got, err)
	}
}

// TestCheckedOutBranchRefused: a worker branch checked out in a work tree
// of the user's repository is not moved under it.
func TestCheckedOutBranchRefused(t *testing.T) {
	w := newWorker(t, 1, 100)
	sent := w.send(t)
	local := filepath.Join(tempDir(t), "local")
	gitT(t, w.repo, "worktree", "add", "-q", "-b", testBranch, local, w.base)
	check := unchanged(t, w.repo)
	if _, err := w.fetch(t, sent.Key, w.lim); !errors.Is(err, ErrCheckedOut) {
		t.Fatalf("FetchBranch = %v; want ErrCheckedOut", err)
	}
	check()
	if got := gitT(t, local, "rev-parse", "HEAD"); got != w.base {
		t.Fatalf("the checked-out worktree moved to %s", got)
	}
}

// TestScratchPermissions: bundles wait in a 0700 directory, as 0600 files,
// and go with it.
func TestScratchPermissions(t *testing.T) {
	lim := Limits{TempDir: tempDir(t)}
	s, err := lim.newScratch()
	if err != nil {
		t.Fatal(err)
	}
	f, err := s.create()
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	for path, want := range map[string]os.FileMode{s.dir: 0o700 | os.ModeDir, s.bundle: 0o600} {
		if fi, err := os.Stat(path); err != nil || fi.Mode() != want {
			t.Errorf("%s: mode %v (%v), want %v", path, fi.Mode(), err, want)
		}
	}
	s.close()
	if ents, _ := os.ReadDir(lim.TempDir); len(ents) != 0 {
		t.Fatalf("left after close: %v", ents)
	}
}

// TestGitBounded: a git command past its bound is stopped and says so; a
// failing one carries git's stderr.
func TestGitBounded(t *testing.T) {
	lim := Limits{GitTimeout: 1}
	_, err := lim.git(context.Background(), tempDir(t), "init", "-q", "x")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("git past its bound = %v; want DeadlineExceeded", err)
	}
	repo, _ := userRepo(t, 1, 10)
	_, err = Limits{}.git(t.Context(), repo, "rev-parse", "--verify", "no-such-ref")
	if err == nil || !strings.Contains(err.Error(), "Needed a single revision") {
		t.Fatalf("failing git = %v; want its stderr in the error", err)
	}
}

// TestMaliciousObjectsRefused: objects fsck refuses (a .gitmodules whose
// URL would be taken as an option, CVE-2018-17456) do not reach the user's
// repository, though git accepts them in a bundle fetch.
func TestMaliciousObjectsRefused(t *testing.T) {
	w := newWorker(t, 1, 100)
	commitFile(t, w.wt, ".gitmodules", "[submodule \"x\"]\n\tpath = x\n\turl = -u./payload\n", "evil")
	sent := w.send(t)
	check := unchanged(t, w.repo)
	_, err := w.fetch(t, sent.Key, w.lim)
	if !errors.Is(err, ErrBadBundle) || !strings.Contains(err.Error(), "gitmodulesUrl") {
		t.Fatalf("FetchBranch = %v; want ErrBadBundle naming gitmodulesUrl", err)
	}
	check()
}

// TestAckedTheFleetLacks: a branch bundle made against a tip the fleet
// never took is refused as missing prerequisites, changing nothing; sent
// against the base alone it is taken.
func TestAckedTheFleetLacks(t *testing.T) {
	w := newWorker(t, 1, 100)
	unseen := gitT(t, w.wt, "rev-parse", "HEAD")
	tip := commitFile(t, w.wt, "later.txt", "later\n", "later")
	sent, err := w.c.SendBranch(t.Context(), w.store, testBranch, w.base, unseen)
	if err != nil {
		t.Fatal(err)
	}
	check := unchanged(t, w.repo)
	if _, err := w.fetch(t, sent.Key, w.lim); !errors.Is(err, ErrMissingPrerequisites) {
		t.Fatalf("FetchBranch = %v; want ErrMissingPrerequisites", err)
	}
	check()
	if got, err := w.fetch(t, w.send(t).Key, w.lim); err != nil || got != tip {
		t.Fatalf("FetchBranch = %s, %v; want %s", got, err, tip)
	}
}

// TestCachesCleanUpAfterACrash: what a crashed host left in its caches'
// temporary directory goes when they are opened again; the caches stay.
func TestCachesCleanUpAfterACrash(t *testing.T) {
	w := newWorker(t, 1, 100)
	dir := w.caches.dir
	left := filepath.Join(dir, "tmp", "gitmove-123")
	put(t, left, "bundle", []byte("half a bundle"))
	put(t, filepath.Join(dir, ".init-456"), "HEAD", []byte("ref: refs/heads/main\n"))
	if _, err := OpenCaches(dir, Limits{}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{left, filepath.Join(dir, ".init-456")} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s still there (%v)", p, err)
		}
	}
	if ok, err := w.c.hasCommit(t.Context(), w.base); !ok || err != nil {
		t.Fatalf("the cache lost its base: %v, %v", ok, err)
	}
}
