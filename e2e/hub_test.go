package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/e2e/e2etest"
	"github.com/agents-fleet/fleet/internal/testwait"
	"github.com/agents-fleet/fleet/internal/tgemu"
	"github.com/agents-fleet/fleet/protocol"
	"github.com/agents-fleet/fleet/registry"
)

// The hub tests run the real binary: fleets with --hub, `fleet hub`
// against the telegram-test-api emulator, and the operator played through
// the emulator's client API.

const (
	hubToken = "123456:HUB-test-token"
	opChat   = 42
	hubWait  = 45 * time.Second // generous: CI runs the race detector beside other work
)

type hubEnv struct {
	*e2etest.Env
	t   *testing.T
	emu *tgemu.Emulator
	op  *tgemu.User
	tok string // bot token file
	hub *hubProc
}

type hubProc struct {
	cmd    *exec.Cmd
	stderr *e2etest.Buffer
	done   chan struct{}
	err    error
}

// newHubEnv writes config.json's telegramHub (merged with extra) and
// starts the emulator; the hub is started by startHub.
func newHubEnv(t *testing.T, extra map[string]any) *hubEnv {
	e := e2etest.NewEnv(t)
	emu := tgemu.Start(t)
	h := &hubEnv{Env: e, t: t, emu: emu, op: emu.User(hubToken, opChat, opChat)}
	h.tok = filepath.Join(e.Home, "bot.token")
	if err := os.WriteFile(h.tok, []byte(hubToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	th := map[string]any{"botTokenFile": h.tok, "allowedChatIds": []int64{opChat}, "apiBaseUrl": emu.URL()}
	for k, v := range extra {
		th[k] = v
	}
	cfg := map[string]any{"telegramHub": th}
	if e2etest.Race {
		cfg["limits"] = map[string]any{"stallGraceMs": 5000}
	}
	data, _ := json.Marshal(cfg)
	if err := os.WriteFile(filepath.Join(e.Home, "config.json"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	return h
}

// startHub runs `fleet hub args...` and waits until fleet hub status answers.
func (h *hubEnv) startHub(args ...string) *hubProc {
	h.t.Helper()
	cmd := exec.Command(e2etest.Bin(), append([]string{"hub", "--log-level", "debug"}, args...)...)
	cmd.Dir = h.Dir
	cmd.Env = h.Environ()
	p := &hubProc{cmd: cmd, stderr: &e2etest.Buffer{}, done: make(chan struct{})}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		h.t.Fatal(err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	h.t.Cleanup(func() {
		p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(20 * time.Second):
			p.cmd.Process.Kill()
			<-p.done
		}
		if strings.Contains(p.stderr.String(), hubToken) || strings.Contains(p.stderr.String(), strings.SplitN(hubToken, ":", 2)[1]) {
			h.t.Error("the bot token is in the hub's log")
		}
		if h.t.Failed() {
			h.t.Logf("hub log:\n%s", p.stderr)
		}
	})
	if !testwait.Until(hubWait, func() bool {
		if _, _, code := h.Fleet("", "hub", "status"); code == 0 {
			return true
		}
		select {
		case <-p.done:
			h.t.Fatalf("fleet hub exited: %v\n%s", p.err, p.stderr)
		default:
		}
		return false
	}) {
		h.t.Fatalf("fleet hub status never answered\n%s", p.stderr)
	}
	h.hub = p
	return p
}

// stop sends sig and waits for a clean exit.
func (p *hubProc) stop(t *testing.T, sig os.Signal) {
	t.Helper()
	p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		t.Fatalf("fleet hub did not stop on %v\n%s", sig, p.stderr)
	}
	if p.err != nil || !strings.Contains(p.stderr.String(), "fleet hub stopped") {
		t.Fatalf("fleet hub on %v: %v\n%s", sig, p.err, p.stderr)
	}
}

// startFleet runs a fleet with --hub in its own folder.
func (h *hubEnv) startFleet(name string, args ...string) *e2etest.Daemon {
	h.t.Helper()
	fe := &e2etest.Env{T: h.t, Home: h.Home, Dir: filepath.Join(h.t.TempDir(), name)}
	os.MkdirAll(fe.Dir, 0o755)
	return fe.Start(append([]string{"--hub", "--name", name}, args...)...)
}

// messages waits until some bot message in chat opChat satisfies ok and returns it.
func (h *hubEnv) message(what string, ok func(tgemu.BotMessage) bool) tgemu.BotMessage {
	h.t.Helper()
	var found tgemu.BotMessage
	h.emu.WaitFor(h.t, hubWait, what, func(ms []tgemu.BotMessage) bool {
		for _, m := range ms {
			if m.ChatID == opChat && ok(m) {
				found = m
				return true
			}
		}
		return false
	}, hubToken)
	return found
}

func (h *hubEnv) history() []tgemu.BotMessage {
	h.t.Helper()
	ms, err := h.emu.History(hubToken)
	if err != nil {
		h.t.Fatal(err)
	}
	return ms
}

func containing(sub string) func(tgemu.BotMessage) bool {
	return func(m tgemu.BotMessage) bool { return strings.Contains(m.Text, sub) }
}

func withButtons(sub string) func(tgemu.BotMessage) bool {
	return func(m tgemu.BotMessage) bool { return strings.Contains(m.Text, sub) && len(m.Buttons) > 0 }
}

// button returns the data of the button of m whose text contains label.
func button(t *testing.T, m tgemu.BotMessage, label string) string {
	t.Helper()
	for _, row := range m.Buttons {
		for _, b := range row {
			if strings.Contains(b.Text, label) {
				return b.Data
			}
		}
	}
	t.Fatalf("no %q button on message %d: %q %+v", label, m.MessageID, m.Text, m.Buttons)
	return ""
}

func (h *hubEnv) press(m tgemu.BotMessage, label string) {
	h.t.Helper()
	if err := h.op.Press(m.MessageID, button(h.t, m, label)); err != nil {
		h.t.Fatal(err)
	}
}

// approve answers fleet name's attach question and waits until it is attached.
func (h *hubEnv) approve(name string) tgemu.BotMessage {
	h.t.Helper()
	q := h.message("the attach question for "+name, func(m tgemu.BotMessage) bool {
		return strings.Contains(m.Text, "Fleet "+name+" wants to attach") && len(m.Buttons) > 0
	})
	h.press(q, "Approve")
	h.message(name+" attached", containing("attached to "+name))
	return q
}

func (h *hubEnv) waitCallbackAnswer(sub string) {
	h.t.Helper()
	h.emu.WaitCalls(h.t, hubWait, "a callback answered with "+sub, func(cs []tgemu.Call) bool {
		for _, c := range cs {
			if s, _ := c.Params["text"].(string); c.Method == "answerCallbackQuery" && strings.Contains(s, sub) {
				return true
			}
		}
		return false
	}, hubToken)
}

func userMessage(sub string) func(protocol.Message) bool {
	return func(m protocol.Message) bool {
		u, ok := m.(*protocol.UserMessage)
		return ok && strings.Contains(u.Text, sub)
	}
}

func transcriptLine(text string) func(protocol.Message) bool {
	return func(m protocol.Message) bool {
		tr, ok := m.(*protocol.Transcript)
		return ok && tr.Text == text
	}
}

// TestHubConfirmAnsweredElsewhere: a confirm answered by another console
// first is edited to say so; a press after that gets "already answered".
func TestHubConfirmAnsweredElsewhere(t *testing.T) {
	h := newHubEnv(t, nil)
	d := h.startFleet("alpha")
	term := d.Dial(protocol.ClientREPL, "terminal")
	watch := e2etest.Watch(t, term)
	h.startHub()
	h.approve("alpha")
	if _, err := term.Prompt(`$ echo '::confirm::deploy v1.2 to production?'; read a; echo "confirm said $a"`); err != nil {
		t.Fatal(err)
	}
	req := watch.WaitFor("the confirm", e2etest.IsType(protocol.TypeConfirmRequest)).(*protocol.ConfirmRequest)
	msg := h.message("the confirm in the chat", withButtons("deploy v1.2 to production?"))
	if !strings.Contains(msg.Text, "Approve?") {
		t.Errorf("confirm message: %q", msg.Text)
	}
	if err := term.Confirm(req.ID, false); err != nil {
		t.Fatal(err)
	}
	watch.WaitFor("the task seeing no", transcriptLine("confirm said no"))
	h.message("the confirm edited", func(m tgemu.BotMessage) bool {
		return m.MessageID == msg.MessageID && strings.Contains(m.Text, "answered elsewhere") && len(m.Buttons) == 0
	})
	h.press(msg, "Approve")
	h.waitCallbackAnswer("already answered (answered elsewhere")
}

// TestHubTwoFleetsRouting: replies go to the fleet replied to, /use picks
// the fleet for plain text, every message names its fleet, and a chat
// that is not allowed is ignored.
func TestHubTwoFleetsRouting(t *testing.T) {
	h := newHubEnv(t, nil)
	a := h.startFleet("alpha")
	b := h.startFleet("beta")
	wa := e2etest.Watch(t, a.Dial(protocol.ClientREPL, "ta"))
	wb := e2etest.Watch(t, b.Dial(protocol.ClientREPL, "tb"))
	h.startHub()
	h.approve("alpha")
	h.approve("beta")

	// Two fleets, no choice made: the hub asks which.
	if _, err := h.op.SendText("$ echo which-one"); err != nil {
		t.Fatal(err)
	}
	which := h.message("which fleet", withButtons("Which fleet is this for?"))
	h.press(which, "beta")
	wb.WaitFor("the routed prompt on beta", userMessage("which-one"))

	// A reply to alpha's message goes to alpha.
	att := h.message("alpha's attach line", containing("attached to alpha"))
	if _, err := h.op.ReplyTo(att.MessageID, "$ echo for-alpha"); err != nil {
		t.Fatal(err)
	}
	wa.WaitFor("the reply on alpha", userMessage("for-alpha"))

	// /use beta, then plain text goes to beta.
	if _, err := h.op.SendCommand("/use beta"); err != nil {
		t.Fatal(err)
	}
	h.message("the /use answer", containing("Plain text now goes to"))
	if _, err := h.op.SendText("$ echo plain-to-beta"); err != nil {
		t.Fatal(err)
	}
	wb.WaitFor("plain text on beta", userMessage("plain-to-beta"))
	h.message("beta's reply names beta", func(m tgemu.BotMessage) bool {
		return strings.Contains(m.Text, "[beta]") && strings.Contains(m.Text, "plain-to-beta")
	})

	// A stranger's chat: ignored, nothing sent there, nothing reaches a fleet.
	stranger := h.emu.User(hubToken, 666, 666)
	if _, err := stranger.SendText("$ echo from-stranger"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.op.SendText("$ echo after-stranger"); err != nil {
		t.Fatal(err)
	}
	wb.WaitFor("the operator's next prompt", userMessage("after-stranger"))
	for _, m := range h.history() {
		if m.ChatID == 666 || strings.Contains(m.Text, "from-stranger") {
			t.Errorf("the hub answered or relayed the stranger: %+v", m)
		}
	}
	if !strings.Contains(h.hub.stderr.String(), "ignored a message from a chat that is not allowed") {
		t.Error("the ignored message is not logged")
	}
	// /fleets lists both.
	if _, err := h.op.SendCommand("/fleets"); err != nil {
		t.Fatal(err)
	}
	h.message("/fleets", func(m tgemu.BotMessage) bool {
		return strings.Contains(m.Text, "alpha") && strings.Contains(m.Text, "beta") && strings.Contains(m.Text, "Fleets")
	})
}

// TestHubFloodIsCoalesced: 1,000 lines of output in a burst become a few
// messages, edited in place, at no more than about one call a second.
func TestHubFloodIsCoalesced(t *testing.T) {
	h := newHubEnv(t, map[string]any{"verbosity": "verbose"})
	d := h.startFleet("alpha")
	w := e2etest.Watch(t, d.Dial(protocol.ClientREPL, "t"))
	h.startHub()
	h.approve("alpha")
	if err := h.emu.ResetCalls(hubToken); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	term := d.Dial(protocol.ClientREPL, "t2")
	if _, err := term.Prompt("$ seq 1 1000"); err != nil {
		t.Fatal(err)
	}
	w.WaitFor("the last line", transcriptLine("1000"))
	h.message("the flood's last line", func(m tgemu.BotMessage) bool {
		return strings.Contains(m.Text, "lines of output so far") && strings.Contains(m.Text, "</code> 1000")
	})
	calls, err := h.emu.Calls(hubToken)
	if err != nil {
		t.Fatal(err)
	}
	var sends, edits int
	var last int64
	for _, c := range calls {
		if c.Method != "sendMessage" && c.Method != "editMessageText" {
			continue
		}
		if c.Method == "sendMessage" {
			sends++
		} else {
			edits++
		}
		// One chat: at most about one call a second (the emulator's clock
		// is the judge; 900 ms allows for its own scheduling).
		if last != 0 && c.Time-last < 900 {
			t.Errorf("two calls to the chat %d ms apart", c.Time-last)
		}
		last = c.Time
	}
	if sends > 10 {
		t.Errorf("1,000 lines became %d messages (and %d edits); want them coalesced", sends, edits)
	}
	t.Logf("1,000 lines in %s: %d messages, %d edits", time.Since(start).Round(time.Millisecond), sends, edits)
}

// TestHubFleetRestartAndEmulatorRestart: a fleet resumed after a restart
// is a new fleet (asked again, "approved before"), its history is not
// reposted; the Bot API going away shows in fleet hub status and the hub
// recovers when it is back.
func TestHubFleetRestartAndEmulatorRestart(t *testing.T) {
	h := newHubEnv(t, nil)
	d := h.startFleet("alpha")
	w := e2etest.Watch(t, d.Dial(protocol.ClientREPL, "t"))
	h.startHub()
	h.approve("alpha")
	if _, err := h.op.SendText("$ echo before-restart"); err != nil {
		t.Fatal(err)
	}
	w.WaitFor("the task's output", transcriptLine("before-restart"))
	h.message("its completion", containing("done in"))
	var session string
	for _, kv := range strings.Fields(d.Stderr.String()) {
		if s, ok := strings.CutPrefix(kv, "session="); ok {
			session = s
			break
		}
	}
	if session == "" {
		t.Fatalf("no session id in the fleet's log:\n%s", d.Stderr)
	}
	d.Stop()
	h.message("the exit notice", containing("the fleet has exited"))
	before := countContaining(h.history(), "before-restart")

	fe := &e2etest.Env{T: t, Home: h.Home, Dir: d.Desc.Cwd}
	d2 := fe.Start("--hub", "--name", "alpha", "--resume", session)
	q := h.message("asked again", func(m tgemu.BotMessage) bool {
		return strings.Contains(m.Text, d2.Desc.ID) && len(m.Buttons) > 0
	})
	if !strings.Contains(q.Text, "approved before") {
		t.Errorf("the second question does not say the fleet looks like one approved before: %q", q.Text)
	}
	h.press(q, "Approve")
	h.message("the second approval", func(m tgemu.BotMessage) bool {
		return m.MessageID == q.MessageID && strings.Contains(m.Text, "Approved")
	})
	h.emu.WaitFor(t, hubWait, "the resumed fleet attached, its history not reposted", func(ms []tgemu.BotMessage) bool {
		var attached []string
		for _, m := range ms {
			if strings.Contains(m.Text, "attached to alpha") {
				attached = append(attached, m.Text)
			}
		}
		return len(attached) == 2 && strings.Contains(attached[1], "earlier items of history not reposted")
	}, hubToken)
	if after := countContaining(h.history(), "before-restart"); after != before {
		t.Errorf("history was reposted: %d messages mention it, %d before", after, before)
	}

	// The Bot API goes away: status says so; it comes back: the hub hears again.
	h.emu.Stop()
	var out string
	if !testwait.Until(hubWait, func() bool {
		out, _, _ = h.Fleet("", "hub", "status", "--json")
		var s struct {
			Telegram struct {
				Healthy   bool   `json:"healthy"`
				LastError string `json:"lastError"`
			} `json:"telegram"`
		}
		json.Unmarshal([]byte(out), &s)
		return !s.Telegram.Healthy && s.Telegram.LastError != ""
	}) {
		t.Fatalf("hub status never showed the outage: %s", out)
	}
	h.emu.Restart(t)
	w2 := e2etest.Watch(t, d2.Dial(protocol.ClientREPL, "t2"))
	// The emulator lost its store; a message sent now must still reach the fleet.
	deadline := time.Now().Add(hubWait)
	for i := 0; ; i++ {
		if _, err := h.op.SendText(fmt.Sprintf("$ echo back-%d", i)); err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			got := waitCtx(ctx, w2, userMessage("back-"))
			cancel()
			if got {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the hub did not recover after the emulator came back\n%s", h.hub.stderr)
		}
	}
}

func countContaining(ms []tgemu.BotMessage, sub string) int {
	n := 0
	for _, m := range ms {
		if strings.Contains(m.Text, sub) {
			n++
		}
	}
	return n
}

// waitCtx waits for a frame matching pred until ctx is done.
func waitCtx(ctx context.Context, s *e2etest.Stream, pred func(protocol.Message) bool) bool {
	for {
		select {
		case f, ok := <-s.Frames:
			if !ok {
				return false
			}
			if pred(f.Msg) {
				return true
			}
		case <-ctx.Done():
			return false
		}
	}
}

// TestHubRefusesTamperedDescriptor: a descriptor whose paths are not the
// ones derived from its fleetHome is refused without asking; a descriptor
// changed under an attached fleet detaches it.
func TestHubRefusesTamperedDescriptor(t *testing.T) {
	h := newHubEnv(t, nil)
	d := h.startFleet("alpha")
	h.startHub()
	h.approve("alpha")

	// A forged descriptor for a live pid (ours), pointing at another socket.
	forged := d.Desc
	forged.PID = os.Getpid()
	id, err := registry.NewID(forged.PID)
	if err != nil {
		t.Fatal(err)
	}
	forged.ID, forged.Name = id, "evil"
	forged.SocketPath = filepath.Join(t.TempDir(), "evil.sock")
	regDir := filepath.Join(h.Home, "sockets")
	if _, err := registry.Write(regDir, forged); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { registry.Remove(regDir, forged.ID) })
	h.message("the refusal", containing("Refused a fleet descriptor"))
	for _, m := range h.history() {
		if strings.Contains(m.Text, "Fleet evil wants to attach") {
			t.Errorf("asked to attach a forged descriptor: %q", m.Text)
		}
	}

	// The attached fleet's descriptor changes under it: detached.
	changed := d.Desc
	changed.Name = "renamed"
	if _, err := registry.Write(regDir, changed); err != nil {
		t.Fatal(err)
	}
	h.message("the detach", containing("detached"))
	out, _, _ := h.Fleet("", "hub", "status")
	if !strings.Contains(out, "detached") {
		t.Errorf("hub status after the change:\n%s", out)
	}
}

// TestHubStartRefusals: the settings the hub cannot run without are
// refused at start, naming the key or the file; one hub per fleet home;
// fleet hub status exits 1 when no hub runs.
func TestHubStartRefusals(t *testing.T) {
	h := newHubEnv(t, nil)
	if _, stderr, code := h.Fleet("", "hub", "status"); code != 1 || !strings.Contains(stderr, "no fleet hub is running") {
		t.Errorf("hub status without a hub: exit %d, %q", code, stderr)
	}
	os.WriteFile(filepath.Join(h.Home, "config.json"), []byte(`{"telegramHub":{"botTokenFile":"`+h.tok+`"}}`), 0o600)
	if _, stderr, code := h.Fleet("", "hub"); code == 0 || !strings.Contains(stderr, "telegramHub.allowedChatIds") {
		t.Errorf("no allowedChatIds: exit %d, %q", code, stderr)
	}
	os.Chmod(h.tok, 0o644)
	if _, stderr, code := h.Fleet("", "hub", "--allowed-chat-id", "42"); code == 0 || !strings.Contains(stderr, h.tok) || !strings.Contains(stderr, "0600") {
		t.Errorf("token file 0644: exit %d, %q", code, stderr)
	}
	os.Chmod(h.tok, 0o600)
	h.startHub("--allowed-chat-id", "42", "--api-base-url", h.emu.URL())
	if _, stderr, code := h.Fleet("", "hub", "--allowed-chat-id", "42", "--api-base-url", h.emu.URL()); code == 0 || !strings.Contains(stderr, "already running") {
		t.Errorf("a second hub: exit %d, %q", code, stderr)
	}
	var out string
	var code int
	if !testwait.Until(hubWait, func() bool {
		out, _, code = h.Fleet("", "hub", "status")
		return code == 0 && strings.Contains(out, "telegram: healthy")
	}) {
		t.Fatalf("hub status never healthy: exit %d\n%s", code, out)
	}
	// SIGINT stops it cleanly; then no hub runs.
	h.hub.stop(t, os.Interrupt)
	if _, stderr, code := h.Fleet("", "hub", "status"); code != 1 || !strings.Contains(stderr, "no fleet hub is running") {
		t.Errorf("hub status after the hub stopped: exit %d, %q", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(h.Home, "hub", "hub.sock")); !os.IsNotExist(err) {
		t.Errorf("the status socket is left behind: %v", err)
	}
}

// TestHubNativeRootFromChat: in a native session a task the confirm policy
// names is posted as a native approval; Approve asks for the rationale by
// reply, and the reply becomes an approve with an operation id and the
// observed revision (its receipt shown); /root shows the root with Pause /
// Resume / Stop, and Pause takes a second tap.
func TestHubNativeRootFromChat(t *testing.T) {
	h := newHubEnv(t, nil)
	d := h.startFleet("nat", "--native-root")
	w := e2etest.Watch(t, d.Dial(protocol.ClientREPL, "t"))
	h.startHub()
	h.approve("nat")
	if _, err := h.op.SendText("$ mkdir -p scratch && rm -rf scratch && echo removed-it"); err != nil {
		t.Fatal(err)
	}
	na := h.message("the native approval", withButtons("Native approval needed"))
	if !strings.Contains(na.Text, "rm -rf scratch") {
		t.Errorf("the approval does not say what is approved: %q", na.Text)
	}
	h.press(na, "Approve")
	ask := h.message("the rationale prompt", containing("Reply to this message with your rationale for approving"))
	if _, err := h.op.ReplyTo(ask.MessageID, "scratch dir only; reviewed"); err != nil {
		t.Fatal(err)
	}
	h.message("the receipt", containing("approve accepted: receipt hub-op-"))
	w.WaitFor("the approved task running", transcriptLine("removed-it"))
	h.message("the approval edited", func(m tgemu.BotMessage) bool {
		return m.MessageID == na.MessageID && strings.Contains(m.Text, "approved here by") && len(m.Buttons) == 0
	})

	if _, err := h.op.SendCommand("/root"); err != nil {
		t.Fatal(err)
	}
	root := h.message("the root status", withButtons("intent <b>run</b>"))
	h.press(root, "Pause")
	confirm := h.message("the second tap", withButtons("Pause root"))
	h.press(confirm, "Confirm pause")
	h.message("the pause receipt", containing("pause accepted: receipt hub-op-"))
	out, code := h.rootJSONStatus()
	if code != 0 || !strings.Contains(out, `"intent":"pause"`) {
		t.Errorf("root after Pause from the chat (exit %d): %s", code, out)
	}
}

func (h *hubEnv) rootJSONStatus() (string, int) {
	out, _, code := h.Fleet("", "root", "status", "--json")
	return out, code
}

// TestHubPendingBeforeAttachAndForwardedCommands: a confirm raised before
// the hub attached is posted as actionable and answered from the chat; a
// slash command the hub does not know is the fleet's.
func TestHubPendingBeforeAttachAndForwardedCommands(t *testing.T) {
	h := newHubEnv(t, nil)
	d := h.startFleet("alpha")
	term := d.Dial(protocol.ClientREPL, "terminal")
	w := e2etest.Watch(t, term)
	if _, err := term.Prompt(`$ echo '::confirm::rotate the staging keys?'; read a; echo "rotate said $a"`); err != nil {
		t.Fatal(err)
	}
	w.WaitFor("the confirm", e2etest.IsType(protocol.TypeConfirmRequest))
	h.startHub()
	h.approve("alpha")
	c := h.message("the pending confirm", withButtons("rotate the staging keys?"))
	if !strings.Contains(c.Text, "asked before the hub attached") {
		t.Errorf("the replayed confirm does not say it is older: %q", c.Text)
	}
	h.press(c, "Approve")
	w.WaitFor("the task seeing yes", transcriptLine("rotate said yes"))
	h.message("the confirm edited", func(m tgemu.BotMessage) bool {
		return m.MessageID == c.MessageID && strings.Contains(m.Text, "approved here by") && len(m.Buttons) == 0
	})
	if _, err := h.op.SendCommand("/workers"); err != nil {
		t.Fatal(err)
	}
	w.WaitFor("/workers forwarded to the fleet", userMessage("/workers"))
	h.message("the fleet's /workers reply", containing("w1"))
}

// TestHubBotAPIFaults: a 429 is honoured and the message still arrives; a
// 409 on getUpdates shows as a conflict in fleet hub status until it stops.
func TestHubBotAPIFaults(t *testing.T) {
	h := newHubEnv(t, nil)
	d := h.startFleet("alpha")
	h.startHub()
	h.approve("alpha")
	if err := h.emu.Fault(hubToken, "sendMessage", 429, `{"ok":false,"error_code":429,"description":"Too Many Requests: retry after 2","parameters":{"retry_after":2}}`, 1); err != nil {
		t.Fatal(err)
	}
	term := d.Dial(protocol.ClientREPL, "terminal")
	if _, err := term.Prompt("$ echo after-429"); err != nil {
		t.Fatal(err)
	}
	h.message("the message refused once with 429", containing("Queued t1"))
	calls, err := h.emu.Calls(hubToken)
	if err != nil {
		t.Fatal(err)
	}
	var refused, sent int64
	for _, c := range calls {
		if c.Method == "sendMessage" && strings.Contains(fmt.Sprint(c.Params["text"]), "Queued t1") {
			if c.Fault == 429 {
				refused = c.Time
			} else if refused != 0 && sent == 0 {
				sent = c.Time
			}
		}
	}
	if refused == 0 || sent == 0 || sent-refused < 1900 {
		t.Errorf("429 retry_after 2 not honoured: refused at %d, sent at %d", refused, sent)
	}

	if err := h.emu.Fault(hubToken, "getUpdates", 409, `{"ok":false,"error_code":409,"description":"Conflict: terminated by other getUpdates request; make sure that only one bot instance is running"}`, 1000000); err != nil {
		t.Fatal(err)
	}
	waitStatus := func(what string, ok func(string) bool) {
		t.Helper()
		var out string
		if !testwait.Until(hubWait, func() bool { out, _, _ = h.Fleet("", "hub", "status"); return ok(out) }) {
			t.Fatalf("hub status never showed %s:\n%s", what, out)
		}
	}
	waitStatus("the conflict", func(s string) bool { return strings.Contains(s, "CONFLICT") && strings.Contains(s, "409") })
	h.emu.ClearFaults(hubToken)
	waitStatus("recovery", func(s string) bool { return strings.Contains(s, "telegram: healthy") })
	if !strings.Contains(h.hub.stderr.String(), "409 Conflict") {
		t.Error("the conflict is not in the hub's log")
	}
}
