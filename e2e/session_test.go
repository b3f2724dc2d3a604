package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/agents-fleet/fleet/e2e/e2etest"
	"github.com/agents-fleet/fleet/protocol"
)

func TestWorkersGetWorktreesAndFileChanges(t *testing.T) {
	e := e2etest.NewEnv(t)
	e.GitRepo()
	d := e.Start("--control-socket", "--workers", "2")
	c := d.Dial(protocol.ClientREPL, "review")
	s := e2etest.Watch(t, c)
	s.WaitFor("replayEnd", e2etest.IsType(protocol.TypeReplayEnd))
	if _, err := c.Prompt("$ echo new > new.txt; echo more >> README; pwd"); err != nil {
		t.Fatal(err)
	}
	wtRoot := filepath.Join(e.Home, "worktrees")
	// The task ran in its own worktree; the repository itself is untouched.
	pwd := s.WaitFor("pwd", func(m protocol.Message) bool {
		tr, ok := m.(*protocol.Transcript)
		return ok && strings.HasPrefix(tr.Text, wtRoot)
	}).(*protocol.Transcript)
	fc := s.WaitFor("fileChange", e2etest.IsType(protocol.TypeFileChange)).(*protocol.FileChange)
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
	if _, err := os.Stat(filepath.Join(e.Dir, "new.txt")); err == nil {
		t.Fatal("the task wrote into the repository, not its worktree")
	}
	fs := s.WaitFor("worktreePath", func(m protocol.Message) bool {
		fs, ok := m.(*protocol.FleetState)
		return ok && len(fs.Workers) == 1 && fs.Workers[0].WorktreePath != "" && fs.Workers[0].Status == "completed"
	}).(*protocol.FleetState)
	if fs.Workers[0].WorktreePath != pwd.Text {
		t.Fatalf("worktreePath %q, ran in %q", fs.Workers[0].WorktreePath, pwd.Text)
	}
	branches, _ := exec.Command("git", "-C", e.Dir, "branch", "--list", "fleet/*").Output()
	if !strings.Contains(string(branches), "/w1") {
		t.Fatalf("branches: %s", branches)
	}
	// The finished worktree stays for review; a dirty one needs --force.
	c.Prompt("/clean")
	r := s.WaitFor("clean", func(m protocol.Message) bool {
		r, ok := m.(*protocol.Reply)
		return ok && strings.HasPrefix(r.Text, "Removed")
	}).(*protocol.Reply)
	if !strings.Contains(r.Text, "Kept 1") {
		t.Fatalf("dirty worktree removed without --force: %s", r.Text)
	}
	c.Prompt("/clean --force")
	s.WaitFor("forced", func(m protocol.Message) bool {
		r, ok := m.(*protocol.Reply)
		return ok && strings.HasPrefix(r.Text, "Removed 1 worktree(s): w1")
	})
	if _, err := os.Stat(pwd.Text); err == nil {
		t.Fatal("worktree still there")
	}
	d.Stop()
}

