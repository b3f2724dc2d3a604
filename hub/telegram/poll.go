package telegram

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"
)

// Update is an incoming update the hub uses: a new message or a button
// press. Other kinds are skipped by Poll.
type Update struct {
	ID       int64
	Message  *Message  // nil unless a (new) message
	Callback *Callback // nil unless a callback query
}

// Message is a new message sent to the bot.
type Message struct {
	ID, ChatID int64
	// ThreadID is message_thread_id as Telegram sends it: the forum topic,
	// but outside forums (IsForum false) it can name a reply thread.
	ThreadID int64
	ChatType string // private, group, supergroup, channel
	IsForum  bool
	FromID   int64  // 0 when not sent by a user (e.g. an anonymous admin)
	FromName string // @username, else first name
	Text     string // the text, else the caption
	ReplyTo  int64  // message id this replies to, 0 if none
}

// Callback is a press of an inline keyboard button.
type Callback struct {
	ID       string
	FromID   int64
	FromName string // @username, else first name
	// ChatID and MessageID are those of the message the button is on; an
	// inaccessible (old) message still has both. 0 when there is no
	// message (inline mode).
	ChatID, MessageID int64
	ThreadID          int64 // 0 when the message is inaccessible
	Data              string
}

// Health is how polling goes, for status displays.
type Health struct {
	LastPoll time.Time // end of the last getUpdates that succeeded (HTTP 200, ok:true)
	// LastError is the last getUpdates or API error, token redacted. It
	// and LastErrorAt stay after a success, so status can show them.
	LastError   string
	LastErrorAt time.Time
	Conflict    bool  // the last getUpdates failed with 409 (another poller or a webhook)
	Polls       int64 // successful getUpdates so far
	Failures    int64 // failed getUpdates in a row (0 after a success)
}

// Health returns a snapshot; safe for concurrent use.
func (c *Client) Health() Health {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.health
}

// pollOutcome is how the last getUpdates request ended, as the transport saw it.
type pollOutcome int

const (
	pollNone    pollOutcome = iota
	pollOK                  // HTTP 200 and ok:true, though the library may still fail to decode it
	pollFailed              // noted in Health by the transport
	pollAborted             // the request's context ended
)

// Poll receives updates until ctx is done and sends them, in order, to out
// (blocking with ctx). It returns ctx.Err() at the end. Only one Poll runs
// at a time.
//
// A getUpdates confirms the previous answer's updates to Telegram, so Poll
// sends it only once they are all handed to out (or skipped): an update
// still waiting for out when ctx ends comes again with the next Poll (a new
// process gets that whole answer again; Telegram keeps updates 24 hours).
func (c *Client) Poll(ctx context.Context, out chan<- Update) error {
	if !c.polling.TryLock() {
		return errors.New("telegram: Poll is already running")
	}
	defer c.polling.Unlock()

	c.mu.Lock()
	offset := c.delivered
	c.releaseLocked()
	c.mu.Unlock()

	b, err := bot.New(c.token, append(slices.Clone(c.opts),
		bot.WithDefaultHandler(c.handler(out)),
		bot.WithNotAsyncHandlers(), // one worker, handlers in order
		bot.WithInitialOffset(offset),
	)...)
	if err != nil {
		return fmt.Errorf("telegram: %s", redact(err.Error(), c.token))
	}
	c.log.Info("telegram: polling", "url", c.baseURL)
	b.Start(ctx)
	// Else the long-poll connection stays open, idle, after Poll.
	c.http.CloseIdleConnections()
	c.log.Info("telegram: polling stopped")
	return ctx.Err()
}

