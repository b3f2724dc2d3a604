package tui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/agents-fleet/fleet/client"
	"github.com/agents-fleet/fleet/protocol"
	"github.com/agents-fleet/fleet/registry"
)

// The program around the headless Model: one goroutine reads the attached
// fleet's socket into a bounded buffer (it never waits on the screen, so
// the console is never the slow consumer the fleet evicts); the Bubble Tea
// loop drains that buffer on a 30 fps tick, folds the frames into the
// Model and renders once per tick at most.

// Config is what fleet console needs.
type Config struct {
	Selector    string // FLEET: id, id prefix or name; empty: the only live fleet, else the picker
	RegistryDir string
	In          io.Reader
	Out         io.Writer
	NoColor     bool
	Notify      NotifyMode
	// Env is the environment the program sees (TERM, NO_COLOR…); nil: the process's.
	Env []string
}

const (
	frameTick = time.Second / 30
	// maxBuffered bounds the frames waiting for the next tick. Past it the
	// oldest output frames (protocol.Class.Droppable: transcript, toolCall)
	// are dropped and counted; requests and everything else are kept.
	maxBuffered  = 20000
	redialMin    = 250 * time.Millisecond
	redialMax    = 10 * time.Second
	dialDeadline = 15 * time.Second
	runTimeout   = 2 * time.Minute
	sendQueue    = 64
	maxRunOutput = 64 << 10
)

// errStopped is what the header says while the wanted fleet is not in the
// registry.
var errStopped = errors.New("the fleet stopped; waiting for it to start again")

// Run runs the console until the operator quits or ctx ends.
func Run(ctx context.Context, cfg Config) error {
	at := time.Now()
	entries, err := registry.Live(cfg.RegistryDir)
	if err != nil {
		return err
	}
	a := newApp(cfg)
	switch {
	case cfg.Selector != "":
		e, err := registry.Select(entries, cfg.Selector)
		if err != nil {
			return err
		}
		a.want = e.ID
	case len(entries) == 1:
		a.want = entries[0].ID
	case len(entries) == 0:
		return fmt.Errorf("%w (no live fleet in %s; start one with fleet run --control-socket)", registry.ErrNoFleet, cfg.RegistryDir)
	}
	a.listed(entries, at)
	if a.want != "" {
		a.model.Select(a.want)
	} else {
		a.model.Key(Key{Text: "F"}) // several fleets, none named: start in the picker
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wait := a.start(ctx)
	opts := []tea.ProgramOption{tea.WithContext(ctx), tea.WithFPS(30)}
	if cfg.In != nil {
		opts = append(opts, tea.WithInput(cfg.In))
	}
	if cfg.Out != nil {
		opts = append(opts, tea.WithOutput(cfg.Out))
	}
	if cfg.Env != nil {
		opts = append(opts, tea.WithEnvironment(cfg.Env))
	}
	_, err = tea.NewProgram(&program{a: a}, opts...).Run()
	cancel()
	wait()
	if errors.Is(err, tea.ErrProgramKilled) && ctx.Err() != nil {
		return nil
	}
	return err
}

// app is shared by the Bubble Tea loop, the connector and the watcher. The
// model is touched only by the Bubble Tea loop; the others hand it frames
// and connection events through mu.
type app struct {
	cfg   Config
	ctx   context.Context
	model *Model

	mu       sync.Mutex
	want     string              // the fleet the operator wants attached
	wantDesc registry.Descriptor // its descriptor as last listed; zero until it was
	lastSeen time.Time           // when the last listing that had it live was read
	listedAt time.Time           // when the listing in live was read
	live     []registry.Entry    // the last listing of the live fleets
	retryNow bool                // the operator picked a fleet: dial it now, back-off or not
	refs     []FleetRef          // the live fleets last handed to the model
	frames   []buffered
	events   []func(*Model) // connection changes, in order
	dropped  int
	wake     chan struct{}
	conn     *client.Conn
	out      chan protocol.Message // to the writer of conn
	stopDial context.CancelFunc    // cancels the dial under way, if any
	runs     sync.WaitGroup        // commands run for RunFleet
}

func newApp(cfg Config) *app {
	return &app{cfg: cfg, model: New(Options{NoColor: cfg.NoColor, Notify: cfg.Notify}), wake: make(chan struct{}, 1)}
}

// start runs the connector and the registry watcher until ctx ends; the
// returned func waits for them and for the commands run for RunFleet.
func (a *app) start(ctx context.Context) (wait func()) {
	a.ctx = ctx
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); a.connector(ctx) }()
	go func() { defer wg.Done(); a.watcher(ctx) }()
	return func() {
		wg.Wait()
		a.runs.Wait()
	}
}

