package tgemu

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	token = "123456:TEST-token"
	wait  = 30 * time.Second // generous: a loaded 2-core CI box
)

// pollThrottle slows go-telegram/bot's getUpdates loop: the emulator never
// long-polls, so the loop would otherwise spin a core.
type pollThrottle struct{ c *http.Client }

func (p pollThrottle) Do(r *http.Request) (*http.Response, error) {
	if strings.HasSuffix(r.URL.Path, "/getUpdates") {
		t := time.NewTimer(50 * time.Millisecond)
		defer t.Stop()
		select {
		case <-r.Context().Done():
			return nil, r.Context().Err()
		case <-t.C:
		}
	}
	return p.c.Do(r)
}

// newBot is a go-telegram/bot client of e; extra options come last.
func newBot(t *testing.T, e *Emulator, opts ...bot.Option) *bot.Bot {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	hc := pollThrottle{c: &http.Client{Transport: tr, Timeout: 20 * time.Second}}
	all := append([]bot.Option{
		bot.WithServerURL(e.URL()), bot.WithSkipGetMe(),
		bot.WithHTTPClient(10*time.Second, hc),
		bot.WithErrorsHandler(func(err error) { t.Logf("bot error: %v", err) }),
	}, opts...)
	b, err := bot.New(token, all...)
	if err != nil {
		t.Fatalf("bot.New: %v", err)
	}
	return b
}

func yesNo(id string) *models.InlineKeyboardMarkup {
	return &models.InlineKeyboardMarkup{InlineKeyboard: [][]models.InlineKeyboardButton{{
		{Text: "Yes", CallbackData: "q:" + id + ":y"},
		{Text: "No", CallbackData: "q:" + id + ":n"},
	}}}
}

func find(h []BotMessage, id int64) (BotMessage, bool) {
	for _, m := range h {
		if m.MessageID == id {
			return m, true
		}
	}
	return BotMessage{}, false
}

func TestSendEditHistory(t *testing.T) {
	e := Start(t)
	b := newBot(t, e)
	ctx := t.Context()

	msg, err := b.SendMessage(ctx, &bot.SendMessageParams{
		ChatID: int64(42), Text: "<b>Run</b> deploy v1.2 ?", ParseMode: models.ParseModeHTML,
		MessageThreadID: 7, ReplyMarkup: yesNo("1"),
	})
	if err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	// The returned Message echoes form fields: typed decoding needs numbers.
	if msg.ID == 0 || msg.Chat.ID != 42 || msg.MessageThreadID != 7 {
		t.Fatalf("returned message: id %d chat %d thread %d", msg.ID, msg.Chat.ID, msg.MessageThreadID)
	}

	h, err := e.History(token)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := find(h, int64(msg.ID))
	if !ok || len(h) != 1 {
		t.Fatalf("history %+v, want message %d", h, msg.ID)
	}
	if got.Text != "<b>Run</b> deploy v1.2 ?" || got.ChatID != 42 || got.ThreadID != 7 || got.Time == 0 {
		t.Fatalf("history message %+v", got)
	}
	want := [][]Button{{{Text: "Yes", Data: "q:1:y"}, {Text: "No", Data: "q:1:n"}}}
	if fmt.Sprint(got.Buttons) != fmt.Sprint(want) {
		t.Fatalf("buttons %v, want %v", got.Buttons, want)
	}

	reply, err := b.SendMessage(ctx, &bot.SendMessageParams{
		ChatID: int64(42), Text: "noted", ReplyParameters: &models.ReplyParameters{MessageID: msg.ID},
	})
	if err != nil {
		t.Fatalf("SendMessage reply: %v", err)
	}

	// An explicit empty keyboard: the emulator keeps the old one otherwise.
	if _, err := b.EditMessageText(ctx, &bot.EditMessageTextParams{
		ChatID: int64(42), MessageID: msg.ID, Text: "Run deploy v1.2 ? -> approved",
		ReplyMarkup: &models.InlineKeyboardMarkup{InlineKeyboard: [][]models.InlineKeyboardButton{}},
	}); err != nil {
		t.Fatalf("EditMessageText: %v", err)
	}
	h, err = e.History(token)
	if err != nil {
		t.Fatal(err)
	}
	got, _ = find(h, int64(msg.ID))
	if got.Text != "Run deploy v1.2 ? -> approved" || len(got.Buttons) != 0 || got.ThreadID != 7 {
		t.Fatalf("after edit: %+v", got)
	}
	r, _ := find(h, int64(reply.ID))
	if r.ReplyTo != int64(msg.ID) || r.Text != "noted" {
		t.Fatalf("reply: %+v, want reply to %d", r, msg.ID)
	}
	if h[0].MessageID != int64(msg.ID) || h[1].MessageID != int64(reply.ID) {
		t.Fatalf("history not in send order: %+v", h)
	}
}