func TestKill9ThenResumeKeepsWhatClientsWereTold(t *testing.T) {
	e := e2etest.NewEnv(t)
	d := e.Start("--control-socket", "--workers", "1")
	c := d.Dial(protocol.ClientREPL, "witness")
	s := e2etest.Watch(t, c)
	s.WaitFor("replayEnd", e2etest.IsType(protocol.TypeReplayEnd))
	if _, err := c.Prompt("$ for i in $(seq 1 300); do echo line-$i; done\n$ echo started; sleep 60\n$ echo requeued"); err != nil {
		t.Fatal(err)
	}
	// Everything the witness is told until the kill.
	told := map[string]bool{}
	s.WaitFor("t2 running", func(m protocol.Message) bool {
		if tr, ok := m.(*protocol.Transcript); ok {
			told[tr.Agent+"|"+tr.Text] = true
		}
		tr, ok := m.(*protocol.Transcript)
		return ok && tr.Text == "started"
	})
	if err := d.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-d.Done

	out, _, code := e.Fleet("", "sessions", "--json")
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
	if out, _, _ := e.Fleet("", "sessions"); !strings.Contains(out, sessions[0].ID) || !strings.Contains(out, "1/0/3") {
		t.Fatalf("sessions table:\n%s", out)
	}
	// The running task (sleep 60) outlived the killed fleet.
	leftovers := e2etest.MarkedProcesses(sessions[0].ID)
	if runtime.GOOS == "linux" && len(leftovers) == 0 {
		t.Fatal("no process of the running task outlived the kill")
	}

	// Resume with a prefix of the id.
	d2 := e.Start("--control-socket", "--resume", sessions[0].ID[:6])
	c2 := d2.Dial(protocol.ClientREPL, "late")
	s2 := e2etest.Watch(t, c2)
	hyd := s2.WaitFor("hydrate", e2etest.IsType(protocol.TypeHydrate)).(*protocol.Hydrate)
	// The resume stopped them, and said so.
	if runtime.GOOS == "linux" {
		if left := e2etest.MarkedProcesses(sessions[0].ID); len(left) != 0 {
			t.Fatalf("processes %v of the killed fleet's task still run after the resume", left)
		}
		said := false
		for _, c := range hyd.Conversation {
			said = said || strings.Contains(c.Text, "that tasks of the previous run left running")
		}
		if !said {
			s2.WaitFor("note about stopped processes", func(m protocol.Message) bool {
				r, ok := m.(*protocol.Reply)
				return ok && strings.Contains(r.Text, "that tasks of the previous run left running")
			})
		}
	}
	// A session is served by one fleet process at a time.
	if _, errOut, code := e.Fleet("", "run", "--headless", "--resume", sessions[0].ID); code == 0 || !strings.Contains(errOut, "served by another fleet process") {
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
		s2.WaitFor("requeued task ran", func(m protocol.Message) bool {
			tr, ok := m.(*protocol.Transcript)
			return ok && tr.Text == "requeued" && tr.Agent == "w3"
		})
	}
	fs := s2.WaitFor("fleetState", func(m protocol.Message) bool {
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
	s2.WaitFor("t4", func(m protocol.Message) bool {
		h, ok := m.(*protocol.HubEvent)
		return ok && h.Kind == "task.created" && strings.HasPrefix(h.Text, "t4:")
	})
	d2.Stop()

	if _, errOut, code := e.Fleet("", "run", "--headless", "--resume", sessions[0].ID, "--native-root"); code == 0 || !strings.Contains(errOut, "the session is legacy") {
		t.Fatalf("resume a legacy session with --native-root: %d %s", code, errOut)
	}
	if _, errOut, code := e.Fleet("", "run", "--headless", "--resume", "nope"); code == 0 || !strings.Contains(errOut, "no saved session") {
		t.Fatalf("resume unknown: %d %s", code, errOut)
	}
}

func TestTwoFleetsInOneRepository(t *testing.T) {
	e := e2etest.NewEnv(t)
	e.GitRepo()
	a := e.Start("--control-socket", "--name", "a")
	b := e.Start("--control-socket", "--name", "b")
	ca, cb := a.Dial(protocol.ClientOther, "a"), b.Dial(protocol.ClientOther, "b")
	sa, sb := e2etest.Watch(t, ca), e2etest.Watch(t, cb)
	sa.WaitFor("replayEnd", e2etest.IsType(protocol.TypeReplayEnd))
	sb.WaitFor("replayEnd", e2etest.IsType(protocol.TypeReplayEnd))
	// Both fleets start workers "w1".."w3" at once in the same repository.
	for _, c := range []interface{ Prompt(string) (string, error) }{ca, cb} {
		if _, err := c.Prompt("$ echo x > f1; pwd\n$ echo y > f2; pwd\n$ echo z > f3; pwd"); err != nil {
			t.Fatal(err)
		}
	}
	dirs := map[string]bool{}
	for _, s := range []*e2etest.Stream{sa, sb} {
		for range 3 {
			tr := s.WaitFor("pwd", func(m protocol.Message) bool {
				tr, ok := m.(*protocol.Transcript)
				return ok && strings.HasPrefix(tr.Text, filepath.Join(e.Home, "worktrees"))
			}).(*protocol.Transcript)
			dirs[tr.Text] = true
		}
	}
	if len(dirs) != 6 {
		t.Fatalf("6 workers should have 6 worktrees: %v", dirs)
	}
	for _, s := range []*e2etest.Stream{sa, sb} {
		s.WaitFor("all done", func(m protocol.Message) bool {
			fs, ok := m.(*protocol.FleetState)
			return ok && fs.Tasks.Done == 3
		})
	}
	a.Stop()
	b.Stop()
}

func TestResumeAfterTheRepositoryMoved(t *testing.T) {
	e := e2etest.NewEnv(t)
	e.GitRepo()
	d := e.Start("--control-socket")
	c := d.Dial(protocol.ClientOther, "before")
	s := e2etest.Watch(t, c)
	s.WaitFor("replayEnd", e2etest.IsType(protocol.TypeReplayEnd))
	c.Prompt("$ echo before-move")
	s.WaitFor("done", func(m protocol.Message) bool {
		h, ok := m.(*protocol.HubEvent)
		return ok && h.Kind == "completed"
	})
	id := c.Welcome().SessionID
	d.Stop()

	moved := e.Dir + "-moved"
	if err := os.Rename(e.Dir, moved); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(moved) })
	e2 := &e2etest.Env{T: t, Home: e.Home, Dir: moved}
	d2 := e2.Start("--control-socket", "--resume", id)
	c2 := d2.Dial(protocol.ClientOther, "after")
	s2 := e2etest.Watch(t, c2)
	hyd := s2.WaitFor("hydrate", e2etest.IsType(protocol.TypeHydrate)).(*protocol.Hydrate)
	noted := false
	for _, cv := range hyd.Conversation {
		noted = noted || strings.Contains(cv.Text, "now runs in "+moved)
	}
	if !noted {
		t.Fatalf("no note about the move: %+v", hyd.Conversation)
	}
	c2.Prompt("$ cat README; pwd")
	s2.WaitFor("new worktree from the moved repository", func(m protocol.Message) bool {
		tr, ok := m.(*protocol.Transcript)
		return ok && tr.Text == "hello" && tr.Agent == "w2"
	})
	d2.Stop()
}

func TestRepositoryWithoutCommitsRunsInPlace(t *testing.T) {
	e2etest.RequireTool(t, "git")
	e := e2etest.NewEnv(t)
	if out, err := exec.Command("git", "-C", e.Dir, "init", "-q").CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	d := e.Start("--control-socket")
	c := d.Dial(protocol.ClientOther, "x")
	s := e2etest.Watch(t, c)
	s.WaitFor("note", func(m protocol.Message) bool {
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
	s.WaitFor("ran in cwd", func(m protocol.Message) bool {
		tr, ok := m.(*protocol.Transcript)
		return ok && tr.Text == e.Dir
	})
	d.Stop()
}
