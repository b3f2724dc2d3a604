// Package tgemu runs the telegram-test-api Bot API emulator
// (scripts/telegram-emulator.js) for Go tests, plays the Telegram user
// through its client API, and reads back what a bot sent and called.
//
// The emulator is a Node process; install it with
// scripts/install-telegram-emulator.sh. Start skips the test when it is
// missing, and fails it under CI.
package tgemu

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const (
	envDir      = "FLEET_TEST_TELEGRAM_EMULATOR"
	installHint = "run scripts/install-telegram-emulator.sh"
	pkgName     = "telegram-test-api"

	// readyTimeout is generous: Node starts slowly on a loaded 2-core CI box.
	readyTimeout = 60 * time.Second
	stopGrace    = 5 * time.Second
	maxResponse  = 64 << 20
	maxStderr    = 256 << 10
	pollEvery    = 50 * time.Millisecond
)

// Emulator is one running emulator process on a fixed loopback port. Its
// methods are safe for concurrent use.
type Emulator struct {
	node, script, dir string
	port              int
	tb                testing.TB
	transport         *http.Transport
	client            *http.Client

	mu   sync.Mutex // guards proc
	proc *process
}

// process is one run of the Node script.
type process struct {
	cmd    *exec.Cmd
	stderr *tailBuffer
	ready  chan struct{} // closed when READY was printed
	done   chan struct{} // closed when the process was reaped
	err    error         // Wait's result, set before done closes
}

// Start runs an emulator on a free loopback port and stops it when the
// test ends. It skips the test (fails it under CI) when node or the npm
// package is missing.
func Start(t testing.TB) *Emulator {
	t.Helper()
	node, err := exec.LookPath("node")
	if err == nil {
		var dir string
		if dir, err = modulesDir(); err == nil {
			return start(t, node, dir)
		}
	}
	missing(t, err)
	return nil
}

func start(t testing.TB, node, dir string) *Emulator {
	t.Helper()
	script, err := scriptPath()
	if err != nil {
		t.Fatalf("tgemu: %v", err)
	}
	port, err := freePort()
	if err != nil {
		t.Fatalf("tgemu: pick a port: %v", err)
	}
	tr := &http.Transport{
		Proxy:               nil, // always loopback
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 8,
		IdleConnTimeout:     30 * time.Second,
	}
	e := &Emulator{
		node: node, script: script, dir: dir, port: port, tb: t,
		transport: tr,
		client:    &http.Client{Transport: tr, Timeout: 30 * time.Second},
	}
	t.Cleanup(e.Stop)
	if err := e.launch(); err != nil {
		t.Fatalf("tgemu: %v", err)
	}
	return e
}

func missing(t testing.TB, err error) {
	t.Helper()
	switch os.Getenv("CI") {
	case "", "0", "false":
		t.Skipf("tgemu: Telegram emulator not available: %v (%s)", err, installHint)
	default:
		t.Fatalf("tgemu: Telegram emulator not available: %v; CI is set, so the Telegram tests must run: %s first", err, installHint)
	}
}

// modulesDir is the folder whose node_modules holds telegram-test-api.
func modulesDir() (string, error) {
	if d := os.Getenv(envDir); d != "" {
		if !hasPackage(d) {
			return "", fmt.Errorf("%s=%s has no node_modules/%s", envDir, d, pkgName)
		}
		return d, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("%s not set and no home directory: %w", envDir, err)
	}
	d := filepath.Join(home, ".cache", "agents-fleet", "telegram-emulator")
	if !hasPackage(d) {
		return "", fmt.Errorf("%s not set and %s has no node_modules/%s", envDir, d, pkgName)
	}
	return d, nil
}

func hasPackage(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "node_modules", pkgName, "package.json"))
	return err == nil
}