func TestUnreadPerChat(t *testing.T) {
	e := Start(t)
	b := newBot(t, e)
	for _, chat := range []int64{42, 43, 42} {
		if _, err := b.SendMessage(t.Context(), &bot.SendMessageParams{ChatID: chat, Text: fmt.Sprint("to ", chat)}); err != nil {
			t.Fatal(err)
		}
	}
	u, err := e.Unread(token, 42)
	if err != nil {
		t.Fatal(err)
	}
	if len(u) != 2 || u[0].Text != "to 42" || u[0].ChatID != 42 || u[0].MessageID >= u[1].MessageID {
		t.Fatalf("unread 42: %+v", u)
	}
	if u, err = e.Unread(token, 42); err != nil || len(u) != 0 {
		t.Fatalf("second unread 42: %+v, %v", u, err)
	}
	if u, err = e.Unread(token, 43); err != nil || len(u) != 1 {
		t.Fatalf("unread 43: %+v, %v", u, err)
	}
}

// TestUserToBot drives a polling go-telegram/bot with every kind of user
// input and checks what the bot receives and calls.
func TestUserToBot(t *testing.T) {
	e := Start(t)
	updates := make(chan *models.Update, 16)
	b := newBot(t, e, bot.WithNotAsyncHandlers(), bot.WithDefaultHandler(
		func(ctx context.Context, b *bot.Bot, u *models.Update) {
			if u.CallbackQuery != nil {
				if _, err := b.AnswerCallbackQuery(ctx, &bot.AnswerCallbackQueryParams{
					CallbackQueryID: u.CallbackQuery.ID, Text: "Approved",
				}); err != nil {
					t.Errorf("AnswerCallbackQuery: %v", err)
				}
			}
			updates <- u
		}))
	ctx, cancel := context.WithCancel(t.Context())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		b.Start(ctx)
	}()
	defer func() {
		cancel()
		<-stopped
	}()
	next := func(what string) *models.Update {
		t.Helper()
		select {
		case u := <-updates:
			return u
		case <-time.After(wait):
			t.Fatalf("no update for %s after %v", what, wait)
			return nil
		}
	}

	user := e.User(token, 42, 42)
	id, err := user.SendText("deploy v1.2")
	if err != nil {
		t.Fatal(err)
	}
	u := next("text")
	if m := u.Message; m == nil || m.Text != "deploy v1.2" || m.Chat.ID != 42 || m.From.ID != 42 ||
		m.Chat.Type != models.ChatTypePrivate || id == 0 || int64(m.ID) != id {
		t.Fatalf("text update %+v (SendText id %d)", u.Message, id)
	}

	if _, err := user.SendCommand("/status now"); err != nil {
		t.Fatal(err)
	}
	u = next("command")
	if m := u.Message; m == nil || m.Text != "/status now" || len(m.Entities) != 1 ||
		m.Entities[0].Type != models.MessageEntityTypeBotCommand || m.Entities[0].Length != 7 {
		t.Fatalf("command update %+v", u.Message)
	}

	if _, err := user.ReplyTo(id, "yes, that one"); err != nil {
		t.Fatal(err)
	}
	u = next("reply")
	if m := u.Message; m == nil || m.ReplyToMessage == nil || int64(m.ReplyToMessage.ID) != id {
		t.Fatalf("reply update %+v", u.Message)
	}

	forum := e.User(token, 42, -100777)
	forum.Chat.IsForum = true
	if _, err := forum.SendTextWith("in a topic", map[string]any{"message_thread_id": 9, "is_topic_message": true}); err != nil {
		t.Fatal(err)
	}
	u = next("topic message")
	if m := u.Message; m == nil || m.Chat.ID != -100777 || !m.Chat.IsForum || m.MessageThreadID != 9 || !m.IsTopicMessage {
		t.Fatalf("topic update %+v", u.Message)
	}

	q, err := b.SendMessage(ctx, &bot.SendMessageParams{ChatID: int64(42), Text: "Run?", ReplyMarkup: yesNo("1")})
	if err != nil {
		t.Fatal(err)
	}
	if err := user.Press(int64(q.ID), "q:1:y"); err != nil {
		t.Fatal(err)
	}
	u = next("press")
	cq := u.CallbackQuery
	if cq == nil || cq.Data != "q:1:y" || cq.From.ID != 42 || cq.Message.Message == nil || cq.Message.Message.ID != q.ID {
		t.Fatalf("callback update %+v", cq)
	}
	calls := e.WaitCalls(t, wait, "answerCallbackQuery", func(cs []Call) bool {
		for _, c := range cs {
			if c.Method == "answerCallbackQuery" {
				return true
			}
		}
		return false
	}, token)
	for _, c := range calls {
		if c.Method == "answerCallbackQuery" {
			if c.Params["callback_query_id"] != cq.ID || c.Params["text"] != "Approved" || c.Time == 0 {
				t.Fatalf("answerCallbackQuery params %v, want id %q", c.Params, cq.ID)
			}
		}
	}
	if !hasMethod(calls, "getUpdates") || !hasMethod(calls, "sendMessage") {
		t.Fatalf("calls lack getUpdates or sendMessage: %v", calls)
	}

	// The store has user updates too; History keeps bot messages only.
	h := e.WaitFor(t, wait, "the question in history", func(h []BotMessage) bool {
		_, ok := find(h, int64(q.ID))
		return ok
	}, token)
	if len(h) != 1 {
		t.Fatalf("history has more than the bot's message: %+v", h)
	}
}

