//go:build linux

package wine

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/agents-fleet/fleet/internal/testwait"
)

// descriptor is what a fleet announces in <fleetHome>/sockets/<id>.json.
type descriptor struct {
	ID         string `json:"id"`
	PID        int    `json:"pid"`
	Cwd        string `json:"cwd"`
	SocketPath string `json:"socketPath"`
	TokenPath  string `json:"tokenPath"`
	FleetHome  string `json:"fleetHome"`
}

// descriptors reads the descriptors in h's registry folder from Linux,
// without a Windows process: waiting for one does not touch the pipe.
func (h *host) descriptors() []descriptor {
	names, _ := filepath.Glob(filepath.Join(h.home, "sockets", "*.json"))
	var out []descriptor
	for _, name := range names {
		var d descriptor
		if b, err := os.ReadFile(name); err == nil && json.Unmarshal(b, &d) == nil && d.ID != "" {
			out = append(out, d)
		}
	}
	return out
}

// fleet is a running fleet.exe run --control-socket --headless.
type fleet struct {
	run *proc
	d   descriptor
}

// startFleet starts a fleet in h (run --control-socket --headless args...)
// and waits for its descriptor (a new one: h may have had a fleet before).
// At the end of the test it is stopped with Ctrl-C, or killed if that does
// not stop it.
func (h *host) startFleet(t *testing.T, args ...string) *fleet {
	t.Helper()
	old := map[string]bool{}
	for _, d := range h.descriptors() {
		old[d.ID] = true
	}
	f := &fleet{run: h.start(t, fleetExe, append([]string{"run", "--control-socket", "--headless"}, args...)...)}
	testwait.Until(wineBound, func() bool {
		for _, d := range h.descriptors() {
			if !old[d.ID] {
				f.d = d
				return true
			}
		}
		return f.run.exited()
	})
	if f.d.ID == "" {
		t.Fatalf("no descriptor from fleet.exe run within %v (ended: %v)\nstderr:\n%s", wineBound, f.run.exited(), tail(f.run.errOut()))
	}
	t.Cleanup(func() {
		if f.run.exited() {
			return
		}
		f.run.interrupt()
		if !f.run.wait(wineBound) {
			t.Errorf("fleet.exe run did not stop within %v of Ctrl-C", wineBound)
		}
	})
	return f
}

// ls runs fleet.exe ls --json.
func (h *host) ls(t *testing.T) []descriptor {
	t.Helper()
	out, errOut, code := h.fleet(t, "ls", "--json")
	var ds []descriptor
	if err := json.Unmarshal([]byte(out), &ds); code != 0 || err != nil {
		t.Fatalf("fleet.exe ls --json: exit %d, %v\nstdout:\n%s\nstderr:\n%s", code, err, out, errOut)
	}
	return ds
}

// checkListed fails t unless ls lists f alone, as it announced itself.
func (h *host) checkListed(t *testing.T, f *fleet) {
	t.Helper()
	ds := h.ls(t)
	if len(ds) != 1 || ds[0] != f.d {
		t.Fatalf("fleet.exe ls --json lists %+v, want only %+v", ds, f.d)
	}
	d := ds[0]
	if d.SocketPath != `\\.\pipe\agents-fleet-`+d.ID ||
		!strings.EqualFold(d.Cwd, winPath(h.cwd)) ||
		!strings.EqualFold(d.FleetHome, winPath(h.home)) ||
		!strings.EqualFold(d.TokenPath, winPath(filepath.Join(h.home, "control", d.ID+".token"))) {
		t.Fatalf("descriptor %+v: want the pipe \\\\.\\pipe\\agents-fleet-%s, cwd %s, fleet home %s and its token there",
			d, d.ID, winPath(h.cwd), winPath(h.home))
	}
}

// frame holds the fields of a control-socket frame the tests look at.
type frame struct {
	Type     string `json:"type"`
	ID       string `json:"id"`
	Question string `json:"question"`
	Text     string `json:"text"`
	Agent    string `json:"agent"`
	Message  string `json:"message"`
	Kind     string `json:"kind"`
	Reason   string `json:"reason"`
	Approved bool   `json:"approved"`
	// Conversation is hydrate's.
	Conversation []entry `json:"conversation"`
}