type buffered struct {
	id     string
	m      protocol.Message
	replay bool
}

// setFleetsLocked hands the model the live fleets, when they changed.
// a.mu must be held.
func (a *app) setFleetsLocked(entries []registry.Entry) {
	refs := make([]FleetRef, 0, len(entries))
	for _, e := range entries {
		refs = append(refs, FleetRef{ID: e.ID, Name: e.Name, Cwd: e.Cwd})
	}
	if slices.Equal(refs, a.refs) {
		return
	}
	a.refs = refs
	a.events = append(a.events, func(m *Model) { m.SetFleets(refs) })
}

// list reads the live fleets and hands them to listed, stamped with the
// time the read began.
func (a *app) list() {
	at := time.Now()
	if entries, err := registry.Live(a.cfg.RegistryDir); err == nil {
		a.listed(entries, at)
	}
}

// listed takes a listing of the live fleets read from at (from the watcher
// or the connector). A listing read before the one already taken is
// dropped: the watcher and the connector list concurrently, and a late
// stale listing would bring a stopped fleet back and, stamped late, make
// its successor look older than it (then never followed). The picker gets
// the listing; and when the wanted fleet has left the registry and its
// successor is listed (the fleet restarted), the successor becomes the
// wanted fleet at once, whatever back-off the old one had reached.
func (a *app) listed(entries []registry.Entry, at time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if at.Before(a.listedAt) {
		return
	}
	a.listedAt, a.live = at, entries
	a.setFleetsLocked(entries)
	if a.want == "" {
		return
	}
	for _, e := range entries {
		if e.ID == a.want {
			a.wantDesc, a.lastSeen = e.Descriptor, at
			return
		}
	}
	if a.wantDesc.ID != a.want {
		return // never listed: nothing to follow it by
	}
	next, ok := registry.Successor(a.wantDesc, a.lastSeen, entries)
	if !ok {
		return
	}
	id := next.ID
	a.setWantLocked(id)
	a.events = append(a.events, func(m *Model) { m.Select(id) })
}

// switchTo asks the connector for another fleet, now.
func (a *app) switchTo(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.retryNow = true
	a.setWantLocked(id)
}

// setWantLocked makes id the wanted fleet: the connection or dial to
// another ends and the connector wakes. a.mu must be held.
func (a *app) setWantLocked(id string) {
	a.want, a.wantDesc = id, registry.Descriptor{}
	for _, e := range a.live {
		if e.ID == id {
			a.wantDesc, a.lastSeen = e.Descriptor, a.listedAt
		}
	}
	if a.conn != nil {
		a.conn.Close()
	}
	if a.stopDial != nil {
		a.stopDial()
	}
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

func (a *app) event(f func(*Model)) {
	a.mu.Lock()
	a.events = append(a.events, f)
	a.mu.Unlock()
}

func (a *app) push(id string, m protocol.Message, replay bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.frames = append(a.frames, buffered{id, m, replay})
	if len(a.frames) > maxBuffered {
		// Drop the oldest output; keep what the operator must see.
		kept := a.frames[:0]
		excess := len(a.frames) - maxBuffered/2
		for _, f := range a.frames {
			if excess > 0 && protocol.ClassOf(f.m).Droppable() {
				excess--
				a.dropped++
				continue
			}
			kept = append(kept, f)
		}
		a.frames = kept
	}
}

func (a *app) send(id string, m protocol.Message) {
	a.mu.Lock()
	out, want := a.out, a.want
	a.mu.Unlock()
	if out == nil || want != id {
		a.event(func(mo *Model) { mo.Apply(id, &protocol.Error{Message: "not connected: nothing was sent"}, false) })
		return
	}
	select {
	case out <- m:
	default:
		a.event(func(mo *Model) {
			mo.Apply(id, &protocol.Error{Message: "the fleet is not reading: nothing was sent"}, false)
		})
	}
}

// writer sends what the operator asked for on c until done; it owns the
// writes, so a fleet slow to read never stalls the screen.
func (a *app) writer(id string, c *client.Conn, out <-chan protocol.Message, done <-chan struct{}) {
	for {
		select {
		case <-done:
			return
		case m := <-out:
			if err := c.Send(m); err != nil {
				a.event(func(mo *Model) { mo.Apply(id, &protocol.Error{Message: "send failed: " + err.Error()}, false) })
				c.Close()
				return
			}
		}
	}
}

// connector keeps the wanted fleet attached: it dials, reads until the
// connection ends, and dials again with back-off (250 ms doubling to 10 s,
// from the start again after a connection that was up). While the fleet is
// not in the registry it waits for it; listed switches it to a successor.
func (a *app) connector(ctx context.Context) {
	backoff := redialMin
	var failed string     // the fleet whose last attach ended or failed
	var retryAt time.Time // when failed may be dialled again
	shown := ""           // the fleet last shown as stopped
	for ctx.Err() == nil {
		a.list()
		a.mu.Lock()
		want, live, now := a.want, a.live, a.retryNow
		a.retryNow = false
		a.mu.Unlock()
		if now {
			failed = ""
		}
		i := slices.IndexFunc(live, func(e registry.Entry) bool { return e.ID == want })
		switch {
		case want == "":
			shown = ""
			if !a.sleep(ctx, rescanEvery) {
				return
			}
			continue
		case i < 0:
			if shown != want {
				shown = want
				a.event(func(m *Model) { m.Disconnected(want, errStopped, 0) })
			}
			if !a.sleep(ctx, rescanEvery) {
				return
			}
			continue
		case want == failed && time.Now().Before(retryAt):
			if !a.sleep(ctx, time.Until(retryAt)) {
				return
			}
			continue
		}
		shown = ""
		attached, err := a.attach(ctx, live[i].Descriptor)
		if ctx.Err() != nil {
			return
		}
		a.mu.Lock()
		still := a.want == want
		a.mu.Unlock()
		if !still {
			failed = "" // switched or followed: the next fleet is dialled now
			continue
		}
		if attached || want != failed {
			backoff = redialMin
		}
		failed, retryAt = want, time.Now().Add(backoff)
		retry := backoff
		a.event(func(m *Model) { m.Disconnected(want, err, retry) })
		backoff = min(backoff*2, redialMax)
	}
}

func (a *app) sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
	case <-a.wake:
	}
	return true
}