func hasMethod(cs []Call, m string) bool {
	for _, c := range cs {
		if c.Method == m {
			return true
		}
	}
	return false
}

func TestFaults(t *testing.T) {
	e := Start(t)
	b := newBot(t, e)
	ctx := t.Context()

	body := `{"ok":false,"error_code":429,"description":"Too Many Requests: retry after 2","parameters":{"retry_after":2}}`
	if err := e.Fault(token, "sendMessage", http.StatusTooManyRequests, body, 1); err != nil {
		t.Fatal(err)
	}
	_, err := b.SendMessage(ctx, &bot.SendMessageParams{ChatID: int64(42), Text: "one"})
	var tmr *bot.TooManyRequestsError
	if !errors.As(err, &tmr) || tmr.RetryAfter != 2 {
		t.Fatalf("faulted SendMessage: %v, want TooManyRequestsError retry 2", err)
	}
	if _, err := b.SendMessage(ctx, &bot.SendMessageParams{ChatID: int64(42), Text: "two"}); err != nil {
		t.Fatalf("SendMessage after the fault: %v", err)
	}
	calls, err := e.Calls(token)
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != 2 || calls[0].Fault != 429 || calls[1].Fault != 0 ||
		calls[0].Params["text"] != "one" || calls[0].Params["chat_id"] != float64(42) {
		t.Fatalf("calls %+v", calls)
	}
	if h, err := e.History(token); err != nil || len(h) != 1 || h[0].Text != "two" {
		t.Fatalf("history %+v, %v: the faulted call must not reach the store", h, err)
	}

	// Raw 409 on getUpdates, as when another poller holds the token.
	if err := e.Fault(token, "getUpdates", http.StatusConflict,
		`{"ok":false,"error_code":409,"description":"Conflict: terminated by other getUpdates request"}`, 1); err != nil {
		t.Fatal(err)
	}
	if st, body := rawCall(t, e, "getUpdates"); st != http.StatusConflict || !strings.Contains(body, `"error_code":409`) {
		t.Fatalf("getUpdates: HTTP %d %s", st, body)
	}
	if st, _ := rawCall(t, e, "getUpdates"); st != http.StatusOK {
		t.Fatalf("second getUpdates: HTTP %d", st)
	}

	if err := e.Fault(token, "sendMessage", 500, "", 5); err != nil {
		t.Fatal(err)
	}
	if err := e.ClearFaults(token); err != nil {
		t.Fatal(err)
	}
	if _, err := b.SendMessage(ctx, &bot.SendMessageParams{ChatID: int64(42), Text: "three"}); err != nil {
		t.Fatalf("SendMessage after ClearFaults: %v", err)
	}
	if err := e.ResetCalls(token); err != nil {
		t.Fatal(err)
	}
	if calls, err := e.Calls(token); err != nil || len(calls) != 0 {
		t.Fatalf("calls after reset: %+v, %v", calls, err)
	}
}

