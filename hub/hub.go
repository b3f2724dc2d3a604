// Package hub is fleet hub: a Telegram bot that attaches to every fleet on
// the machine that opted in (hubAttach), after the operator approved it in
// the chat, and relays what needs a human — confirmations, questions,
// failures, replies — to the allowed chats, and the operator's answers and
// prompts back (docs/hub.md).
//
// One goroutine, the main loop, owns all state: the fleets, the pending
// requests, the buttons and the routing. Everything else talks to it
// through one channel: the registry watcher, the Telegram poller, one link
// goroutine per attached fleet and the outbox (the one sender to Telegram,
// which owns rate limits and coalescing). The main loop never waits on
// Telegram or on a fleet.
package hub

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agents-fleet/fleet/hub/telegram"
	"github.com/agents-fleet/fleet/internal/lockfile"
	"github.com/agents-fleet/fleet/registry"
)

// Verbosity is how much the hub posts besides what needs an answer.
type Verbosity int

// Verbosities (telegramHub.verbosity).
const (
	// Quiet: requests, failures, budget warnings and replies.
	Quiet Verbosity = iota
	// Normal adds completions, other consoles' prompts and errors.
	Normal
	// Verbose adds worker output and tool calls (coalesced).
	Verbose
)

// ParseVerbosity reads quiet, normal or verbose.
func ParseVerbosity(s string) (Verbosity, error) {
	switch s {
	case "quiet":
		return Quiet, nil
	case "", "normal":
		return Normal, nil
	case "verbose":
		return Verbose, nil
	}
	return Normal, fmt.Errorf("verbosity must be quiet, normal or verbose, got %q", s)
}

func (v Verbosity) String() string {
	return [...]string{"quiet", "normal", "verbose"}[v]
}

// Config is a resolved hub configuration (see Resolve).
type Config struct {
	FleetHome    string
	RegistryDir  string
	Token        string // the bot token; never logged
	APIBaseURL   string
	AllowedChats []int64
	AllowedUsers []int64 // empty: anyone in an allowed chat
	Verbosity    Verbosity
	Logger       *slog.Logger

	// Tuning, for tests; zero means the default.
	Rescan      time.Duration // registry rescan period; default 5 s
	NativePoll  time.Duration // native root status poll; default 2 s
	DeafAfter   time.Duration // no successful getUpdates for this long = deaf; default 45 s
	PollTimeout time.Duration // Telegram long-poll timeout; default 30 s
}

// botAPI is what the hub needs of the Bot API client.
type botAPI interface {
	sender
	Poll(ctx context.Context, out chan<- telegram.Update) error
	Health() telegram.Health
	AnswerCallback(ctx context.Context, callbackID, text string) error
	CreateTopic(ctx context.Context, chatID int64, name string) (int64, error)
	SetCommands(ctx context.Context, cmds []telegram.Command) error
	DeleteWebhook(ctx context.Context) error
}

// Dir is <fleetHome>/hub: the lock, the status socket and the decisions.
func Dir(fleetHome string) string { return filepath.Join(fleetHome, "hub") }

// ErrRunning is returned by Run when another hub holds the fleetHome's lock.
var ErrRunning = errors.New("another fleet hub is already running for this fleet home")

// Run runs the hub until ctx is done. It takes the fleetHome's hub lock
// first (ErrRunning if held), and returns after every goroutine it started
// has exited.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	bot, err := telegram.New(telegram.Config{Token: cfg.Token, BaseURL: cfg.APIBaseURL, PollTimeout: cfg.PollTimeout, Logger: cfg.Logger})
	if err != nil {
		return err
	}
	return run(ctx, cfg, bot)
}

