package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/agents-fleet/fleet/protocol"
	"github.com/agents-fleet/fleet/provider"
)

// gitRepo makes a repository with one commit in e.cwd.
func (e *env) gitRepo() {
	e.t.Helper()
	requireTool(e.t, "git")
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q", "--allow-empty", "-m", "root"},
	} {
		if out, err := exec.Command("git", append([]string{"-C", e.cwd}, args...)...).CombinedOutput(); err != nil {
			e.t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	os.WriteFile(filepath.Join(e.cwd, "README"), []byte("hello\n"), 0o644)
	for _, args := range [][]string{{"add", "README"}, {"-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q", "-m", "readme"}} {
		if out, err := exec.Command("git", append([]string{"-C", e.cwd}, args...)...).CombinedOutput(); err != nil {
			e.t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
}

func TestWorkersGetWorktreesAndFileChanges(t *testing.T) {
	e := newEnv(t)
	e.gitRepo()
	d := e.start("--control-socket", "--workers", "2")
	c := d.dial(protocol.ClientREPL, "review")
	s := watch(t, c)
	s.waitFor("replayEnd", isType(protocol.TypeReplayEnd))
	if _, err := c.Prompt("$ echo new > new.txt; echo more >> README; pwd"); err != nil {
		t.Fatal(err)
	}
	wtRoot := filepath.Join(e.home, "worktrees")
	// The task ran in its own worktree; the repository itself is untouched.
	pwd := s.waitFor("pwd", func(m protocol.Message) bool {
		tr, ok := m.(*protocol.Transcript)
		return ok && strings.HasPrefix(tr.Text, wtRoot)
	}).(*protocol.Transcript)
	fc := s.waitFor("fileChange", isType(protocol.TypeFileChange)).(*protocol.FileChange)
	byPath := map[string]protocol.FileChangeEntry{}
	for _, ch := range fc.Changes {
		byPath[ch.Path] = ch
	}
	if ch := byPath["new.txt"]; ch.ChangeType != protocol.ChangeCreated || ch.Agent != "w1" || ch.AbsolutePath != filepath.Join(pwd.Text, "new.txt") {
		t.Fatalf("new.txt: %+v", fc.Changes)
	}
	if ch := byPath["README"]; ch.ChangeType != protocol.ChangeEdited || len(fc.Changes) != 2 {
		t.Fatalf("README: %+v", fc.Changes)
	}
	if _, err := os.Stat(filepath.Join(e.cwd, "new.txt")); err == nil {
		t.Fatal("the task wrote into the repository, not its worktree")
	}
	fs := s.waitFor("worktreePath", func(m protocol.Message) bool {
		fs, ok := m.(*protocol.FleetState)
		return ok && len(fs.Workers) == 1 && fs.Workers[0].WorktreePath != "" && fs.Workers[0].Status == "completed"
	}).(*protocol.FleetState)
	if fs.Workers[0].WorktreePath != pwd.Text {
		t.Fatalf("worktreePath %q, ran in %q", fs.Workers[0].WorktreePath, pwd.Text)
	}
	branches, _ := exec.Command("git", "-C", e.cwd, "branch", "--list", "fleet/*").Output()
	if !strings.Contains(string(branches), "/w1") {
		t.Fatalf("branches: %s", branches)
	}
	// The finished worktree stays for review; a dirty one needs --force.
	c.Prompt("/clean")
	r := s.waitFor("clean", func(m protocol.Message) bool {
		r, ok := m.(*protocol.Reply)
		return ok && strings.HasPrefix(r.Text, "Removed")
	}).(*protocol.Reply)
	if !strings.Contains(r.Text, "Kept 1") {
		t.Fatalf("dirty worktree removed without --force: %s", r.Text)
	}
	c.Prompt("/clean --force")
	s.waitFor("forced", func(m protocol.Message) bool {
		r, ok := m.(*protocol.Reply)
		return ok && strings.HasPrefix(r.Text, "Removed 1 worktree(s): w1")
	})
	if _, err := os.Stat(pwd.Text); err == nil {
		t.Fatal("worktree still there")
	}
	d.stop()
}

func TestKill9ThenResumeKeepsWhatClientsWereTold(t *testing.T) {
	e := newEnv(t)
	d := e.start("--control-socket", "--workers", "1")
	c := d.dial(protocol.ClientREPL, "witness")
	s := watch(t, c)
	s.waitFor("replayEnd", isType(protocol.TypeReplayEnd))
	if _, err := c.Prompt("$ for i in $(seq 1 300); do echo line-$i; done\n$ echo started; sleep 60\n$ echo requeued"); err != nil {
		t.Fatal(err)
	}
	// Everything the witness is told until the kill.
	told := map[string]bool{}
	s.waitFor("t2 running", func(m protocol.Message) bool {
		if tr, ok := m.(*protocol.Transcript); ok {
			told[tr.Agent+"|"+tr.Text] = true
		}
		tr, ok := m.(*protocol.Transcript)
		return ok && tr.Text == "started"
	})
	if err := d.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-d.done

	out, _, code := e.fleet("", "sessions", "--json")
	var sessions []struct {
		ID    string         `json:"id"`
		Mode  string         `json:"mode"`
		Tasks map[string]int `json:"tasks"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &sessions) != nil || len(sessions) != 1 {
		t.Fatalf("sessions: %d %s", code, out)
	}
	if ss := sessions[0]; ss.Mode != "legacy" || ss.Tasks["total"] != 3 || ss.Tasks["done"] != 1 || ss.Tasks["running"] != 1 || ss.Tasks["pending"] != 1 {
		t.Fatalf("saved session %+v", ss)
	}
	if out, _, _ := e.fleet("", "sessions"); !strings.Contains(out, sessions[0].ID) || !strings.Contains(out, "1/0/3") {
		t.Fatalf("sessions table:\n%s", out)
	}
	// The running task (sleep 60) outlived the killed fleet.
	leftovers := markedProcesses(sessions[0].ID)
	if runtime.GOOS == "linux" && len(leftovers) == 0 {
		t.Fatal("no process of the running task outlived the kill")
	}

	// Resume with a prefix of the id.
	d2 := e.start("--control-socket", "--resume", sessions[0].ID[:6])
	c2 := d2.dial(protocol.ClientREPL, "late")
	s2 := watch(t, c2)
	hyd := s2.waitFor("hydrate", isType(protocol.TypeHydrate)).(*protocol.Hydrate)
	// The resume stopped them, and said so.
	if runtime.GOOS == "linux" {
		if left := markedProcesses(sessions[0].ID); len(left) != 0 {
			t.Fatalf("processes %v of the killed fleet's task still run after the resume", left)
		}
		said := false
		for _, c := range hyd.Conversation {
			said = said || strings.Contains(c.Text, "that tasks of the previous run left running")
		}
		if !said {
			s2.waitFor("note about stopped processes", func(m protocol.Message) bool {
				r, ok := m.(*protocol.Reply)
				return ok && strings.Contains(r.Text, "that tasks of the previous run left running")
			})
		}
	}
	// A session is served by one fleet process at a time.
	if _, errOut, code := e.fleet("", "run", "--headless", "--resume", sessions[0].ID); code == 0 || !strings.Contains(errOut, "served by another fleet process") {
		t.Fatalf("resume a session that is being served: %d %s", code, errOut)
	}
	have := map[string]bool{}
	for _, l := range hyd.Transcripts {
		have[l.Agent+"|"+l.Text] = true
	}
	// The window is the last 200 lines per agent: everything told within it
	// must be there.
	for i := 101; i <= 300; i++ {
		if key := fmt.Sprintf("w1|line-%d", i); told[key] && !have[key] {
			t.Fatalf("told %q before the kill, missing after resume", key)
		}
	}
	userSaid := false
	for _, c := range hyd.Conversation {
		userSaid = userSaid || c.Role == "user" && strings.Contains(c.Text, "echo requeued")
	}
	if !have["w2|started"] || !userSaid {
		t.Fatalf("hydrate conversation %+v", hyd.Conversation)
	}
	// The pending task queued again and ran on a new worker (possibly
	// before this console attached, then it is in the hydrate).
	if !have["w3|requeued"] {
		s2.waitFor("requeued task ran", func(m protocol.Message) bool {
			tr, ok := m.(*protocol.Transcript)
			return ok && tr.Text == "requeued" && tr.Agent == "w3"
		})
	}
	fs := s2.waitFor("fleetState", func(m protocol.Message) bool {
		fs, ok := m.(*protocol.FleetState)
		return ok && fs.Tasks.Done == 2
	}).(*protocol.FleetState)
	var t2 protocol.FleetTaskItem
	for _, it := range fs.Tasks.Items {
		if it.ID == "t2" {
			t2 = it
		}
	}
	if t2.Status != "failed" || fs.Tasks.Total != 3 || fs.Coordinator.SessionID != sessions[0].ID {
		t.Fatalf("after resume: t2 %+v tasks %+v", t2, fs.Tasks)
	}
	// New tasks continue the numbering.
	c2.Prompt("$ echo fresh")
	s2.waitFor("t4", func(m protocol.Message) bool {
		h, ok := m.(*protocol.HubEvent)
		return ok && h.Kind == "task.created" && strings.HasPrefix(h.Text, "t4:")
	})
	d2.stop()

	if _, errOut, code := e.fleet("", "run", "--headless", "--resume", sessions[0].ID, "--native-root"); code == 0 || !strings.Contains(errOut, "the session is legacy") {
		t.Fatalf("resume a legacy session with --native-root: %d %s", code, errOut)
	}
	if _, errOut, code := e.fleet("", "run", "--headless", "--resume", "nope"); code == 0 || !strings.Contains(errOut, "no saved session") {
		t.Fatalf("resume unknown: %d %s", code, errOut)
	}
}

// markedProcesses lists the live processes (zombies excluded) whose
// environment marks them with session (Linux: /proc; elsewhere nil).
func markedProcesses(session string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || !strings.Contains("\x00"+string(env), "\x00"+provider.SessionEnv+"="+session+"\x00") {
			continue
		}
		if stat, err := os.ReadFile("/proc/" + e.Name() + "/stat"); err == nil && !strings.Contains(string(stat), ") Z ") {
			pids = append(pids, pid)
		}
	}
	return pids
}

func TestTwoFleetsInOneRepository(t *testing.T) {
	e := newEnv(t)
	e.gitRepo()
	a := e.start("--control-socket", "--name", "a")
	b := e.start("--control-socket", "--name", "b")
	ca, cb := a.dial(protocol.ClientOther, "a"), b.dial(protocol.ClientOther, "b")
	sa, sb := watch(t, ca), watch(t, cb)
	sa.waitFor("replayEnd", isType(protocol.TypeReplayEnd))
	sb.waitFor("replayEnd", isType(protocol.TypeReplayEnd))
	// Both fleets start workers "w1".."w3" at once in the same repository.
	for _, c := range []interface{ Prompt(string) (string, error) }{ca, cb} {
		if _, err := c.Prompt("$ echo x > f1; pwd\n$ echo y > f2; pwd\n$ echo z > f3; pwd"); err != nil {
			t.Fatal(err)
		}
	}
	dirs := map[string]bool{}
	for _, s := range []*stream{sa, sb} {
		for range 3 {
			tr := s.waitFor("pwd", func(m protocol.Message) bool {
				tr, ok := m.(*protocol.Transcript)
				return ok && strings.HasPrefix(tr.Text, filepath.Join(e.home, "worktrees"))
			}).(*protocol.Transcript)
			dirs[tr.Text] = true
		}
	}
	if len(dirs) != 6 {
		t.Fatalf("6 workers should have 6 worktrees: %v", dirs)
	}
	for _, s := range []*stream{sa, sb} {
		s.waitFor("all done", func(m protocol.Message) bool {
			fs, ok := m.(*protocol.FleetState)
			return ok && fs.Tasks.Done == 3
		})
	}
	a.stop()
	b.stop()
}

func TestResumeAfterTheRepositoryMoved(t *testing.T) {
	e := newEnv(t)
	e.gitRepo()
	d := e.start("--control-socket")
	c := d.dial(protocol.ClientOther, "before")
	s := watch(t, c)
	s.waitFor("replayEnd", isType(protocol.TypeReplayEnd))
	c.Prompt("$ echo before-move")
	s.waitFor("done", func(m protocol.Message) bool {
		h, ok := m.(*protocol.HubEvent)
		return ok && h.Kind == "completed"
	})
	id := c.Welcome().SessionID
	d.stop()

	moved := e.cwd + "-moved"
	if err := os.Rename(e.cwd, moved); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(moved) })
	e2 := &env{t: t, home: e.home, cwd: moved}
	d2 := e2.start("--control-socket", "--resume", id)
	c2 := d2.dial(protocol.ClientOther, "after")
	s2 := watch(t, c2)
	hyd := s2.waitFor("hydrate", isType(protocol.TypeHydrate)).(*protocol.Hydrate)
	noted := false
	for _, cv := range hyd.Conversation {
		noted = noted || strings.Contains(cv.Text, "now runs in "+moved)
	}
	if !noted {
		t.Fatalf("no note about the move: %+v", hyd.Conversation)
	}
	c2.Prompt("$ cat README; pwd")
	s2.waitFor("new worktree from the moved repository", func(m protocol.Message) bool {
		tr, ok := m.(*protocol.Transcript)
		return ok && tr.Text == "hello" && tr.Agent == "w2"
	})
	d2.stop()
}

func TestRepositoryWithoutCommitsRunsInPlace(t *testing.T) {
	requireTool(t, "git")
	e := newEnv(t)
	if out, err := exec.Command("git", "-C", e.cwd, "init", "-q").CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	d := e.start("--control-socket")
	c := d.dial(protocol.ClientOther, "x")
	s := watch(t, c)
	s.waitFor("note", func(m protocol.Message) bool {
		h, ok := m.(*protocol.Hydrate)
		if !ok {
			return false
		}
		for _, cv := range h.Conversation {
			if strings.Contains(cv.Text, "no commits yet") {
				return true
			}
		}
		t.Fatalf("no note: %+v", h.Conversation)
		return false
	})
	c.Prompt("$ pwd")
	s.waitFor("ran in cwd", func(m protocol.Message) bool {
		tr, ok := m.(*protocol.Transcript)
		return ok && tr.Text == e.cwd
	})
	d.stop()
}