func rawCall(t *testing.T, e *Emulator, method string) (int, string) {
	t.Helper()
	resp, err := e.client.Post(e.URL()+"/bot"+token+"/"+method, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestRestartSamePort(t *testing.T) {
	e := Start(t)
	b := newBot(t, e)
	if _, err := b.SendMessage(t.Context(), &bot.SendMessageParams{ChatID: int64(42), Text: "before"}); err != nil {
		t.Fatal(err)
	}
	port := e.Port()
	e.Restart(t)
	if e.Port() != port || e.URL() != fmt.Sprintf("http://127.0.0.1:%d", port) {
		t.Fatalf("restart moved from port %d to %s", port, e.URL())
	}
	if h, err := e.History(token); err != nil || len(h) != 0 {
		t.Fatalf("history after restart: %+v, %v (want an empty store)", h, err)
	}
	if _, err := b.SendMessage(t.Context(), &bot.SendMessageParams{ChatID: int64(42), Text: "after"}); err != nil {
		t.Fatalf("SendMessage after restart: %v", err)
	}
	e.WaitFor(t, wait, `"after" in history`, func(h []BotMessage) bool {
		return len(h) == 1 && h[0].Text == "after"
	}, token)

	e.Stop()
	e.Stop()
	if _, err := e.History(token); err == nil {
		t.Fatal("History after Stop succeeded")
	}
}

func TestClientRequestWithoutToken(t *testing.T) {
	e := Start(t)
	// The stock server dies on this; the wrapper refuses it and lives on.
	if err := e.post("/sendMessage", map[string]any{"text": "no token"}, nil); err == nil {
		t.Fatal("client sendMessage without botToken succeeded")
	}
	if _, err := e.User(token, 1, 1).SendText("hi"); err != nil {
		t.Fatalf("emulator unusable after a bad request: %v", err)
	}
}

func TestFlexInt(t *testing.T) {
	recs := []storedRecord{{
		Time: 5, MessageID: 3,
		Message: []byte(`{"chat_id":"42","message_thread_id":"7","text":"x",` +
			`"reply_parameters":"{\"message_id\":2}",` +
			`"reply_markup":"{\"inline_keyboard\":[[{\"text\":\"A\",\"callback_data\":\"a\"}]]}"}`),
	}, {
		Time: 4, MessageID: 2, Message: []byte(`{"chat_id":"@chan","text":"y","reply_to_message_id":1}`),
	}, {
		Time: 6, MessageID: 4, Message: []byte(`{"chat":{"id":42},"from":{"id":42},"text":"user"}`),
	}, {
		Time: 7, MessageID: 5, CallbackQuery: []byte(`{"data":"a"}`),
	}}
	got, err := botMessages(recs, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].MessageID != 2 || got[0].ChatID != 0 || got[0].ReplyTo != 1 {
		t.Fatalf("got %+v", got)
	}
	m := got[1]
	if m.ChatID != 42 || m.ThreadID != 7 || m.ReplyTo != 2 || len(m.Buttons) != 1 || m.Buttons[0][0] != (Button{Text: "A", Data: "a"}) {
		t.Fatalf("got %+v", m)
	}
}
