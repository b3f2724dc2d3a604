package telegram

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/internal/testwait"
	"github.com/go-telegram/bot"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	testToken = "123456:AAH-secret_TOKEN-value"
	secret    = "secret_TOKEN"
)

// reply is what a fake answers to one call.
type reply struct {
	status int
	body   string
}

func ok(result string) reply { return reply{200, `{"ok":true,"result":` + result + `}`} }

func apiErr(code int, desc string) reply {
	return reply{code, fmt.Sprintf(`{"ok":false,"error_code":%d,"description":%q}`, code, desc)}
}

// call is one request the fake received: the method and its form fields.
type call struct {
	method string
	form   map[string]string
}

// fakeAPI is a Bot API server on loopback that parses the library's
// multipart requests and answers with handle.
type fakeAPI struct {
	srv    *httptest.Server
	mu     sync.Mutex
	calls  []call
	handle func(c call) reply
}

func newFake(t *testing.T, handle func(c call) reply) *fakeAPI {
	t.Helper()
	f := &fakeAPI{handle: handle}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAPI) serve(w http.ResponseWriter, r *http.Request) {
	method, found := strings.CutPrefix(r.URL.Path, "/bot"+testToken+"/")
	if !found || r.Method != http.MethodPost {
		http.Error(w, `{"ok":false,"error_code":404,"description":"Not Found"}`, http.StatusNotFound)
		return
	}
	c := call{method: method, form: map[string]string{}}
	// The client sends JSON bodies (asJSON), which every server parses.
	var body map[string]json.RawMessage
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		http.Error(w, `{"ok":false,"error_code":400,"description":"Bad Request: content type `+ct+`"}`, http.StatusBadRequest)
		return
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&body); err != nil {
		http.Error(w, `{"ok":false,"error_code":400,"description":"Bad Request: `+err.Error()+`"}`, http.StatusBadRequest)
		return
	}
	for k, v := range body {
		var str string
		if json.Unmarshal(v, &str) == nil {
			c.form[k] = str // a JSON string, as a form value would be
		} else {
			c.form[k] = string(v)
		}
	}
	f.mu.Lock()
	f.calls = append(f.calls, c)
	f.mu.Unlock()
	rep := f.handle(c)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(rep.status)
	io.WriteString(w, rep.body)
}

func (f *fakeAPI) callsOf(method string) []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []call
	for _, c := range f.calls {
		if c.method == method {
			out = append(out, c)
		}
	}
	return out
}

