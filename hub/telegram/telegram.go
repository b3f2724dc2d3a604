// Package telegram puts the Bot API client library behind the hub's own
// types: the calls the hub makes, long polling with health and throttling,
// and errors the hub can branch on without importing the library.
package telegram

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"
)

// Config of a Client. Token is secret: it must never appear in logs or errors.
type Config struct {
	Token       string        // required
	BaseURL     string        // default "https://api.telegram.org"
	PollTimeout time.Duration // long-poll timeout; default 30s (Telegram's timeout param = PollTimeout-1s, min 1)
	// MinPollGap is the minimum time between the starts of two getUpdates
	// requests; default 250ms. Servers that do not long-poll (the
	// emulator) would otherwise spin.
	MinPollGap time.Duration
	Logger     *slog.Logger // nil → discard
}

const (
	defaultBaseURL     = "https://api.telegram.org"
	defaultPollTimeout = 30 * time.Second
	defaultMinPollGap  = 250 * time.Millisecond
)

// Client talks to one bot's Bot API. Its methods are safe for concurrent
// use; Poll runs at most once at a time.
type Client struct {
	token   string
	baseURL string
	log     *slog.Logger
	http    *http.Client  // shared by every bot.Bot the client makes
	opts    []bot.Option  // common to the API bot and each Poll's bot
	api     *bot.Bot      // for the methods; polling uses its own
	gap     time.Duration // MinPollGap

	polling sync.Mutex // held by the running Poll

	mu     sync.Mutex // guards the fields below
	health Health
	// last is how the last getUpdates ended, for the library's errors handler.
	last pollOutcome
	// lastStart is when the last getUpdates started (MinPollGap).
	lastStart time.Time
	// delivered is the id of the last update Poll handled (sent to out or
	// skipped); the next Poll asks for the updates after it.
	delivered int64
	// owed counts the updates of the last getUpdates answer not handled
	// yet; drained is closed when it is 0. The next getUpdates waits for
	// it (see Poll).
	owed    int
	drained chan struct{}
}

// New makes a Client. It never contacts the server.
func New(cfg Config) (*Client, error) {
	tok := cfg.Token
	if strings.TrimSpace(tok) == "" {
		return nil, errors.New("telegram: empty token")
	}
	// The library puts the token in the URL path unescaped.
	if strings.ContainsAny(tok, "/?#% \t\r\n") {
		return nil, errors.New("telegram: token has characters not allowed in a URL path")
	}
	base := cfg.BaseURL
	if base == "" {
		base = defaultBaseURL
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("telegram: BaseURL %q is not an http(s) URL without credentials, query or fragment",
			redact(base, tok))
	}
	base = strings.TrimRight(base, "/")
	if cfg.PollTimeout < 0 || cfg.MinPollGap < 0 {
		return nil, errors.New("telegram: negative PollTimeout or MinPollGap")
	}
	pollTimeout := cfg.PollTimeout
	if pollTimeout == 0 {
		pollTimeout = defaultPollTimeout
	}
	gap := cfg.MinPollGap
	if gap == 0 {
		gap = defaultMinPollGap
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}

	// An own transport: Poll closes its idle connections.
	var rt http.RoundTripper
	if t, ok := http.DefaultTransport.(*http.Transport); ok {
		rt = t.Clone()
	}
	drained := make(chan struct{})
	close(drained)
	c := &Client{
		token:   tok,
		baseURL: base,
		log:     log,
		http:    &http.Client{Transport: rt, Timeout: pollTimeout + 10*time.Second},
		gap:     gap,
		drained: drained,
	}
	c.opts = []bot.Option{
		bot.WithServerURL(base),
		bot.WithSkipGetMe(),
		// The library sends timeout = its poll timeout - 1s; keep that >= 1.
		bot.WithHTTPClient(max(pollTimeout, 2*time.Second), &transport{c: c}),
		bot.WithErrorsHandler(c.libraryError),
	}
	c.api, err = bot.New(tok, c.opts...)
	if err != nil {
		return nil, fmt.Errorf("telegram: %s", redact(err.Error(), tok))
	}
	return c, nil
}

// Button is an inline keyboard button that sends Data back as a callback.
type Button struct{ Text, Data string }

// OutMessage is a message to send.
type OutMessage struct {
	ChatID, ThreadID, ReplyTo int64      // ThreadID 0: none; ReplyTo 0: none
	Text                      string     // HTML (parse_mode HTML); caller escapes
	Buttons                   [][]Button // inline keyboard; nil or empty: none
	// ForceReply asks the client to reply to this message (ForceReply
	// markup; ignored when Buttons is set).
	ForceReply bool
}