func run(ctx context.Context, cfg Config, bot botAPI) error {
	cfg.defaults()
	dir := Dir(cfg.FleetHome)
	if err := registry.EnsurePrivateDir(dir); err != nil {
		return fmt.Errorf("hub directory: %w", err)
	}
	lock, err := lockfile.TryLock(filepath.Join(dir, "hub.lock"))
	if errors.Is(err, lockfile.ErrBusy) {
		return fmt.Errorf("%w (%s); fleet hub status shows it", ErrRunning, cfg.FleetHome)
	}
	if err != nil {
		return fmt.Errorf("hub lock: %w", err)
	}
	defer lock.Release()

	trust, terr := loadTrust(dir)
	if terr != nil {
		cfg.Logger.Warn("hub decisions", "err", terr)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	h := newHub(cfg, bot, trust)
	h.ctx = ctx // before any goroutine that reads it starts
	ln, err := listenStatus(dir)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	goFn := func(f func()) {
		wg.Add(1)
		go func() { defer wg.Done(); f() }()
	}
	goFn(func() { serveStatus(ctx, ln, h.statusSnapshot, cfg.Logger) })
	goFn(func() { h.out.run(ctx) })
	goFn(func() { h.setup(ctx) })
	goFn(func() { h.poll(ctx) })
	goFn(func() {
		watchRegistry(ctx, cfg.RegistryDir, cfg.Rescan, cfg.Logger, func(s scan) bool { return h.emit(ctx, s) })
	})
	cfg.Logger.Info("fleet hub running", "fleetHome", cfg.FleetHome, "registry", cfg.RegistryDir,
		"chats", cfg.AllowedChats, "verbosity", cfg.Verbosity.String(), "status", statusAddr(dir))
	h.loop(ctx)
	cancel()
	wg.Wait()
	h.shutdown()
	cfg.Logger.Info("fleet hub stopped")
	return nil
}

func (c *Config) defaults() {
	if c.Rescan <= 0 {
		c.Rescan = 5 * time.Second
	}
	if c.NativePoll <= 0 {
		c.NativePoll = 2 * time.Second
	}
	if c.DeafAfter <= 0 {
		c.DeafAfter = 45 * time.Second
	}
	if c.RegistryDir == "" {
		c.RegistryDir = filepath.Join(c.FleetHome, "sockets")
	}
}

// hub is the main loop's state. Fields below ev are touched only by the
// main loop (and by shutdown after it returned).
type hub struct {
	cfg   Config
	log   *slog.Logger
	bot   botAPI
	out   *outbox
	ev    chan any
	trust *trustStore
	start time.Time
	snap  atomic.Pointer[Status]
	// inflight bounds the Telegram calls made off the main loop (callback
	// answers, topic creation).
	inflight chan struct{}
	aux      sync.WaitGroup
	ctx      context.Context // set before the goroutines start; read-only after

	fleets   map[string]*fleet // by descriptor id
	gen      int
	buttons  *buttonSet
	posts    *postIndex
	chats    map[int64]*chatState
	refused  map[string]string // descriptor path → the reason posted
	deaf     bool
	conflict bool
}

type chatState struct {
	id       int64
	selected string // fleet id chosen with /use
	forum    bool
	noTopics bool             // topic creation failed here: post in General
	topics   map[string]int64 // fleet id → message_thread_id
	creating map[string]bool
	byThread map[int64]string // message_thread_id → fleet id
}

func newHub(cfg Config, bot botAPI, trust *trustStore) *hub {
	h := &hub{
		cfg: cfg, log: cfg.Logger, bot: bot, trust: trust, start: time.Now(),
		ev:       make(chan any, 4096),
		inflight: make(chan struct{}, 16),
		fleets:   map[string]*fleet{},
		buttons:  newButtonSet(),
		posts:    newPostIndex(),
		chats:    map[int64]*chatState{},
		refused:  map[string]string{},
	}
	h.out = newOutbox(bot, cfg.Logger, func(n sentNote) { h.emit(h.ctxOrBackground(), n) })
	for _, c := range cfg.AllowedChats {
		h.chat(c)
	}
	h.publish()
	return h
}

func (h *hub) ctxOrBackground() context.Context {
	if h.ctx != nil {
		return h.ctx
	}
	return context.Background()
}

func (h *hub) chat(id int64) *chatState {
	c := h.chats[id]
	if c == nil {
		c = &chatState{id: id, topics: map[string]int64{}, creating: map[string]bool{}, byThread: map[int64]string{}}
		h.chats[id] = c
	}
	return c
}

// emit hands an event to the main loop; false once ctx is done.
func (h *hub) emit(ctx context.Context, e any) bool {
	select {
	case h.ev <- e:
		return true
	case <-ctx.Done():
		return false
	}
}

// setup does the best-effort calls at start: polling and webhooks are
// exclusive, and the command menu is a nicety (the emulator refuses it).
func (h *hub) setup(ctx context.Context) {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := h.bot.DeleteWebhook(cctx); err != nil && ctx.Err() == nil {
		h.log.Warn("telegram deleteWebhook failed (polling may get 409 while a webhook is set)", "err", err)
	}
	if err := h.bot.SetCommands(cctx, hubCommands); err != nil && ctx.Err() == nil {
		h.log.Info("telegram setMyCommands failed; the command menu stays as it was", "err", err)
	}
}

// poll runs the Telegram poller and hands updates to the main loop.
func (h *hub) poll(ctx context.Context) {
	ups := make(chan telegram.Update, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.bot.Poll(ctx, ups)
	}()
	for {
		select {
		case <-ctx.Done():
			<-done
			return
		case u := <-ups:
			if !h.emit(ctx, u) {
				<-done
				return
			}
		}
	}
}

// loop is the main loop.
func (h *hub) loop(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			h.tick(time.Now())
		case e := <-h.ev:
			h.handle(e)
		}
	}
}