// syncBuffer collects log output from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newClient(t *testing.T, baseURL string, logs *syncBuffer, tweak ...func(*Config)) *Client {
	t.Helper()
	cfg := Config{Token: testToken, BaseURL: baseURL, MinPollGap: 10 * time.Millisecond}
	if logs != nil {
		cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	for _, f := range tweak {
		f(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.http.CloseIdleConnections)
	return c
}

// jsonEqual compares two JSON texts by value.
func jsonEqual(t *testing.T, field, got, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Fatalf("%s: %q is not JSON: %v", field, got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s = %s, want %s", field, got, want)
	}
}

const sentMessage = `{"message_id":77,"date":1700000000,"chat":{"id":42,"type":"private"}}`

func TestSend(t *testing.T) {
	f := newFake(t, func(call) reply { return ok(sentMessage) })
	c := newClient(t, f.srv.URL, nil)
	ctx := t.Context()

	id, err := c.Send(ctx, OutMessage{
		ChatID: -1001234, ThreadID: 7, ReplyTo: 5, Text: "<b>Run</b> deploy?",
		Buttons:    [][]Button{{{"Yes", "q:1:y"}, {"No", "q:1:n"}}, {{"Later", "q:1:l"}}},
		ForceReply: true, // ignored: buttons win
	})
	if err != nil || id != 77 {
		t.Fatalf("Send = %d, %v; want 77, nil", id, err)
	}
	form := f.callsOf("sendMessage")[0].form
	for k, want := range map[string]string{
		"chat_id": "-1001234", "message_thread_id": "7", "text": "<b>Run</b> deploy?", "parse_mode": "HTML",
	} {
		if form[k] != want {
			t.Errorf("%s = %q, want %q", k, form[k], want)
		}
	}
	jsonEqual(t, "reply_markup", form["reply_markup"],
		`{"inline_keyboard":[[{"text":"Yes","callback_data":"q:1:y"},{"text":"No","callback_data":"q:1:n"}],[{"text":"Later","callback_data":"q:1:l"}]]}`)
	jsonEqual(t, "reply_parameters", form["reply_parameters"], `{"message_id":5,"allow_sending_without_reply":true}`)
	jsonEqual(t, "link_preview_options", form["link_preview_options"], `{"is_disabled":true}`)

	if _, err := c.Send(ctx, OutMessage{ChatID: 42, Text: "why?", ForceReply: true}); err != nil {
		t.Fatal(err)
	}
	form = f.callsOf("sendMessage")[1].form
	jsonEqual(t, "reply_markup", form["reply_markup"], `{"force_reply":true}`)
	for _, k := range []string{"message_thread_id", "reply_parameters"} {
		if v, found := form[k]; found {
			t.Errorf("%s = %q sent for a message without it", k, v)
		}
	}

	if _, err := c.Send(ctx, OutMessage{ChatID: 42, Text: "plain"}); err != nil {
		t.Fatal(err)
	}
	if v, found := f.callsOf("sendMessage")[2].form["reply_markup"]; found {
		t.Errorf("reply_markup = %q sent for a plain message", v)
	}
}

func TestEdit(t *testing.T) {
	notModified := false
	var mu sync.Mutex
	f := newFake(t, func(call) reply {
		mu.Lock()
		defer mu.Unlock()
		if notModified {
			return apiErr(400, "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message")
		}
		return ok(sentMessage)
	})
	c := newClient(t, f.srv.URL, nil)

	if err := c.Edit(t.Context(), 42, 77, "decided: <i>yes</i>", nil); err != nil {
		t.Fatal(err)
	}
	form := f.callsOf("editMessageText")[0].form
	for k, want := range map[string]string{"chat_id": "42", "message_id": "77", "text": "decided: <i>yes</i>", "parse_mode": "HTML"} {
		if form[k] != want {
			t.Errorf("%s = %q, want %q", k, form[k], want)
		}
	}
	jsonEqual(t, "reply_markup", form["reply_markup"], `{"inline_keyboard":[]}`)
	jsonEqual(t, "link_preview_options", form["link_preview_options"], `{"is_disabled":true}`)

	if err := c.Edit(t.Context(), 42, 77, "again", [][]Button{{{"Undo", "u:1"}}}); err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, "reply_markup", f.callsOf("editMessageText")[1].form["reply_markup"],
		`{"inline_keyboard":[[{"text":"Undo","callback_data":"u:1"}]]}`)

	mu.Lock()
	notModified = true
	mu.Unlock()
	if err := c.Edit(t.Context(), 42, 77, "again", nil); err != nil {
		t.Errorf("message is not modified: Edit = %v, want nil", err)
	}
	if h := c.Health(); h.LastError != "" {
		t.Errorf("LastError = %q after a not-modified edit", h.LastError)
	}
}

func TestRetryAfter(t *testing.T) {
	var withRetry atomic.Bool
	withRetry.Store(true)
	f := newFake(t, func(call) reply {
		if withRetry.Load() {
			return reply{429, `{"ok":false,"error_code":429,"description":"Too Many Requests: retry after 3","parameters":{"retry_after":3}}`}
		}
		return apiErr(429, "Too Many Requests")
	})
	c := newClient(t, f.srv.URL, nil)

	_, err := c.Send(t.Context(), OutMessage{ChatID: 42, Text: "x"})
	var ra *RetryAfterError
	if !errors.As(err, &ra) || *ra != (RetryAfterError{After: 3 * time.Second, Method: "sendMessage"}) {
		t.Fatalf("err = %#v, want *RetryAfterError{3s, sendMessage}", err)
	}
	if !strings.Contains(err.Error(), "sendMessage") {
		t.Errorf("error %q does not name the method", err)
	}

	withRetry.Store(false)
	err = c.Edit(t.Context(), 42, 1, "x", nil)
	if !errors.As(err, &ra) || ra.After != time.Second || ra.Method != "editMessageText" {
		t.Fatalf("without retry_after: err = %#v, want After 1s", err)
	}
}