// handler is the library's default (and only) handler while polling.
func (c *Client) handler(out chan<- Update) bot.HandlerFunc {
	return func(ctx context.Context, _ *bot.Bot, mu *models.Update) {
		if mu != nil {
			if u, ok := convert(mu); ok {
				select {
				case out <- u:
				case <-ctx.Done():
					return // not handled: stays unconfirmed
				}
			}
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if mu != nil {
			c.delivered = mu.ID
		}
		if c.owed > 0 {
			c.owed--
			if c.owed == 0 {
				close(c.drained)
			}
		}
	}
}

// releaseLocked stops holding the next getUpdates for the last answer.
// c.mu must be held.
func (c *Client) releaseLocked() {
	if c.owed > 0 {
		c.owed = 0
		close(c.drained)
	}
}

// pollTurn waits until the last answer's updates are handled and
// MinPollGap has passed since the last getUpdates started.
func (c *Client) pollTurn(ctx context.Context) error {
	c.mu.Lock()
	drained := c.drained
	c.mu.Unlock()
	select {
	case <-drained:
	case <-ctx.Done():
		return ctx.Err()
	}
	c.mu.Lock()
	wait := time.Until(c.lastStart.Add(c.gap))
	c.mu.Unlock()
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	c.mu.Lock()
	c.lastStart = time.Now()
	c.mu.Unlock()
	return nil
}

// pollEnded notes how a getUpdates ended in Health: fail "" is a success
// whose result holds n updates.
func (c *Client) pollEnded(ctx context.Context, fail string, conflict bool, n int) {
	now := time.Now()
	c.mu.Lock()
	if fail == "" {
		recovered := c.health.Failures
		c.health.LastPoll = now
		c.health.Polls++
		c.health.Failures = 0
		c.health.Conflict = false
		c.last = pollOK
		if n > 0 {
			c.owed = n
			c.drained = make(chan struct{})
		}
		c.mu.Unlock()
		if recovered > 0 {
			c.log.Info("telegram: getUpdates works again", "failures", recovered)
		}
		return
	}
	if ctx.Err() != nil {
		c.last = pollAborted
		c.mu.Unlock()
		return
	}
	c.last = pollFailed
	wasConflict := c.health.Conflict
	c.health.Failures++
	c.health.Conflict = conflict
	c.health.LastError = "getUpdates: " + fail
	c.health.LastErrorAt = now
	failures := c.health.Failures
	c.mu.Unlock()
	// Warn when trouble starts or changes kind; the library retries every few seconds.
	level := slog.LevelDebug
	if failures == 1 || conflict != wasConflict {
		level = slog.LevelWarn
	}
	c.log.Log(context.Background(), level, "telegram: getUpdates failed", "error", fail, "failures", failures, "conflict", conflict)
}

// noteError records a failed API call in Health.
func (c *Client) noteError(msg string) {
	c.mu.Lock()
	c.health.LastError = msg
	c.health.LastErrorAt = time.Now()
	c.mu.Unlock()
}

// libraryError is the library's errors handler. For getUpdates the
// transport has noted the failure already, except when the answer was
// fine over HTTP but the library could not use it (e.g. decoding).
func (c *Client) libraryError(err error) {
	msg := clip(redact(err.Error(), c.token), maxErrorText)
	if !strings.HasPrefix(msg, "error get updates") {
		c.log.Debug("telegram: library", "error", msg)
		return
	}
	c.mu.Lock()
	c.releaseLocked() // that answer's updates will not come
	record := c.last == pollOK
	if record {
		c.health.LastError = "getUpdates: " + msg
		c.health.LastErrorAt = time.Now()
	}
	c.last = pollNone
	c.mu.Unlock()
	if record {
		c.log.Warn("telegram: getUpdates answer unusable", "error", msg)
	} else {
		c.log.Debug("telegram: library", "error", msg)
	}
}

// maxResponseBody bounds a response read into memory.
const maxResponseBody = 32 << 20

// transport is the library's HttpClient: it throttles getUpdates, notes
// poll health, and turns answers that are not Bot API responses into
// errors the library passes on (it ignores HTTP status codes).
type transport struct{ c *Client }

// envelope is the part of a Bot API response the transport looks at.
type envelope struct {
	OK          *bool           `json:"ok"`
	ErrorCode   int             `json:"error_code"`
	Description string          `json:"description"`
	Result      json.RawMessage `json:"result"`
}

// statusError is an HTTP error whose body is not a Bot API response.
type statusError struct {
	status int
	body   string
}

func (e *statusError) Error() string {
	if e.unsupported() {
		return fmt.Sprintf("not supported by the server: HTTP %d: %s", e.status, e.body)
	}
	return fmt.Sprintf("HTTP %d: %s", e.status, e.body)
}

// unsupported: the emulator answers methods it lacks with 500 and
// {"message":...}; a missing route is a 404.
func (e *statusError) unsupported() bool {
	return e.status == http.StatusInternalServerError || e.status == http.StatusNotFound
}

func (t *transport) Do(req *http.Request) (*http.Response, error) {
	c := t.c
	ctx := req.Context()
	method := path.Base(req.URL.Path)
	poll := method == "getUpdates"
	if err := asJSON(req); err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	if poll {
		if err := c.pollTurn(ctx); err != nil {
			if req.Body != nil {
				req.Body.Close()
			}
			c.pollEnded(ctx, err.Error(), false, 0)
			return nil, err
		}
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if poll {
			c.pollEnded(ctx, redact(err.Error(), c.token), false, 0)
		}
		return nil, err
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBody+1))
	resp.Body.Close()
	if err == nil && len(body) > maxResponseBody {
		err = fmt.Errorf("longer than %d MiB", maxResponseBody>>20)
	}
	if err != nil {
		err = fmt.Errorf("%s response: %w", method, err)
		if poll {
			c.pollEnded(ctx, redact(err.Error(), c.token), false, 0)
		}
		return nil, err
	}

	var env envelope
	isAPI := json.Unmarshal(body, &env) == nil && env.OK != nil
	var se *statusError
	if !isAPI && resp.StatusCode/100 != 2 {
		se = &statusError{status: resp.StatusCode, body: redact(snippet(body), c.token)}
	}
	if poll {
		fail, n := pollResult(resp.StatusCode, &env, isAPI, se, body)
		conflict := resp.StatusCode == http.StatusConflict || env.ErrorCode == http.StatusConflict
		c.pollEnded(ctx, redact(fail, c.token), conflict, n)
	}
	if se != nil {
		return nil, se
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	return resp, nil
}

// pollResult says whether a getUpdates answer succeeded (fail "") and how
// many updates it holds.
func pollResult(status int, env *envelope, isAPI bool, se *statusError, body []byte) (fail string, n int) {
	switch {
	case se != nil:
		return se.Error(), 0
	case !isAPI:
		return fmt.Sprintf("HTTP %d: not a Bot API response: %s", status, snippet(body)), 0
	case !*env.OK || status != http.StatusOK:
		code := env.ErrorCode
		if code == 0 {
			code = status
		}
		return clip(fmt.Sprintf("%d %s", code, env.Description), maxErrorText), 0
	}
	var items []json.RawMessage
	_ = json.Unmarshal(env.Result, &items) // not a list: the library reports it
	return "", len(items)
}

// snippet is the start of a body for an error message, on one line.
func snippet(body []byte) string {
	return clip(strings.Join(strings.Fields(string(body[:min(len(body), 1024)])), " "), 200)
}

// convert maps a library update to ours; false for kinds the hub skips.
func convert(u *models.Update) (Update, bool) {
	switch {
	case u.Message != nil:
		return Update{ID: u.ID, Message: convertMessage(u.Message)}, true
	case u.CallbackQuery != nil:
		return Update{ID: u.ID, Callback: convertCallback(u.CallbackQuery)}, true
	}
	return Update{}, false
}

func convertMessage(m *models.Message) *Message {
	out := &Message{
		ID:       int64(m.ID),
		ChatID:   m.Chat.ID,
		ThreadID: int64(m.MessageThreadID),
		ChatType: string(m.Chat.Type),
		IsForum:  m.Chat.IsForum,
		Text:     m.Text,
	}
	if out.Text == "" {
		out.Text = m.Caption
	}
	if m.From != nil {
		out.FromID = m.From.ID
		out.FromName = userName(m.From)
	}
	if m.ReplyToMessage != nil {
		out.ReplyTo = int64(m.ReplyToMessage.ID)
	}
	return out
}

func convertCallback(cq *models.CallbackQuery) *Callback {
	out := &Callback{
		ID:       cq.ID,
		FromID:   cq.From.ID,
		FromName: userName(&cq.From),
		Data:     cq.Data,
	}
	// The library tells the two apart by date == 0.
	switch m := cq.Message; {
	case m.Message != nil:
		out.ChatID = m.Message.Chat.ID
		out.MessageID = int64(m.Message.ID)
		out.ThreadID = int64(m.Message.MessageThreadID)
	case m.InaccessibleMessage != nil:
		out.ChatID = m.InaccessibleMessage.Chat.ID
		out.MessageID = int64(m.InaccessibleMessage.MessageID)
	}
	return out
}

func userName(u *models.User) string {
	if u.Username != "" {
		return "@" + u.Username
	}
	return u.FirstName
}