// entry is an entry of hydrate's conversation.
type entry struct {
	Text string `json:"text"`
}

// frames decodes the NDJSON lines that fleet.exe events printed.
func frames(t *testing.T, lines []string) []frame {
	t.Helper()
	out := make([]frame, len(lines))
	for i, l := range lines {
		if err := json.Unmarshal([]byte(l), &out[i]); err != nil || out[i].Type == "" {
			t.Fatalf("fleet.exe events printed a line that is not a frame (%v): %s", err, l)
		}
	}
	return out
}

// waitFrame waits for p (a fleet.exe events) to print a frame that match
// accepts, and returns it.
func waitFrame(t *testing.T, p *proc, what string, match func(frame) bool) frame {
	t.Helper()
	var found *frame
	testwait.Until(wineBound, func() bool {
		fs := frames(t, p.lines())
		if i := slices.IndexFunc(fs, match); i >= 0 {
			found = &fs[i]
			return true
		}
		return p.exited()
	})
	if found == nil {
		t.Fatalf("fleet.exe events printed no %s within %v (ended: %v)\nstdout:\n%s\nstderr:\n%s", what, wineBound, p.exited(), tail(p.out()), tail(p.errOut()))
	}
	return *found
}

// replay waits for p (a fleet.exe events) to print replayEnd and returns
// the frames up to it.
func replay(t *testing.T, p *proc) []frame {
	t.Helper()
	waitFrame(t, p, "replayEnd", func(f frame) bool { return f.Type == "replayEnd" })
	fs := frames(t, p.lines())
	return fs[:slices.IndexFunc(fs, func(f frame) bool { return f.Type == "replayEnd" })+1]
}

// snapshotOrder is the order of the set-once snapshots in a replay, from
// the protocol page ("Replay order on attach", step 2), written out here
// rather than taken from the fleet's code that the test checks.
var snapshotOrder = []string{"commandCatalog", "fleetIntel", "fleetEvolution", "fleetStore", "fleetExperiment", "hydrate"}

// checkReplay fails t unless fs is a replay in the protocol's order:
// welcome; the snapshots present, in snapshotOrder (the command catalog
// and hydrate always are); the requests still waiting, which must be
// pending, in creation order; the last fleetState, which must be there when
// withState; replayEnd.
func checkReplay(t *testing.T, fs []frame, pending []string, withState bool) {
	t.Helper()
	types := make([]string, len(fs))
	for i, f := range fs {
		types[i] = f.Type
	}
	t.Logf("replay: %v", types)
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("replay %v: %s", types, fmt.Sprintf(format, args...))
	}
	if len(fs) == 0 || fs[0].Type != "welcome" {
		fail("does not start with welcome")
	}
	i, last := 1, -1
	var snapshots []string
	for ; i < len(fs); i++ {
		k := slices.Index(snapshotOrder, fs[i].Type)
		if k < 0 {
			break
		}
		if k <= last {
			fail("snapshot %s out of order (the order is %v)", fs[i].Type, snapshotOrder)
		}
		last = k
		snapshots = append(snapshots, fs[i].Type)
	}
	if !slices.Contains(snapshots, "commandCatalog") || !slices.Contains(snapshots, "hydrate") {
		fail("the snapshots after welcome, %v, lack commandCatalog or hydrate", snapshots)
	}
	var requests []string
	for ; i < len(fs) && (fs[i].Type == "askRequest" || fs[i].Type == "confirmRequest"); i++ {
		requests = append(requests, fs[i].ID)
	}
	if !slices.Equal(requests, pending) {
		fail("the waiting requests after the snapshots are %v, want %v", requests, pending)
	}
	if i < len(fs) && fs[i].Type == "fleetState" {
		i++
	} else if withState {
		fail("no fleetState after the requests, though the fleet had broadcast one")
	}
	if i != len(fs)-1 || fs[i].Type != "replayEnd" {
		fail("frame %d is not the replayEnd that ends it", i)
	}
}