func TestErrorKinds(t *testing.T) {
	var next atomic.Pointer[reply]
	f := newFake(t, func(call) reply { return *next.Load() })
	c := newClient(t, f.srv.URL, nil)
	unsupported := reply{500, `{"message":"API method 'createForumTopic' is not supported. Please open an issue."}`}
	for _, tc := range []struct {
		name     string
		reply    reply
		want     error
		alsoWant error // the library's sentinel, if any
	}{
		{"emulator 500", unsupported, ErrUnsupported, nil},
		{"404", apiErr(404, "Not Found"), ErrUnsupported, bot.ErrorNotFound},
		{"404 not JSON", reply{404, "404 page not found"}, ErrUnsupported, nil},
		{"400", apiErr(400, "Bad Request: chat not found"), ErrBadRequest, bot.ErrorBadRequest},
		{"migrated", reply{400, `{"ok":false,"error_code":400,"description":"Bad Request: group chat was upgraded to a supergroup chat","parameters":{"migrate_to_chat_id":-1009}}`}, ErrBadRequest, nil},
		{"403", apiErr(403, "Forbidden: bot was blocked by the user"), ErrForbidden, bot.ErrorForbidden},
		{"401", apiErr(401, "Unauthorized"), ErrUnauthorized, bot.ErrorUnauthorized},
		{"409", apiErr(409, "Conflict: terminated by other getUpdates request"), ErrConflict, bot.ErrorConflict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next.Store(&tc.reply)
			calls := map[string]func() error{
				"createForumTopic": func() error { _, err := c.CreateTopic(t.Context(), -1001, "fleet"); return err },
				"setMyCommands":    func() error { return c.SetCommands(t.Context(), []Command{{"status", "fleet status"}}) },
				"sendMessage":      func() error { _, err := c.Send(t.Context(), OutMessage{ChatID: 1, Text: "x"}); return err },
			}
			for method, do := range calls {
				err := do()
				if !errors.Is(err, tc.want) {
					t.Errorf("%s: err = %v, want errors.Is %v", method, err, tc.want)
				}
				if tc.alsoWant != nil && !errors.Is(err, tc.alsoWant) {
					t.Errorf("%s: err = %v, want errors.Is the library's %v", method, err, tc.alsoWant)
				}
				if err != nil && !strings.Contains(err.Error(), method) {
					t.Errorf("error %q does not name %s", err, method)
				}
			}
		})
	}

	// A Telegram-shaped 500 is Telegram's own trouble, not a missing method.
	r500 := apiErr(500, "Internal Server Error")
	next.Store(&r500)
	if err := c.AnswerCallback(t.Context(), "cb", ""); err == nil || errors.Is(err, ErrUnsupported) {
		t.Errorf("Telegram 500: err = %v, want an error other than ErrUnsupported", err)
	}
	if h := c.Health(); !strings.Contains(h.LastError, "answerCallbackQuery") || h.LastErrorAt.IsZero() {
		t.Errorf("Health after a failed call = %+v, want LastError naming answerCallbackQuery", h)
	}
}

func TestMethodsParams(t *testing.T) {
	f := newFake(t, func(c call) reply {
		switch c.method {
		case "createForumTopic":
			return ok(`{"message_thread_id":31,"name":"fleet a","icon_color":7322096}`)
		default:
			return ok(`true`)
		}
	})
	c := newClient(t, f.srv.URL, nil)
	ctx := t.Context()
	if id, err := c.CreateTopic(ctx, -1001, "fleet a"); err != nil || id != 31 {
		t.Fatalf("CreateTopic = %d, %v; want 31", id, err)
	}
	if err := c.AnswerCallback(ctx, "cb7", "approved"); err != nil {
		t.Fatal(err)
	}
	if err := c.SetCommands(ctx, []Command{{"status", "fleet status"}, {"help", "what I can do"}}); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteWebhook(ctx); err != nil {
		t.Fatal(err)
	}
	if got := f.callsOf("createForumTopic")[0].form; got["chat_id"] != "-1001" || got["name"] != "fleet a" {
		t.Errorf("createForumTopic form = %v", got)
	}
	if got := f.callsOf("answerCallbackQuery")[0].form; got["callback_query_id"] != "cb7" || got["text"] != "approved" {
		t.Errorf("answerCallbackQuery form = %v", got)
	}
	jsonEqual(t, "commands", f.callsOf("setMyCommands")[0].form["commands"],
		`[{"command":"status","description":"fleet status"},{"command":"help","description":"what I can do"}]`)
	if n := len(f.callsOf("deleteWebhook")); n != 1 {
		t.Errorf("deleteWebhook calls = %d, want 1", n)
	}
}

