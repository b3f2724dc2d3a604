//go:build linux

package wine

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agents-fleet/fleet/internal/tgemu"
)

const (
	hubToken = "123456:HUB-wine-token"
	opChat   = 42
)

// TestHubUnderWine: fleet.exe hub finds a fleet that asks for the hub
// (run --hub) through the registry, reaches it over its named pipe once the
// operator approves in Telegram (the Bot API emulator, on Linux), relays a
// prompt from the chat and the task's end back, answers `fleet hub status`
// over its own pipe, and stops on Ctrl-C without its bot token in its log.
func TestHubUnderWine(t *testing.T) {
	h := newHost(t)
	emu := tgemu.Start(t)
	op := emu.User(hubToken, opChat, opChat)
	tok := filepath.Join(h.home, "bot.token")
	if err := os.WriteFile(tok, []byte(hubToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, _ := json.Marshal(map[string]any{"telegramHub": map[string]any{
		"botTokenFile": winPath(tok), "allowedChatIds": []int64{opChat}, "apiBaseUrl": emu.URL()}})
	if err := os.WriteFile(filepath.Join(h.home, "config.json"), cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	h.startFleet(t, "--hub", "--name", "winfleet")
	hub := h.start(t, fleetExe, "hub", "--log-level", "debug")
	t.Cleanup(func() {
		if !hub.exited() {
			hub.interrupt()
			if !hub.wait(wineBound) {
				t.Errorf("fleet.exe hub did not stop within %v of Ctrl-C", wineBound)
			}
		}
		if log := hub.errOut(); strings.Contains(log, strings.SplitN(hubToken, ":", 2)[1]) {
			t.Error("the bot token is in the hub's log")
		}
		if t.Failed() {
			t.Logf("hub log:\n%s", tail(hub.errOut()))
		}
	})

	message := func(what string, ok func(tgemu.BotMessage) bool) tgemu.BotMessage {
		t.Helper()
		var found tgemu.BotMessage
		emu.WaitFor(t, wineBound, what, func(ms []tgemu.BotMessage) bool {
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
	q := message("the attach question", func(m tgemu.BotMessage) bool {
		return strings.Contains(m.Text, "Fleet winfleet wants to attach") && len(m.Buttons) > 0
	})
	approve := ""
	for _, row := range q.Buttons {
		for _, b := range row {
			if strings.HasSuffix(b.Text, "Approve") {
				approve = b.Data
			}
		}
	}
	if approve == "" {
		t.Fatalf("no Approve button on %+v", q)
	}
	if err := op.Press(q.MessageID, approve); err != nil {
		t.Fatal(err)
	}
	message("winfleet attached", func(m tgemu.BotMessage) bool { return strings.Contains(m.Text, "attached to winfleet") })

	if _, err := op.SendText("$ echo from-telegram"); err != nil {
		t.Fatal(err)
	}
	message("the task's end relayed", func(m tgemu.BotMessage) bool { return strings.Contains(m.Text, "done in") })
	// The prompt reached the fleet over its pipe: it is the fleet's task.
	out, errOut, code := h.fleet(t, "send", "--wait-reply", "/tasks")
	if code != 0 || !strings.Contains(out, "echo from-telegram") {
		t.Fatalf("fleet.exe send --wait-reply /tasks: exit %d, no task from the chat\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}

	out, errOut, code = h.fleet(t, "hub", "status")
	if code != 0 || !strings.Contains(out, "winfleet") {
		t.Fatalf("fleet.exe hub status: exit %d, winfleet not listed\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}