// hello has wincheck dial f's pipe and say hello with f's token ("right"),
// or with one a hex digit off ("wrong"). It returns the fleet's first
// frame and, when that is not welcome, whether the fleet then closed the
// connection.
func (h *host) hello(t *testing.T, f *fleet, token string) (first frame, closed bool) {
	t.Helper()
	out, errOut, code := h.run(t, wincheckExe, "hello", f.d.SocketPath, f.d.TokenPath, token)
	var r struct {
		First  frame `json:"first"`
		Closed bool  `json:"closed"`
	}
	if err := json.Unmarshal([]byte(out), &r); code != 0 || err != nil {
		t.Fatalf("wincheck hello (%s token): exit %d, %v\nstdout:\n%s\nstderr:\n%s", token, code, err, out, errOut)
	}
	return r.First, r.Closed
}

var queued = regexp.MustCompile(`^Queued (t[0-9]+): `)

// queue sends the task line "$ command" and returns the task's id.
func (h *host) queue(t *testing.T, command string) string {
	t.Helper()
	out, errOut, code := h.fleet(t, "send", "--wait-reply", "$ "+command)
	m := queued.FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("fleet.exe send --wait-reply %q: exit %d\nstdout:\n%s\nstderr:\n%s", "$ "+command, code, out, errOut)
	}
	return m[1]
}