func TestNew(t *testing.T) {
	for _, cfg := range []Config{
		{},
		{Token: "  "},
		{Token: "1:a/b"},
		{Token: testToken, BaseURL: "ftp://example.com"},
		{Token: testToken, BaseURL: "example.com"},
		{Token: testToken, BaseURL: "http://"},
		{Token: testToken, BaseURL: "https://u:p@example.com"},
		{Token: testToken, BaseURL: "https://example.com/?bot=" + testToken},
		{Token: testToken, PollTimeout: -time.Second},
	} {
		c, err := New(cfg)
		if err == nil {
			t.Errorf("New(%+v) = %v, want an error", cfg, c)
		} else if strings.Contains(err.Error(), secret) {
			t.Errorf("New error %q contains the token", err)
		}
	}
	c, err := New(Config{Token: testToken, BaseURL: "http://127.0.0.1:1/"})
	if err != nil {
		t.Fatal(err)
	}
	if c.baseURL != "http://127.0.0.1:1" || c.gap != defaultMinPollGap || c.http.Timeout != defaultPollTimeout+10*time.Second {
		t.Errorf("defaults: base %q gap %v timeout %v", c.baseURL, c.gap, c.http.Timeout)
	}
}

// updates is a getUpdates store like Telegram's: an offset confirms and
// drops the updates before it; an answer holds at most limit updates.
type updates struct {
	mu      sync.Mutex
	pending []string // JSON, each with its update_id
	offsets []string
	limit   int
}

func (u *updates) add(js ...string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.pending = append(u.pending, js...)
}

func (u *updates) answer(c call) reply {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.offsets = append(u.offsets, c.form["offset"])
	off, _ := strconv.ParseInt(c.form["offset"], 10, 64)
	for len(u.pending) > 0 {
		var head struct {
			ID int64 `json:"update_id"`
		}
		json.Unmarshal([]byte(u.pending[0]), &head)
		if head.ID >= off {
			break
		}
		u.pending = u.pending[1:]
	}
	n := len(u.pending)
	if u.limit > 0 {
		n = min(n, u.limit)
	}
	return ok("[" + strings.Join(u.pending[:n], ",") + "]")
}

func (u *updates) seen() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.offsets...)
}