// scriptPath finds scripts/telegram-emulator.js from this source file, so it
// works whatever package's test calls Start.
func scriptPath() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("cannot locate the tgemu source file")
	}
	for d := filepath.Dir(file); ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return filepath.Join(d, "scripts", "telegram-emulator.js"), nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod above %s", file)
		}
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// launch starts the process on e.port and waits for READY. A process that
// exits before READY is reported with its stderr.
func (e *Emulator) launch() error {
	p := &process{
		stderr: &tailBuffer{max: maxStderr},
		ready:  make(chan struct{}),
		done:   make(chan struct{}),
	}
	want := fmt.Sprintf("READY %s", e.URL())
	p.cmd = exec.Command(e.node, e.script, strconv.Itoa(e.port), e.dir)
	p.cmd.Stdout = &readyWriter{want: want, ready: p.ready}
	p.cmd.Stderr = p.stderr
	p.cmd.WaitDelay = stopGrace // in case something else holds the pipes
	dieWithParent(p.cmd)
	if err := p.cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", e.script, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	e.mu.Lock()
	e.proc = p
	e.mu.Unlock()

	timer := time.NewTimer(readyTimeout)
	defer timer.Stop()
	select {
	case <-p.ready:
		return nil
	case <-p.done:
		return fmt.Errorf("emulator on port %d exited before READY (%v); stderr:\n%s", e.port, p.err, p.stderr)
	case <-timer.C:
		e.Stop()
		return fmt.Errorf("emulator on port %d not READY after %v; stderr:\n%s", e.port, readyTimeout, p.stderr)
	}
}

// URL is the base URL for both the bot API (URL()+"/bot<token>/<method>",
// e.g. bot.WithServerURL(e.URL())) and the client API.
func (e *Emulator) URL() string { return "http://127.0.0.1:" + strconv.Itoa(e.port) }

// Port is the emulator's TCP port on 127.0.0.1.
func (e *Emulator) Port() int { return e.port }

