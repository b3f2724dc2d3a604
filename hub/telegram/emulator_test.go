package telegram

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/internal/tgemu"
)

// The question loop against the real emulator: buttons out, a press in
// through Poll, the keyboard removed by Edit.
func TestEmulatorQuestionLoop(t *testing.T) {
	e := tgemu.Start(t)
	logs := &syncBuffer{}
	const gap = 50 * time.Millisecond
	c := newClient(t, e.URL(), logs, func(cfg *Config) { cfg.MinPollGap = gap })
	ctx := t.Context()
	if err := c.DeleteWebhook(ctx); err != nil {
		t.Fatal(err)
	}
	out := make(chan Update, 8)
	started := time.Now()
	startPoll(t, c, out)

	buttons := [][]Button{{{"Yes", "q:1:y"}, {"No", "q:1:n"}}}
	id, err := c.Send(ctx, OutMessage{ChatID: 42, Text: "Run <b>deploy</b>?", Buttons: buttons})
	if err != nil {
		t.Fatal(err)
	}
	e.WaitFor(t, 30*time.Second, "the question with buttons", func(h []tgemu.BotMessage) bool {
		return len(h) == 1 && h[0].MessageID == id && h[0].Text == "Run <b>deploy</b>?" &&
			reflect.DeepEqual(h[0].Buttons, [][]tgemu.Button{{{Text: "Yes", Data: "q:1:y"}, {Text: "No", Data: "q:1:n"}}})
	}, testToken)

	if err := e.User(testToken, 42, 42).Press(id, "q:1:y"); err != nil {
		t.Fatal(err)
	}
	u := receive(t, out)
	cb := u.Callback
	if cb == nil || cb.Data != "q:1:y" || cb.ChatID != 42 || cb.MessageID != id || cb.FromID != 42 || cb.FromName != "@user42" || cb.ID == "" {
		t.Fatalf("press = %s", dump(u))
	}
	if err := c.AnswerCallback(ctx, cb.ID, "approved"); err != nil {
		t.Fatal(err)
	}
	if err := c.Edit(ctx, 42, id, "Run <b>deploy</b>? → approved", nil); err != nil {
		t.Fatal(err)
	}
	e.WaitFor(t, 30*time.Second, "the edit without buttons", func(h []tgemu.BotMessage) bool {
		return len(h) == 1 && h[0].Text == "Run <b>deploy</b>? → approved" && len(h[0].Buttons) == 0
	}, testToken)

	if _, err := e.User(testToken, 42, 42).SendText("deploy v1.2"); err != nil {
		t.Fatal(err)
	}
	if m := receive(t, out).Message; m == nil || m.Text != "deploy v1.2" || m.ChatID != 42 || m.FromID != 42 {
		t.Fatalf("message = %+v", m)
	}

	// The emulator lacks these methods.
	if err := c.SetCommands(ctx, []Command{{"status", "fleet status"}}); !errors.Is(err, ErrUnsupported) {
		t.Errorf("SetCommands = %v, want ErrUnsupported", err)
	}
	if _, err := c.CreateTopic(ctx, -1001, "fleet"); !errors.Is(err, ErrUnsupported) {
		t.Errorf("CreateTopic = %v, want ErrUnsupported", err)
	}

	calls, err := e.Calls(testToken)
	if err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(started)
	polls, sends := 0, 0
	for _, call := range calls {
		switch call.Method {
		case "getUpdates":
			polls++
		case "sendMessage", "editMessageText":
			sends++
			if call.Params["parse_mode"] != "HTML" {
				t.Errorf("%s parse_mode = %v", call.Method, call.Params["parse_mode"])
			}
		}
	}
	if sends != 2 {
		t.Errorf("%d sendMessage/editMessageText calls recorded, want 2", sends)
	}
	// The emulator answers getUpdates at once; MinPollGap keeps Poll from spinning.
	if bound := int(elapsed/gap) + 2; polls > bound {
		t.Errorf("%d getUpdates in %v, want at most %d", polls, elapsed, bound)
	}
	if h := c.Health(); h.Polls == 0 || h.Failures != 0 || h.Conflict {
		t.Errorf("Health = %+v", h)
	}
}