func startPoll(t *testing.T, c *Client, out chan Update) (cancel func(), done chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done = make(chan error, 1)
	go func() { done <- c.Poll(ctx, out) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return cancel, done
}

func receive(t *testing.T, out chan Update) Update {
	t.Helper()
	select {
	case u := <-out:
		return u
	case <-time.After(30 * time.Second):
		t.Fatal("no update")
		return Update{}
	}
}

func TestPollDeliversInOrder(t *testing.T) {
	u := &updates{limit: 2}
	u.add(
		`{"update_id":100,"message":{"message_id":1,"date":1700000000,"chat":{"id":42,"type":"private","first_name":"Op"},"from":{"id":42,"is_bot":false,"first_name":"Op","username":"op"},"text":"hello"}}`,
		`{"update_id":101,"edited_message":{"message_id":1,"date":1700000000,"edit_date":1700000005,"chat":{"id":42,"type":"private"},"text":"hello!"}}`,
		`{"update_id":102,"callback_query":{"id":"cb1","from":{"id":43,"is_bot":false,"first_name":"Ann"},"chat_instance":"1","data":"q:1:y","message":{"message_id":9,"message_thread_id":7,"date":1700000001,"chat":{"id":-1001,"type":"supergroup","is_forum":true}}}}`,
		`{"update_id":103,"message":{"message_id":10,"message_thread_id":7,"is_topic_message":true,"date":1700000002,"chat":{"id":-1001,"type":"supergroup","title":"ops","is_forum":true},"from":{"id":43,"is_bot":false,"first_name":"Ann"},"caption":"see this","reply_to_message":{"message_id":9,"date":1700000001,"chat":{"id":-1001,"type":"supergroup"}}}}`,
		`{"update_id":104,"callback_query":{"id":"cb2","from":{"id":42,"is_bot":false,"first_name":"Op","username":"op"},"chat_instance":"1","data":"q:2:n","message":{"message_id":3,"date":0,"chat":{"id":42,"type":"private"}}}}`,
	)
	f := newFake(t, u.answer)
	c := newClient(t, f.srv.URL, nil, func(cfg *Config) { cfg.PollTimeout = 5 * time.Second })
	out := make(chan Update)
	startPoll(t, c, out)

	want := []Update{
		{ID: 100, Message: &Message{ID: 1, ChatID: 42, ChatType: "private", FromID: 42, FromName: "@op", Text: "hello"}},
		{ID: 102, Callback: &Callback{ID: "cb1", FromID: 43, FromName: "Ann", ChatID: -1001, MessageID: 9, ThreadID: 7, Data: "q:1:y"}},
		{ID: 103, Message: &Message{ID: 10, ChatID: -1001, ThreadID: 7, ChatType: "supergroup", IsForum: true, FromID: 43, FromName: "Ann", Text: "see this", ReplyTo: 9}},
		// An inaccessible message (date 0) still names its chat and id.
		{ID: 104, Callback: &Callback{ID: "cb2", FromID: 42, FromName: "@op", ChatID: 42, MessageID: 3, Data: "q:2:n"}},
	}
	for i, w := range want {
		got := receive(t, out)
		if !reflect.DeepEqual(got, w) {
			t.Errorf("update %d = %s, want %s", i, dump(got), dump(w))
		}
	}
	testwait.For(t, testwait.Bound, "the poll after the last update", func() bool { return len(u.seen()) >= 4 })
	if got := u.seen()[:4]; !reflect.DeepEqual(got, []string{"1", "102", "104", "105"}) {
		t.Errorf("offsets = %v, want [1 102 104 105]", got)
	}
	if tm := f.callsOf("getUpdates")[0].form["timeout"]; tm != "4" {
		t.Errorf("timeout = %q, want 4 (PollTimeout 5s - 1s)", tm)
	}
	if h := c.Health(); h.Polls < 3 || h.LastPoll.IsZero() || h.Failures != 0 {
		t.Errorf("Health = %+v, want successful polls", h)
	}
}

func dump(u Update) string {
	b, _ := json.Marshal(u)
	return string(b)
}

// An update Poll could not hand over before ctx ended is not confirmed:
// the next Poll gets it again.
func TestPollKeepsUndeliveredUpdate(t *testing.T) {
	u := &updates{}
	u.add(`{"update_id":200,"message":{"message_id":1,"date":1,"chat":{"id":42,"type":"private"},"text":"one"}}`,
		`{"update_id":201,"message":{"message_id":2,"date":1,"chat":{"id":42,"type":"private"},"text":"two"}}`)
	f := newFake(t, u.answer)
	c := newClient(t, f.srv.URL, nil)
	out := make(chan Update)

	cancel, done := startPoll(t, c, out)
	if got := receive(t, out); got.ID != 200 {
		t.Fatalf("first update %d, want 200", got.ID)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Poll = %v, want context.Canceled", err)
	}
	done <- nil // for startPoll's cleanup
	if got := u.seen(); !reflect.DeepEqual(got, []string{"1"}) {
		t.Fatalf("offsets = %v: a getUpdates confirmed update 201 before it was handed over", got)
	}

	startPoll(t, c, out)
	if got := receive(t, out); got.ID != 201 || got.Message.Text != "two" {
		t.Fatalf("after restart: update %s, want 201", dump(got))
	}
	if got := u.seen(); got[1] != "201" {
		t.Errorf("offsets = %v, want the second Poll to start at 201", got)
	}
}

// An answer the library cannot decode is an error in Health and does not
// hold up the next getUpdates.
func TestPollUndecodableAnswer(t *testing.T) {
	var n atomic.Int32
	f := newFake(t, func(call) reply {
		if n.Add(1) == 1 {
			return ok(`[{"update_id":"three hundred"}]`)
		}
		return ok(`[{"update_id":300,"message":{"message_id":1,"date":1,"chat":{"id":42,"type":"private"},"text":"hi"}}]`)
	})
	c := newClient(t, f.srv.URL, nil)
	out := make(chan Update)
	startPoll(t, c, out)
	if got := receive(t, out); got.ID != 300 {
		t.Fatalf("update %d, want 300", got.ID)
	}
	if h := c.Health(); !strings.Contains(h.LastError, "decode") || h.Failures != 0 {
		t.Errorf("Health = %+v, want the decode error kept", h)
	}
}

func TestPollConflict(t *testing.T) {
	logs := &syncBuffer{}
	f := newFake(t, func(call) reply {
		return apiErr(409, "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running")
	})
	c := newClient(t, f.srv.URL, logs)
	startPoll(t, c, make(chan Update))
	testwait.For(t, testwait.Bound, "a conflict", func() bool { return c.Health().Conflict })
	h := c.Health()
	if !strings.Contains(h.LastError, "Conflict: terminated by other getUpdates") || h.Failures == 0 || h.LastErrorAt.IsZero() || h.Polls != 0 {
		t.Errorf("Health = %+v", h)
	}
	if !strings.Contains(logs.String(), "level=WARN") {
		t.Errorf("no warning logged:\n%s", logs)
	}
}

// MinPollGap keeps a server that answers at once from turning Poll into a spin.
func TestPollMinGap(t *testing.T) {
	const gap = 100 * time.Millisecond
	f := newFake(t, func(call) reply { return ok("[]") })
	c := newClient(t, f.srv.URL, nil, func(cfg *Config) { cfg.MinPollGap = gap; cfg.PollTimeout = time.Second })
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	start := time.Now()
	if err := c.Poll(ctx, make(chan Update)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Poll = %v, want DeadlineExceeded", err)
	}
	elapsed := time.Since(start)
	n := len(f.callsOf("getUpdates"))
	if bound := int(elapsed/gap) + 2; n > bound || n < 1 {
		t.Errorf("%d getUpdates in %v, want 1..%d", n, elapsed, bound)
	}
	if tm := f.callsOf("getUpdates")[0].form["timeout"]; tm != "1" {
		t.Errorf("timeout = %q, want at least 1", tm)
	}
	if h := c.Health(); h.LastError != "" {
		t.Errorf("LastError = %q after a deadline", h.LastError)
	}
}

// Poll returns on cancel, also during a real long poll, and leaves no goroutine.
func TestPollStopsOnCancel(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	polling := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // else the server does not notice the client leave
		select {
		case polling <- struct{}{}:
		default:
		}
		select { // long poll until the client leaves
		case <-r.Context().Done():
		case <-time.After(time.Minute):
		}
		io.WriteString(w, `{"ok":true,"result":[]}`)
	}))
	c := newClient(t, srv.URL, nil)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.Poll(ctx, make(chan Update)) }()
	select {
	case <-polling:
	case <-time.After(30 * time.Second):
		t.Fatal("no getUpdates")
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Poll = %v, want context.Canceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Poll did not return after cancel")
	}
	if h := c.Health(); h.Failures != 0 || h.LastError != "" {
		t.Errorf("cancel counted as a failure: %+v", h)
	}
	srv.Close()
	goleak.VerifyNone(t, ignore)
}