func (h *hub) handle(e any) {
	switch e := e.(type) {
	case scan:
		h.onScan(e)
	case telegram.Update:
		if e.Message != nil {
			h.onMessage(e.Message)
		}
		if e.Callback != nil {
			h.onCallback(e.Callback)
		}
	case frameEvent:
		if f := h.fleets[e.id]; f != nil && f.link != nil && f.link.gen == e.gen {
			h.onFrame(f, e.m, e.replay)
		}
	case linkEvent:
		if f := h.fleets[e.id]; f != nil && f.link != nil && f.link.gen == e.gen {
			h.onLink(f, e)
		}
	case sentNote:
		h.posts.bind(e)
	case topicResult:
		h.onTopic(e)
	}
	// Frames can come by the thousand a second; the status snapshot
	// catches up with them on the next tick.
	if _, ok := e.(frameEvent); !ok {
		h.publish()
	}
}

// tick runs once a second: native polls and deadlines, Bot API health.
func (h *hub) tick(now time.Time) {
	for _, f := range h.sortedFleets() {
		h.nativeTick(f, now)
	}
	h.checkHealth(now)
	h.publish()
}

// checkHealth notices a deaf link: getUpdates has not succeeded for
// DeafAfter (or answers 409), and says so once in the log; status shows it.
func (h *hub) checkHealth(now time.Time) {
	hl := h.bot.Health()
	since := hl.LastPoll
	if since.IsZero() {
		since = h.start
	}
	deaf := now.Sub(since) > h.cfg.DeafAfter
	if deaf != h.deaf {
		h.deaf = deaf
		if deaf {
			h.log.Error("telegram: no successful getUpdates; the hub is not receiving messages", "since", since.Format(time.RFC3339), "lastError", hl.LastError)
		} else {
			h.log.Info("telegram: receiving updates again")
		}
	}
	if hl.Conflict != h.conflict {
		h.conflict = hl.Conflict
		if hl.Conflict {
			h.log.Error("telegram: getUpdates answers 409 Conflict: another process polls with this bot token, or a webhook is set; this hub receives nothing until it stops", "lastError", hl.LastError)
		}
	}
}

// shutdown stops every link and waits for the helpers; the main loop has
// returned.
func (h *hub) shutdown() {
	for _, f := range h.fleets {
		if f.link != nil {
			f.link.stop()
			f.link = nil
		}
	}
	h.aux.Wait()
}

// async runs f off the main loop, bounded; it reports through h.ev.
func (h *hub) async(f func(ctx context.Context)) {
	select {
	case h.inflight <- struct{}{}:
	default:
		h.log.Warn("too many Telegram calls in flight; one skipped")
		return
	}
	h.aux.Add(1)
	go func() {
		defer h.aux.Done()
		defer func() { <-h.inflight }()
		ctx, cancel := context.WithTimeout(h.ctxOrBackground(), 20*time.Second)
		defer cancel()
		f(ctx)
	}()
}

// answerCallback stops the spinner on a pressed button, with text shown to
// the presser.
func (h *hub) answerCallback(id, text string) {
	h.async(func(ctx context.Context) {
		if err := h.bot.AnswerCallback(ctx, id, clip(text, 190)); err != nil {
			h.log.Debug("telegram answerCallbackQuery failed", "err", err)
		}
	})
}

// newToken returns unguessable callback data: 12 random bytes, 16 chars.
func newToken() string {
	var b [12]byte
	rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func (h *hub) allowedChat(id int64) bool { return slices.Contains(h.cfg.AllowedChats, id) }

func (h *hub) allowedUser(id int64) bool {
	return len(h.cfg.AllowedUsers) == 0 || slices.Contains(h.cfg.AllowedUsers, id)
}

// ReadBotToken reads the bot token file, which must be a regular file (not
// a symlink) owned by the user and private to them: mode 0600 on Unix, an
// access list that lets no one else in on Windows.
func ReadBotToken(path string) (string, error) {
	if path == "" {
		return "", errors.New("no bot token file: set telegramHub.botTokenFile in config.json or pass --bot-token-file")
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return "", fmt.Errorf("bot token file %s: %w", path, err)
	}
	if err := checkBotTokenMode(path, fi); err != nil {
		return "", err
	}
	tok, err := registry.ReadToken(path)
	if err != nil {
		return "", fmt.Errorf("bot token file: %w%s", err, privateFileHint(path))
	}
	return tok, nil
}