// Stop ends the emulator: SIGTERM, then SIGKILL after 5 s. Safe to call
// more than once; the test's cleanup calls it too. All stored messages,
// calls and faults are lost.
func (e *Emulator) Stop() {
	e.mu.Lock()
	p := e.proc
	e.proc = nil
	e.mu.Unlock()
	defer e.transport.CloseIdleConnections()
	if p == nil {
		return
	}
	if e.tb.Failed() && p.stderr.String() != "" {
		e.tb.Logf("tgemu: emulator on port %d stderr:\n%s", e.port, p.stderr)
	}
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(stopGrace)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// Restart stops the emulator and starts a fresh one (empty store, ids from
// 1 again) on the same port, so a bot keeps its server URL. It retries
// while the old listener's port is being released.
func (e *Emulator) Restart(t testing.TB) {
	t.Helper()
	e.Stop()
	deadline := time.Now().Add(readyTimeout)
	for {
		err := e.launch()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("tgemu: restart on port %d: %v", e.port, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// exited reports an emulator that is stopped or died on its own.
func (e *Emulator) exited() error {
	e.mu.Lock()
	p := e.proc
	e.mu.Unlock()
	if p == nil {
		return errors.New("emulator is stopped")
	}
	select {
	case <-p.done:
		return fmt.Errorf("emulator exited (%v); stderr:\n%s", p.err, p.stderr)
	default:
		return nil
	}
}

// post sends a JSON body to path and decodes the envelope's result into out
// (when out is not nil).
func (e *Emulator) post(path string, body any, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("tgemu %s: %w", path, err)
	}
	resp, err := e.client.Post(e.URL()+path, "application/json", bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("tgemu %s: %w", path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return fmt.Errorf("tgemu %s: read: %w", path, err)
	}
	var env struct {
		OK          bool            `json:"ok"`
		Result      json.RawMessage `json:"result"`
		Description string          `json:"description"`
		Message     string          `json:"message"` // the stock server's error shape
	}
	if err := json.Unmarshal(data, &env); err != nil {
		return fmt.Errorf("tgemu %s: HTTP %d, bad body %.200q: %w", path, resp.StatusCode, data, err)
	}
	if resp.StatusCode != http.StatusOK || !env.OK {
		return fmt.Errorf("tgemu %s: HTTP %d: %s%s", path, resp.StatusCode, env.Description, env.Message)
	}
	if out == nil || len(env.Result) == 0 || string(env.Result) == "null" {
		return nil
	}
	if err := json.Unmarshal(env.Result, out); err != nil {
		return fmt.Errorf("tgemu %s: decode result: %w", path, err)
	}
	return nil
}

// Chat is the chat a User writes in.
type Chat struct {
	ID      int64
	Type    string // "private", "group", "supergroup"
	Title   string // groups
	IsForum bool   // supergroups with topics
}

// User plays one Telegram user writing to the bot with Token. Set its
// fields before use.
type User struct {
	Token     string
	ID        int64
	FirstName string
	Username  string
	Chat      Chat

	e *Emulator
}

// User returns a user that writes to the bot with token in chatID: a
// private chat when chatID == userID, else a supergroup (set
// Chat.IsForum for topics).
func (e *Emulator) User(token string, userID, chatID int64) *User {
	u := &User{
		Token: token, ID: userID, FirstName: "User" + strconv.FormatInt(userID, 10),
		Username: "user" + strconv.FormatInt(userID, 10),
		Chat:     Chat{ID: chatID, Type: "private"},
		e:        e,
	}
	if chatID != userID {
		u.Chat.Type = "supergroup"
		u.Chat.Title = "Chat " + strconv.FormatInt(chatID, 10)
	}
	return u
}

func (u *User) from() map[string]any {
	m := map[string]any{"id": u.ID, "is_bot": false, "first_name": u.FirstName}
	if u.Username != "" {
		m["username"] = u.Username
	}
	return m
}

func (u *User) chat() map[string]any {
	m := map[string]any{"id": u.Chat.ID, "type": u.Chat.Type}
	if u.Chat.Type == "private" {
		m["first_name"] = u.FirstName
		if u.Username != "" {
			m["username"] = u.Username
		}
	} else if u.Chat.Title != "" {
		m["title"] = u.Chat.Title
	}
	if u.Chat.IsForum {
		m["is_forum"] = true
	}
	return m
}

// SendText sends text as the user and returns the message_id the emulator
// assigned (0 if it did not say).
func (u *User) SendText(text string) (int64, error) { return u.SendTextWith(text, nil) }

// SendTextWith is SendText with extra Message fields merged in, e.g.
// "message_thread_id", "is_topic_message", "reply_to_message".
func (u *User) SendTextWith(text string, extra map[string]any) (int64, error) {
	return u.send("/sendMessage", text, extra)
}

// ReplyTo sends text as a reply to messageID in the user's chat.
func (u *User) ReplyTo(messageID int64, text string) (int64, error) {
	return u.SendTextWith(text, map[string]any{"reply_to_message": map[string]any{
		"message_id": messageID, "chat": u.chat(), "date": time.Now().Unix(),
	}})
}

// SendCommand sends text (e.g. "/status now") with a bot_command entity over
// its first word, as Telegram does.
func (u *User) SendCommand(text string) (int64, error) {
	word, _, _ := strings.Cut(text, " ")
	return u.send("/sendCommand", text, map[string]any{"entities": []map[string]any{
		{"offset": 0, "length": utf16Len(word), "type": "bot_command"},
	}})
}

func (u *User) send(path, text string, extra map[string]any) (int64, error) {
	m := map[string]any{
		"botToken": u.Token, "from": u.from(), "chat": u.chat(),
		"date": time.Now().Unix(), "text": text,
	}
	for k, v := range extra {
		m[k] = v
	}
	var res struct {
		MessageID flexInt `json:"message_id"`
	}
	if err := u.e.post(path, m, &res); err != nil {
		return 0, err
	}
	return int64(res.MessageID), nil
}

// Press presses the inline button with callback data on the bot's message
// messageID. The date is non-zero so go-telegram/bot sees an accessible
// message.
func (u *User) Press(messageID int64, data string) error {
	now := time.Now().Unix()
	return u.e.post("/sendCallback", map[string]any{
		"botToken": u.Token, "from": u.from(), "data": data, "date": now,
		"message": map[string]any{"message_id": messageID, "chat": u.chat(), "date": now},
	}, nil)
}

// BotMessage is one message the bot sent, with its edits applied.
type BotMessage struct {
	MessageID, ChatID, ThreadID, ReplyTo int64
	Text                                 string
	Buttons                              [][]Button      // inline keyboard rows
	Time                                 int64           // ms since the epoch
	Raw                                  json.RawMessage // the stored request params, after edits
}

// Button is one inline keyboard button.
type Button struct{ Text, Data, URL string }

// storedRecord is an entry of the emulator's store: a bot message, a user
// message or a callback query.
type storedRecord struct {
	Time          flexInt         `json:"time"`
	MessageID     flexInt         `json:"messageId"`
	Message       json.RawMessage `json:"message"`
	CallbackQuery json.RawMessage `json:"callbackQuery"`
}

type storedMessage struct {
	ChatID          flexInt         `json:"chat_id"`
	Chat            json.RawMessage `json:"chat"`
	From            json.RawMessage `json:"from"`
	ThreadID        flexInt         `json:"message_thread_id"`
	ReplyToID       flexInt         `json:"reply_to_message_id"`
	ReplyParameters json.RawMessage `json:"reply_parameters"`
	Text            string          `json:"text"`
	ReplyMarkup     json.RawMessage `json:"reply_markup"`
}

// History is every message the bot with token sent, edits applied, oldest
// first.
func (e *Emulator) History(token string) ([]BotMessage, error) {
	var recs []storedRecord
	if err := e.post("/getUpdatesHistory", map[string]any{"token": token}, &recs); err != nil {
		return nil, err
	}
	return botMessages(recs, true)
}

// Unread returns the bot's messages to chatID not read before, and marks
// them read.
func (e *Emulator) Unread(token string, chatID int64) ([]BotMessage, error) {
	var recs []storedRecord
	if err := e.post("/getUpdates", map[string]any{"token": token, "chatId": chatID}, &recs); err != nil {
		return nil, err
	}
	return botMessages(recs, false)
}

// botMessages converts store records; mixed says user records may be among
// them.
func botMessages(recs []storedRecord, mixed bool) ([]BotMessage, error) {
	out := []BotMessage{}
	for _, r := range recs {
		if len(r.CallbackQuery) > 0 && string(r.CallbackQuery) != "null" {
			continue
		}
		var m storedMessage
		if err := json.Unmarshal(r.Message, &m); err != nil {
			return nil, fmt.Errorf("tgemu: stored message %.200s: %w", r.Message, err)
		}
		// User records carry chat and from; bot records carry chat_id.
		if mixed && (present(m.Chat) || present(m.From)) {
			continue
		}
		bm := BotMessage{
			MessageID: int64(r.MessageID), ChatID: int64(m.ChatID), ThreadID: int64(m.ThreadID),
			ReplyTo: int64(m.ReplyToID), Text: m.Text, Time: int64(r.Time), Raw: r.Message,
		}
		if bm.ReplyTo == 0 && present(m.ReplyParameters) {
			var rp struct {
				MessageID flexInt `json:"message_id"`
			}
			if unmarshalMaybeString(m.ReplyParameters, &rp) == nil {
				bm.ReplyTo = int64(rp.MessageID)
			}
		}
		if present(m.ReplyMarkup) {
			var mk struct {
				InlineKeyboard [][]struct {
					Text         string `json:"text"`
					CallbackData string `json:"callback_data"`
					URL          string `json:"url"`
				} `json:"inline_keyboard"`
			}
			if err := unmarshalMaybeString(m.ReplyMarkup, &mk); err != nil {
				return nil, fmt.Errorf("tgemu: reply_markup %.200s: %w", m.ReplyMarkup, err)
			}
			for _, row := range mk.InlineKeyboard {
				var br []Button
				for _, b := range row {
					br = append(br, Button{Text: b.Text, Data: b.CallbackData, URL: b.URL})
				}
				bm.Buttons = append(bm.Buttons, br)
			}
		}
		out = append(out, bm)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].MessageID < out[j].MessageID })
	return out, nil
}

// Call is one bot API request the emulator received.
type Call struct {
	Method string
	Time   int64          // ms since the epoch
	Params map[string]any // as parsed: ids are numbers, reply_markup an object
	Fault  int            // HTTP status of an injected fault, 0 when served
}

// Calls returns the bot API calls made with token, oldest first (the last
// 20000 are kept).
func (e *Emulator) Calls(token string) ([]Call, error) {
	var raw []struct {
		Method string         `json:"method"`
		Time   flexInt        `json:"time"`
		Params map[string]any `json:"params"`
		Fault  flexInt        `json:"fault"`
	}
	if err := e.post("/_calls", map[string]any{"token": token}, &raw); err != nil {
		return nil, err
	}
	out := make([]Call, 0, len(raw))
	for _, c := range raw {
		out = append(out, Call{Method: c.Method, Time: int64(c.Time), Params: c.Params, Fault: int(c.Fault)})
	}
	return out, nil
}

// ResetCalls forgets the calls recorded for token.
func (e *Emulator) ResetCalls(token string) error {
	return e.post("/_calls/reset", map[string]any{"token": token}, nil)
}

// Fault makes the next count calls of method with token answer HTTP status
// with body (JSON) instead of reaching the emulator, e.g. 429 with
// {"ok":false,"error_code":429,"description":"Too Many Requests: retry after 2","parameters":{"retry_after":2}}.
func (e *Emulator) Fault(token, method string, status int, body string, count int) error {
	m := map[string]any{"token": token, "method": method, "status": status, "count": count}
	switch {
	case json.Valid([]byte(body)):
		m["body"] = json.RawMessage(body)
	case body != "": // sent as is; "" lets the wrapper build a Telegram-shaped error
		m["body"] = body
	}
	return e.post("/_fault", m, nil)
}

// ClearFaults disarms every fault for token.
func (e *Emulator) ClearFaults(token string) error {
	return e.post("/_fault/clear", map[string]any{"token": token}, nil)
}

// WaitFor polls History(token) every 50 ms until cond holds and returns
// that history; after timeout it fails the test with what and the history.
func (e *Emulator) WaitFor(t testing.TB, timeout time.Duration, what string, cond func([]BotMessage) bool, token string) []BotMessage {
	t.Helper()
	var last []BotMessage
	err := e.poll(timeout, func() (bool, error) {
		h, err := e.History(token)
		if err != nil {
			return false, err
		}
		last = h
		return cond(h), nil
	})
	if err != nil {
		t.Fatalf("tgemu: waiting %v for %s: %v\nhistory:\n%s", timeout, what, err, dump(last))
	}
	return last
}

// WaitCalls is WaitFor over Calls(token).
func (e *Emulator) WaitCalls(t testing.TB, timeout time.Duration, what string, cond func([]Call) bool, token string) []Call {
	t.Helper()
	var last []Call
	err := e.poll(timeout, func() (bool, error) {
		c, err := e.Calls(token)
		if err != nil {
			return false, err
		}
		last = c
		return cond(c), nil
	})
	if err != nil {
		t.Fatalf("tgemu: waiting %v for %s: %v\ncalls:\n%s", timeout, what, err, dump(last))
	}
	return last
}

// poll runs check every pollEvery until it is true (nil), the emulator
// died, or timeout passed.
func (e *Emulator) poll(timeout time.Duration, check func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	var lastErr error
	for {
		ok, err := check()
		if ok {
			return nil
		}
		lastErr = err
		if err := e.exited(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			if lastErr != nil {
				return fmt.Errorf("timed out; last error: %w", lastErr)
			}
			return errors.New("timed out")
		}
		<-tick.C
	}
}

func dump(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func present(r json.RawMessage) bool { return len(r) > 0 && string(r) != "null" }

// unmarshalMaybeString decodes r, or the JSON text inside r when the
// emulator kept a form field as a string.
func unmarshalMaybeString(r json.RawMessage, v any) error {
	var s string
	if json.Unmarshal(r, &s) == nil {
		return json.Unmarshal([]byte(s), v)
	}
	return json.Unmarshal(r, v)
}

// flexInt decodes a number, a numeric string ("42", the emulator echoes form
// values) or null; anything else ("@channel") is 0.
type flexInt int64

func (f *flexInt) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		*f = flexInt(n)
		return nil
	}
	if x, err := strconv.ParseFloat(s, 64); err == nil {
		*f = flexInt(x)
		return nil
	}
	*f = 0
	return nil
}

func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		if r >= 0x10000 {
			n += 2
		} else {
			n++
		}
	}
	return n
}

// readyWriter is the process's stdout: it closes ready at the READY line.
type readyWriter struct {
	want  string
	ready chan struct{}
	mu    sync.Mutex
	buf   []byte
	seen  bool
}

func (w *readyWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.seen {
		return len(p), nil
	}
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		line := strings.TrimSpace(string(w.buf[:i]))
		w.buf = w.buf[i+1:]
		if line == w.want {
			w.seen = true
			w.buf = nil
			close(w.ready)
			break
		}
	}
	if len(w.buf) > 4096 { // no READY line is that long
		w.buf = w.buf[len(w.buf)-4096:]
	}
	return len(p), nil
}

// tailBuffer keeps the last max bytes written (the process's stderr).
type tailBuffer struct {
	max int
	mu  sync.Mutex
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append([]byte(nil), t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