// attach reads one connection to d until it ends. attached says whether it
// got as far as the welcome; err is nil when the operator (or a followed
// restart) wanted another fleet before that.
func (a *app) attach(ctx context.Context, d registry.Descriptor) (attached bool, err error) {
	if err := registry.Validate(d); err != nil {
		return false, err
	}
	dctx, cancel := context.WithTimeout(ctx, dialDeadline)
	a.mu.Lock()
	if a.want != d.ID {
		a.mu.Unlock()
		cancel()
		return false, nil
	}
	a.stopDial = cancel
	a.mu.Unlock()
	c, err := client.Dial(dctx, d, client.Options{ClientKind: protocol.ClientOther, ClientName: "console"})
	cancel()
	a.mu.Lock()
	a.stopDial = nil
	if a.want != d.ID {
		a.mu.Unlock()
		if c != nil {
			c.Close()
		}
		return false, nil
	}
	if err != nil {
		a.mu.Unlock()
		return false, err
	}
	out, done := make(chan protocol.Message, sendQueue), make(chan struct{})
	a.conn, a.out = c, out
	a.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); a.writer(d.ID, c, out, done) }()
	defer func() { close(done); wg.Wait() }()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	w := c.Welcome()
	a.event(func(m *Model) { m.Connected(d.ID, w) })
	for {
		m, _, replay, err := c.Next()
		var fe *client.FrameError
		if errors.As(err, &fe) {
			continue
		}
		if err != nil {
			a.mu.Lock()
			if a.conn == c {
				a.conn, a.out = nil, nil
			}
			a.mu.Unlock()
			c.Close()
			if errors.Is(err, io.EOF) {
				return true, errors.New("the fleet closed the connection")
			}
			return true, err
		}
		a.push(d.ID, m, replay)
		if n := c.Skipped(); n > 0 {
			typ := m.MessageType()
			a.event(func(mod *Model) { mod.Skipped(d.ID, typ, n) })
		}
	}
}