// inlineKeyboard is our own markup type: the library's InlineKeyboardButton
// always encodes "copy_text":{"text":""} (a struct under omitempty), which
// Telegram may reject with BUTTON_COPY_TEXT_INVALID.
type inlineKeyboard struct {
	InlineKeyboard [][]inlineButton `json:"inline_keyboard"`
}

type inlineButton struct {
	Text         string `json:"text"`
	CallbackData string `json:"callback_data"`
}

// keyboard never returns a nil slice inside: {"inline_keyboard":[]} is
// what removes a keyboard on both Telegram and the emulator.
func keyboard(rows [][]Button) *inlineKeyboard {
	kb := &inlineKeyboard{InlineKeyboard: make([][]inlineButton, 0, len(rows))}
	for _, row := range rows {
		r := make([]inlineButton, 0, len(row))
		for _, b := range row {
			r = append(r, inlineButton{Text: b.Text, CallbackData: b.Data})
		}
		kb.InlineKeyboard = append(kb.InlineKeyboard, r)
	}
	return kb
}

func noPreview() *models.LinkPreviewOptions {
	return &models.LinkPreviewOptions{IsDisabled: bot.True()}
}

// Send sends m and returns the new message's id.
func (c *Client) Send(ctx context.Context, m OutMessage) (messageID int64, err error) {
	p := &bot.SendMessageParams{
		ChatID:             m.ChatID,
		MessageThreadID:    int(m.ThreadID),
		Text:               m.Text,
		ParseMode:          models.ParseModeHTML,
		LinkPreviewOptions: noPreview(),
	}
	if m.ReplyTo != 0 {
		// Still send when the message replied to is gone.
		p.ReplyParameters = &models.ReplyParameters{MessageID: int(m.ReplyTo), AllowSendingWithoutReply: true}
	}
	switch {
	case len(m.Buttons) > 0:
		p.ReplyMarkup = keyboard(m.Buttons)
	case m.ForceReply:
		p.ReplyMarkup = &models.ForceReply{ForceReply: true}
	}
	msg, err := c.api.SendMessage(ctx, p)
	if err != nil {
		return 0, c.apiError(ctx, "sendMessage", err)
	}
	return int64(msg.ID), nil
}

// Edit replaces the text and the keyboard of a message; nil buttons removes
// the keyboard. "message is not modified" counts as success.
func (c *Client) Edit(ctx context.Context, chatID, messageID int64, text string, buttons [][]Button) error {
	_, err := c.api.EditMessageText(ctx, &bot.EditMessageTextParams{
		ChatID:             chatID,
		MessageID:          int(messageID),
		Text:               text,
		ParseMode:          models.ParseModeHTML,
		LinkPreviewOptions: noPreview(),
		ReplyMarkup:        keyboard(buttons),
	})
	if err != nil && errors.Is(err, bot.ErrorBadRequest) && strings.Contains(err.Error(), "message is not modified") {
		return nil
	}
	return c.apiError(ctx, "editMessageText", err)
}

// AnswerCallback stops the client's progress indicator for a button press;
// text, if any, is shown as a notification.
func (c *Client) AnswerCallback(ctx context.Context, callbackID, text string) error {
	_, err := c.api.AnswerCallbackQuery(ctx, &bot.AnswerCallbackQueryParams{CallbackQueryID: callbackID, Text: text})
	return c.apiError(ctx, "answerCallbackQuery", err)
}

// CreateTopic creates a forum topic and returns its thread id.
func (c *Client) CreateTopic(ctx context.Context, chatID int64, name string) (threadID int64, err error) {
	t, err := c.api.CreateForumTopic(ctx, &bot.CreateForumTopicParams{ChatID: chatID, Name: name})
	if err != nil {
		return 0, c.apiError(ctx, "createForumTopic", err)
	}
	return int64(t.MessageThreadID), nil
}

// Command is an entry of the bot's command menu.
type Command struct{ Name, Description string }

// SetCommands replaces the bot's command menu.
func (c *Client) SetCommands(ctx context.Context, cmds []Command) error {
	bc := make([]models.BotCommand, 0, len(cmds))
	for _, cmd := range cmds {
		bc = append(bc, models.BotCommand{Command: cmd.Name, Description: cmd.Description})
	}
	_, err := c.api.SetMyCommands(ctx, &bot.SetMyCommandsParams{Commands: bc})
	return c.apiError(ctx, "setMyCommands", err)
}