// The fleet on Windows, from the consoles a user runs beside it: one fleet
// started in a fresh folder that is not a git repository, with its own
// fleet home, and the cases of the issue in turn against it.
func TestFleet(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	f := h.startFleet(t)

	// ls goes first: no Windows process has opened the pipe yet (the test
	// waited for the descriptor file from Linux).
	t.Run("ls finds it as the first client", func(t *testing.T) {
		h.checkListed(t, f)
	})

	t.Run("send --wait-reply /tasks answers", func(t *testing.T) {
		out, errOut, code := h.fleet(t, "send", "--wait-reply", "/tasks")
		if code != 0 || !strings.Contains(out, "No tasks yet") {
			t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
		}
	})

	t.Run("an ask answered with fleet answer and events replaying in order", func(t *testing.T) {
		a := h.start(t, fleetExe, "events")
		fs := replay(t, a)
		checkReplay(t, fs, nil, false)
		hydrate := fs[slices.IndexFunc(fs, func(f frame) bool { return f.Type == "hydrate" })]
		if !slices.ContainsFunc(hydrate.Conversation, func(e entry) bool { return strings.Contains(e.Text, "is not in a git repository") }) {
			t.Fatalf("the fleet does not say that %s is not in a git repository: %+v", winPath(h.cwd), hydrate.Conversation)
		}

		// The task runs a batch file, not a one-line command: cmd expands
		// %A% in a line when it reads the line, before set /p has set it
		// (Wine's cmd expands later; Windows' does not). The file is in
		// h.logs: a subtest's TempDir has the subtest's name in its path,
		// with characters that cmd reads as separators (a comma).
		script := filepath.Join(h.logs, "ask.cmd")
		body := "@echo off\r\n" +
			`echo ::ask::{"question":"Which env?","choices":["staging","prod"]}` + "\r\n" +
			"set /p A=\r\n" +
			"echo got %A%\r\n" +
			"cd\r\n"
		if err := os.WriteFile(script, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		h.queue(t, winPath(script))
		ask := waitFrame(t, a, "askRequest", func(f frame) bool { return f.Type == "askRequest" && f.Question == "Which env?" })

		out, errOut, code := h.fleet(t, "pending", "--json")
		var waiting []frame
		if err := json.Unmarshal([]byte(out), &waiting); code != 0 || err != nil || len(waiting) != 1 || waiting[0].ID != ask.ID {
			t.Fatalf("fleet.exe pending --json: exit %d, %v, want only %s\nstdout:\n%s\nstderr:\n%s", code, err, ask.ID, out, errOut)
		}

		// A console that attaches now is replayed the waiting ask, and
		// the last fleetState if the first console has seen one by now.
		sawState := slices.ContainsFunc(frames(t, a.lines()), func(f frame) bool { return f.Type == "fleetState" })
		b := h.start(t, fleetExe, "events")
		checkReplay(t, replay(t, b), []string{ask.ID}, sawState)

		out, errOut, code = h.fleet(t, "answer", ask.ID, "prod")
		if code != 0 {
			t.Fatalf("fleet.exe answer %s prod: exit %d\nstdout:\n%s\nstderr:\n%s", ask.ID, code, out, errOut)
		}
		waitFrame(t, a, "confirmResolved of the ask", func(f frame) bool {
			return f.Type == "confirmResolved" && f.ID == ask.ID && f.Approved && f.Kind == "ask" && f.Reason == "answered"
		})
		got := waitFrame(t, a, `transcript "got prod"`, func(f frame) bool { return f.Type == "transcript" && f.Text == "got prod" })
		// The task ran in the fleet's folder itself: there are no worktrees
		// outside a git repository.
		waitFrame(t, a, "transcript of the task's folder", func(f frame) bool {
			return f.Type == "transcript" && f.Agent == got.Agent && strings.EqualFold(f.Text, winPath(h.cwd))
		})
	})

	t.Run("a wrong token is refused", func(t *testing.T) {
		// The right token first, so that the refusal is the token's doing.
		if first, _ := h.hello(t, f, "right"); first.Type != "welcome" {
			t.Fatalf("with the right token: %+v; want welcome", first)
		}
		if first, closed := h.hello(t, f, "wrong"); first.Type != "error" || !strings.Contains(first.Message, "token") || !closed {
			t.Fatalf("with a wrong token: %+v, closed %v; want an error frame about the token, then the connection closed", first, closed)
		}
	})

	t.Run("the pipe's security descriptor names only the user", func(t *testing.T) {
		out, errOut, code := h.run(t, wincheckExe, "sd", f.d.SocketPath)
		var r struct {
			SDDL      string `json:"sddl"`
			User      string `json:"user"`
			ServerPID int    `json:"serverPid"`
		}
		if err := json.Unmarshal([]byte(out), &r); code != 0 || err != nil {
			t.Fatalf("wincheck sd: exit %d, %v\nstdout:\n%s\nstderr:\n%s", code, err, out, errOut)
		}
		if r.ServerPID != f.d.PID {
			t.Fatalf("the pipe is served by process %d, not by the fleet (%d)", r.ServerPID, f.d.PID)
		}
		// A user's SID, not a group's (S-1-5-32-…) nor a well-known one.
		if !strings.HasPrefix(r.User, "S-1-5-21-") {
			t.Fatalf("the user's SID is %s", r.User)
		}
		if err := onlyUser(r.SDDL, r.User); err != nil {
			t.Fatalf("descriptor %s: %v", r.SDDL, err)
		}
	})

	t.Run("cancel stops a running ping and its children", func(t *testing.T) {
		id := h.queue(t, "cmd /c ping -n 30 127.0.0.1")
		// wincheck holds the task's processes open from when it finds
		// the ping until they end (no pid can be given out again in
		// between), for 60 s at most: the ping would end by itself after
		// 29 s, with exit code 0.
		w := h.start(t, wincheckExe, "watch", strconv.Itoa(f.d.PID), "ping.exe", "60")
		testwait.Until(wineBound, func() bool { return slices.Contains(w.lines(), `{"event":"watching"}`) || w.exited() })
		if !slices.Contains(w.lines(), `{"event":"watching"}`) {
			t.Fatalf("wincheck watch found no ping.exe of the fleet's (ended: %v)\nstdout:\n%s\nstderr:\n%s", w.exited(), w.out(), w.errOut())
		}
		out, errOut, code := h.fleet(t, "send", "--wait-reply", "/cancel "+id)
		if code != 0 || !strings.Contains(out, "Cancelling "+id) {
			t.Fatalf("fleet.exe send /cancel %s: exit %d\nstdout:\n%s\nstderr:\n%s", id, code, out, errOut)
		}
		if !w.wait(wineBound) || w.code() != 0 {
			t.Fatalf("wincheck watch did not report within %v\nstdout:\n%s\nstderr:\n%s", wineBound, w.out(), w.errOut())
		}
		var found, ended []string
		for _, l := range w.lines() {
			var ev struct {
				Event string `json:"event"`
				Proc  struct {
					PID uint32 `json:"pid"`
					Exe string `json:"exe"`
				} `json:"proc"`
				Code uint32 `json:"code"`
			}
			if err := json.Unmarshal([]byte(l), &ev); err != nil {
				t.Fatalf("wincheck watch: %v: %s", err, l)
			}
			switch ev.Event {
			case "found":
				found = append(found, ev.Proc.Exe)
			case "exited":
				if ev.Code == 0 {
					t.Errorf("%s (pid %d) ran to its end (exit code 0): /cancel did not stop it", ev.Proc.Exe, ev.Proc.PID)
				}
				ended = append(ended, ev.Proc.Exe)
			case "running":
				t.Errorf("%s (pid %d) still ran 60 s after it was found", ev.Proc.Exe, ev.Proc.PID)
			}
		}
		// The task's cmd, the cmd /c it runs and the ping.
		if !slices.Contains(found, "ping.exe") || !slices.Contains(found, "cmd.exe") || !slices.Equal(found, ended) {
			t.Fatalf("the task's processes %v, of which ended %v\n%s", found, ended, w.out())
		}
		var tasks string
		cancelled := regexp.MustCompile(`(?m)^\s*` + id + `\s+failed\b.*cancelled`)
		if !testwait.Until(wineBound, func() bool {
			tasks, _, _ = h.fleet(t, "send", "--wait-reply", "/tasks")
			return cancelled.MatchString(tasks)
		}) {
			t.Fatalf("/tasks does not show %s cancelled:\n%s", id, tasks)
		}
	})
}

// onlyUser returns an error unless the SDDL string sddl names user alone:
// as owner, as group and in every entry of a protected access list, which
// only allows; no system access list.
func onlyUser(sddl, user string) error {
	rest, ok := strings.CutPrefix(sddl, "O:"+user+"G:"+user+"D:P")
	if !ok {
		return fmt.Errorf("want owner and group %s and a protected access list (D:P)", user)
	}
	if !strings.HasPrefix(rest, "(") || !strings.HasSuffix(rest, ")") {
		return fmt.Errorf("the access list %q has no entries, or something after them", rest)
	}
	for _, ace := range strings.Split(rest[1:len(rest)-1], ")(") {
		f := strings.Split(ace, ";")
		if len(f) != 6 || f[0] != "A" || f[5] != user {
			return fmt.Errorf("entry (%s) is not one that allows %s", ace, user)
		}
	}
	return nil
}

// Ctrl-C (CTRL_C_EVENT, which Wine gives a Windows process for SIGINT)
// stops the fleet cleanly, its console seeing the connection close and
// its descriptor and token gone, and the next fleet in the same home
// starts and answers.
func TestCtrlC(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	f := h.startFleet(t)
	h.checkListed(t, f)
	ev := h.start(t, fleetExe, "events")
	replay(t, ev)

	if err := f.run.interrupt(); err != nil {
		t.Fatal(err)
	}
	if !f.run.wait(wineBound) || f.run.code() != 0 {
		t.Fatalf("fleet.exe run after Ctrl-C: ended %v, exit %d\nstderr:\n%s", f.run.exited(), f.run.code(), tail(f.run.errOut()))
	}
	if ds := h.descriptors(); len(ds) != 0 {
		t.Fatalf("descriptors left: %+v", ds)
	}
	if _, err := os.Stat(filepath.Join(h.home, "control", f.d.ID+".token")); !os.IsNotExist(err) {
		t.Fatalf("the token file is left (%v)", err)
	}
	// events exits 0 when the fleet closes the connection, 1 when it
	// breaks.
	if !ev.wait(wineBound) || ev.code() != 0 {
		t.Fatalf("fleet.exe events: ended %v, exit %d\nstderr:\n%s", ev.exited(), ev.code(), tail(ev.errOut()))
	}

	g := h.startFleet(t)
	if g.d.ID == f.d.ID {
		t.Fatalf("the second fleet has the first one's id %s", g.d.ID)
	}
	// This time the first client dials the pipe and says hello straight
	// away, as client.Dial does: fleet.exe's commands open the pipe once
	// to probe it before they dial, which would use up the instance
	// ListenPipe makes first, that Wine hangs a client on, if the fleet
	// had not used it up itself.
	if first, _ := h.hello(t, g, "right"); first.Type != "welcome" {
		t.Fatalf("the second fleet's first client: %+v; want welcome", first)
	}
	if out, errOut, code := h.fleet(t, "send", "--wait-reply", "/tasks"); code != 0 || strings.TrimSpace(out) == "" {
		t.Fatalf("fleet.exe send --wait-reply /tasks to the second fleet: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	h.checkListed(t, g)
}