// run runs `fleet ARGS` in act.Dir off the Bubble Tea loop and notes its
// output in the conversation.
func (a *app) run(act RunFleet) {
	a.event(func(m *Model) { m.Note(act.Fleet, "running: fleet "+strings.Join(act.Args, " ")) })
	a.runs.Add(1)
	go func() {
		defer a.runs.Done()
		self, err := os.Executable()
		var out []byte
		if err == nil {
			ctx, cancel := context.WithTimeout(a.ctx, runTimeout)
			cmd := exec.CommandContext(ctx, self, act.Args...)
			cmd.Dir = act.Dir
			out, err = cmd.CombinedOutput()
			cancel()
		}
		text := strings.TrimSpace(string(out[:min(len(out), maxRunOutput)]))
		if err != nil {
			text = strings.TrimSpace(text + "\n" + err.Error())
		}
		a.event(func(m *Model) { m.Note(act.Fleet, "fleet "+strings.Join(act.Args, " ")+": "+text) })
	}()
}

// drain folds what the connector buffered into the model; it reports
// whether anything changed.
func (a *app) drain() bool {
	a.mu.Lock()
	frames, events, dropped := a.frames, a.events, a.dropped
	a.frames, a.events, a.dropped = nil, nil, 0
	a.mu.Unlock()
	for _, f := range events {
		f(a.model)
	}
	for _, f := range frames {
		a.model.Apply(f.id, f.m, f.replay)
	}
	if dropped > 0 {
		a.model.Apply(a.model.Selected(), &protocol.Error{Message: fmt.Sprintf("console: %d output lines skipped to keep up", dropped)}, false)
	}
	return len(frames) > 0 || len(events) > 0
}

// program adapts the app to Bubble Tea.
type program struct {
	a     *app
	view  string
	dirty bool
	last  time.Time
}

type tickMsg time.Time

func tick() tea.Cmd { return tea.Tick(frameTick, func(t time.Time) tea.Msg { return tickMsg(t) }) }

func (p *program) Init() tea.Cmd { p.dirty = true; return tick() }

func (p *program) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	a := p.a
	var cmds []tea.Cmd
	switch msg := msg.(type) {
	case tickMsg:
		if a.drain() {
			p.dirty = true
			cmds = append(cmds, p.actions(a.model.Pending()))
		}
		if now := time.Time(msg); now.Sub(p.last) >= time.Second {
			p.last, p.dirty = now, true // clocks on screen (uptime, staleness)
		}
		cmds = append(cmds, tick())
	case tea.WindowSizeMsg:
		a.model.Resize(msg.Width, msg.Height)
		p.dirty = true
	case tea.FocusMsg:
		a.model.Focused(true)
	case tea.BlurMsg:
		a.model.Focused(false)
	case tea.PasteMsg:
		cmds = append(cmds, p.actions(a.model.Key(Key{Text: msg.Content})))
		p.dirty = true
	case tea.KeyPressMsg:
		cmds = append(cmds, p.actions(a.model.Key(keyOf(msg))))
		p.dirty = true
	}
	if alerts := a.model.Alerts(); len(alerts) > 0 {
		for _, s := range alerts {
			cmds = append(cmds, tea.Raw(s))
		}
	}
	return p, tea.Batch(cmds...)
}

// actions carries out what a key asked for.
func (p *program) actions(acts []Action) tea.Cmd {
	var cmd tea.Cmd
	for _, act := range acts {
		switch act := act.(type) {
		case Send:
			p.a.send(act.Fleet, act.Msg)
		case SwitchFleet:
			p.a.model.Select(act.ID)
			p.a.switchTo(act.ID)
		case RunFleet:
			p.a.run(act)
		case Quit:
			cmd = tea.Quit
		}
	}
	return cmd
}

func keyOf(k tea.KeyPressMsg) Key {
	key := tea.Key(k)
	if key.Text != "" && key.Mod&(tea.ModCtrl|tea.ModAlt) == 0 {
		return Key{Text: key.Text}
	}
	return Key{Name: k.String()}
}

func (p *program) View() tea.View {
	if p.dirty || p.view == "" {
		p.view, p.dirty = p.a.model.View(), false
	}
	v := tea.NewView(p.view)
	v.AltScreen = true
	v.ReportFocus = true
	v.WindowTitle = "fleet console"
	return v
}

// ParseNotify reads --notify: off, or bell, osc9 and osc777 comma-separated.
func ParseNotify(s string) (NotifyMode, error) {
	var m NotifyMode
	for _, part := range strings.Split(s, ",") {
		switch strings.TrimSpace(part) {
		case "bell":
			m |= NotifyBell
		case "osc9":
			m |= NotifyOSC9
		case "osc777":
			m |= NotifyOSC777
		case "off", "none":
			m |= NotifyOff
		case "":
		default:
			return 0, fmt.Errorf("%q: use bell, osc9, osc777 (comma-separated) or off", part)
		}
	}
	return m, nil
}