// DeleteWebhook removes a webhook, if any. Polling and webhooks are
// exclusive (a webhook makes getUpdates fail with 409): call it at start.
// Pending updates are kept.
func (c *Client) DeleteWebhook(ctx context.Context) error {
	_, err := c.api.DeleteWebhook(ctx, &bot.DeleteWebhookParams{})
	return c.apiError(ctx, "deleteWebhook", err)
}

// Errors of the methods. Every error they return names the method and
// never contains the token; the library's own sentinels (bot.ErrorBadRequest
// ...) still match with errors.Is.
var (
	// ErrConflict: HTTP 409, another poller or a webhook.
	ErrConflict = errors.New("telegram: conflict")
	// ErrUnsupported: the server does not implement the method (HTTP 500
	// with a non-Telegram body, as the emulator answers, or 404).
	ErrUnsupported = errors.New("telegram: method not supported by the server")
	// ErrBadRequest: HTTP 400, Telegram refused the request (also a group
	// that became a supergroup).
	ErrBadRequest = errors.New("telegram: bad request")
	// ErrForbidden: HTTP 403, e.g. the user blocked the bot or it left the chat.
	ErrForbidden = errors.New("telegram: forbidden")
	// ErrUnauthorized: HTTP 401, the token is wrong or revoked.
	ErrUnauthorized = errors.New("telegram: unauthorized")
)

// RetryAfterError is a 429: the caller must wait After before calling again.
type RetryAfterError struct {
	After  time.Duration // parameters.retry_after; 1s when missing
	Method string
}

func (e *RetryAfterError) Error() string {
	return fmt.Sprintf("telegram %s: too many requests, retry after %v", e.Method, e.After)
}

// apiError is a failed call: a message made safe once, and the chain for
// errors.Is/As (our sentinel, then the library's error).
type apiError struct {
	msg  string
	errs []error
}

func (e *apiError) Error() string   { return e.msg }
func (e *apiError) Unwrap() []error { return e.errs }

// maxErrorText bounds an error's text: the library quotes whole response
// bodies it cannot decode.
const maxErrorText = 512

// apiError wraps err from the library's method call and notes it in Health,
// unless ctx (the call's) ended it.
func (c *Client) apiError(ctx context.Context, method string, err error) error {
	if err == nil {
		return nil
	}
	var tm *bot.TooManyRequestsError
	if errors.As(err, &tm) {
		after := time.Duration(tm.RetryAfter) * time.Second
		if after <= 0 {
			after = time.Second
		}
		ra := &RetryAfterError{After: after, Method: method}
		c.noteError(ra.Error())
		return ra
	}
	detail := err.Error()
	var se *statusError
	var kind error
	switch {
	case errors.As(err, &se):
		detail = se.Error() // without the library's "error do request for method ..."
		if se.unsupported() {
			kind = ErrUnsupported
		}
	case errors.Is(err, bot.ErrorNotFound):
		kind = ErrUnsupported
	case errors.Is(err, bot.ErrorConflict):
		kind = ErrConflict
	case errors.Is(err, bot.ErrorBadRequest), isMigrate(err):
		kind = ErrBadRequest
	case errors.Is(err, bot.ErrorForbidden):
		kind = ErrForbidden
	case errors.Is(err, bot.ErrorUnauthorized):
		kind = ErrUnauthorized
	}
	e := &apiError{msg: "telegram " + method + ": " + clip(redact(detail, c.token), maxErrorText)}
	if kind != nil {
		e.errs = append(e.errs, kind)
	}
	e.errs = append(e.errs, err)
	// A method the server does not implement says nothing about the
	// link's health (the emulator lacks setMyCommands and the topic calls).
	if ctx.Err() == nil && kind != ErrUnsupported {
		c.noteError(e.msg)
	}
	return e
}

func isMigrate(err error) bool {
	var me *bot.MigrateError
	return errors.As(err, &me)
}

// redact removes the token from s, also in its URL-escaped forms.
func redact(s, token string) string {
	if token == "" {
		return s
	}
	s = strings.ReplaceAll(s, token, "***")
	if e := url.PathEscape(token); e != token {
		s = strings.ReplaceAll(s, e, "***")
	}
	if e := url.QueryEscape(token); e != token {
		s = strings.ReplaceAll(s, e, "***")
	}
	return s
}

// clip cuts s to at most n bytes on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}