func TestPollAlreadyRunning(t *testing.T) {
	f := newFake(t, func(call) reply { return ok("[]") })
	c := newClient(t, f.srv.URL, nil)
	startPoll(t, c, make(chan Update))
	testwait.For(t, testwait.Bound, "a poll", func() bool { return c.Health().Polls > 0 })
	if err := c.Poll(t.Context(), make(chan Update)); err == nil || errors.Is(err, context.Canceled) {
		t.Errorf("second Poll = %v, want an error", err)
	}
}

// A server that is down shows as failures; once it is up, polls succeed.
func TestPollServerDownThenUp(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c := newClient(t, "http://"+addr, nil)
	startPoll(t, c, make(chan Update))
	testwait.For(t, testwait.Bound, "a failure", func() bool { return c.Health().Failures > 0 })
	if h := c.Health(); h.LastError == "" || !h.LastPoll.IsZero() || h.Polls != 0 {
		t.Fatalf("while down: %+v", h)
	}

	// Come up on the same address.
	if !testwait.Until(testwait.Bound, func() bool { ln, err = net.Listen("tcp", addr); return err == nil }) {
		t.Fatalf("listen again on %s: %v", addr, err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"ok":true,"result":[]}`)
	}))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	testwait.For(t, testwait.Bound, "a successful poll", func() bool { return !c.Health().LastPoll.IsZero() })
	if h := c.Health(); h.Failures != 0 || h.Polls == 0 || h.LastError == "" || h.Conflict {
		t.Errorf("after recovery: %+v (want the old error kept)", h)
	}
}

// The token shows in no error, Health or log line, even when a server
// echoes it back.
func TestTokenNeverLeaks(t *testing.T) {
	logs := &syncBuffer{}
	f := newFake(t, func(c call) reply {
		path := "/bot" + testToken + "/" + c.method
		switch c.method {
		case "getUpdates":
			return apiErr(409, "Conflict at "+path)
		case "createForumTopic":
			return reply{500, `{"message":"API method at ` + path + ` is not supported"}`}
		case "setMyCommands":
			return reply{502, "<html>bad gateway " + path + "</html>"}
		case "answerCallbackQuery":
			return reply{200, "not json " + path}
		}
		return apiErr(400, "Bad Request: "+path)
	})
	c := newClient(t, f.srv.URL, logs)
	ctx := t.Context()
	var errs []error
	_, err := c.Send(ctx, OutMessage{ChatID: 1, Text: "x"})
	errs = append(errs, err)
	_, err = c.CreateTopic(ctx, 1, "t")
	errs = append(errs, err)
	errs = append(errs, c.SetCommands(ctx, nil), c.AnswerCallback(ctx, "1", ""), c.Edit(ctx, 1, 1, "x", nil))
	startPoll(t, c, make(chan Update))
	testwait.For(t, testwait.Bound, "a conflict", func() bool { return c.Health().Conflict })
	health := []string{c.Health().LastError}

	// And a server that is gone.
	down := newClient(t, "http://"+closedAddr(t), logs)
	_, err = down.Send(ctx, OutMessage{ChatID: 1, Text: "x"})
	errs = append(errs, err)
	startPoll(t, down, make(chan Update))
	testwait.For(t, testwait.Bound, "a failure", func() bool { return down.Health().Failures > 0 })
	health = append(health, down.Health().LastError)

	for _, err := range errs {
		if err == nil {
			t.Fatal("a call succeeded against a failing server")
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("error contains the token: %v", err)
		}
	}
	for _, h := range health {
		if h == "" || strings.Contains(h, secret) {
			t.Errorf("Health.LastError %q is empty or contains the token", h)
		}
	}
	if l := logs.String(); strings.Contains(l, secret) || l == "" {
		t.Errorf("log is empty or contains the token:\n%s", l)
	}
}

func closedAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func TestResponseTooLarge(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"ok":true,"result":"`)
		chunk := bytes.Repeat([]byte("a"), 1<<20)
		for range maxResponseBody >> 20 {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
		io.WriteString(w, `"}`)
	}))
	t.Cleanup(srv.Close)
	c := newClient(t, srv.URL, nil)
	_, err := c.Send(t.Context(), OutMessage{ChatID: 1, Text: "x"})
	if err == nil || !strings.Contains(err.Error(), "longer than 32 MiB") {
		t.Errorf("err = %v, want a too-long error", err)
	}
}
