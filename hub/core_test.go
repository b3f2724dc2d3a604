package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/client"
	"github.com/agents-fleet/fleet/hub/telegram"
	"github.com/agents-fleet/fleet/protocol"
	"github.com/agents-fleet/fleet/registry"
)

// fakeBot is the Bot API in memory: Send and Edit as fakeSender, and the
// rest recorded.
type fakeBot struct {
	*fakeSender
	bmu         sync.Mutex
	health      telegram.Health
	answers     []answerCall
	topics      []topicCall
	topicThread int64
	topicErr    error
}

type answerCall struct{ id, text string }

type topicCall struct {
	chat int64
	name string
}

func (b *fakeBot) Poll(ctx context.Context, out chan<- telegram.Update) error {
	<-ctx.Done()
	return ctx.Err()
}

func (b *fakeBot) Health() telegram.Health {
	b.bmu.Lock()
	defer b.bmu.Unlock()
	return b.health
}

func (b *fakeBot) setHealth(h telegram.Health) {
	b.bmu.Lock()
	b.health = h
	b.bmu.Unlock()
}

func (b *fakeBot) AnswerCallback(ctx context.Context, id, text string) error {
	b.bmu.Lock()
	defer b.bmu.Unlock()
	b.answers = append(b.answers, answerCall{id, text})
	return nil
}

func (b *fakeBot) CreateTopic(ctx context.Context, chat int64, name string) (int64, error) {
	b.bmu.Lock()
	defer b.bmu.Unlock()
	b.topics = append(b.topics, topicCall{chat, name})
	if b.topicErr != nil {
		return 0, b.topicErr
	}
	b.topicThread++
	return b.topicThread, nil
}

func (b *fakeBot) SetCommands(context.Context, []telegram.Command) error { return nil }
func (b *fakeBot) DeleteWebhook(context.Context) error                   { return nil }

func (b *fakeBot) answer(id string) (string, bool) {
	b.bmu.Lock()
	defer b.bmu.Unlock()
	for _, a := range b.answers {
		if a.id == id {
			return a.text, true
		}
	}
	return "", false
}

func (b *fakeBot) topicCalls() []topicCall {
	b.bmu.Lock()
	defer b.bmu.Unlock()
	return append([]topicCall(nil), b.topics...)
}

// testHub is a hub driven by hand on the test goroutine, as its main loop
// would: events go through h.handle, and the outbox is run on a fake clock.
type testHub struct {
	t     testing.TB
	h     *hub
	bot   *fakeBot
	clock *fakeClock
	seen  int // sends already returned by newSends
}

const (
	opUser = 7
	opName = "alice"
)

func newTestHub(t testing.TB, cfg Config) *testHub {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = discard()
	}
	if len(cfg.AllowedChats) == 0 {
		cfg.AllowedChats = []int64{42}
	}
	cfg.FleetHome = t.TempDir()
	cfg.defaults()
	clock := newFakeClock()
	bot := &fakeBot{fakeSender: newFakeSender(clock)}
	trust, err := loadTrust(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	h := newHub(cfg, bot, trust)
	h.out.now = clock.Now
	e := &testHub{t: t, h: h, bot: bot, clock: clock}
	t.Cleanup(func() { h.aux.Wait() })
	return e
}

// addFleet adds an attached fleet with a stub link whose out channel the
// test reads.
func (e *testHub) addFleet(id, name string) *fleet {
	f := &fleet{d: registry.Descriptor{ID: id, PID: 123, Name: name, Cwd: "/x/" + name, StartedAt: int64(len(e.h.fleets))}, requests: map[string]*request{}, ourPrompts: map[string]bool{}}
	l := &link{id: id, out: make(chan protocol.Message, 16), done: make(chan struct{}), cancel: func() {}}
	close(l.done)
	f.link, f.connected, f.attachedOnce, f.state = l, true, true, stateAttached
	e.h.fleets[id] = f
	return f
}

// pump hands the main loop what the helpers emitted (sent notes, topic
// results), after the async Telegram calls finished.
func (e *testHub) pump() {
	e.h.aux.Wait()
	for {
		select {
		case ev := <-e.h.ev:
			e.h.handle(ev)
		default:
			return
		}
	}
}

// flush makes every Telegram call the hub queued, on the fake clock.
func (e *testHub) flush() {
	e.t.Helper()
	e.pump()
	drive(e.t, e.h.out, e.clock, 10*time.Minute, e.pump)
	e.pump()
}

func (e *testHub) frame(f *fleet, m protocol.Message, replay bool) {
	e.h.handle(frameEvent{id: f.d.ID, gen: f.link.gen, m: m, replay: replay})
}

func (e *testHub) message(m *telegram.Message) {
	if m.FromID == 0 {
		m.FromID, m.FromName = opUser, opName
	}
	if m.ChatID == 0 {
		m.ChatID = e.h.cfg.AllowedChats[0]
	}
	e.h.handle(telegram.Update{Message: m})
}

var cbSeq int

// press presses a button and returns what the presser was told.
func (e *testHub) press(chat, msg int64, data string, from int64) string {
	e.t.Helper()
	cbSeq++
	id := fmt.Sprintf("cb-%d", cbSeq)
	e.h.handle(telegram.Update{Callback: &telegram.Callback{ID: id, FromID: from, FromName: opName, ChatID: chat, MessageID: msg, Data: data}})
	e.h.aux.Wait()
	text, ok := e.bot.answer(id)
	if !ok {
		e.t.Fatalf("the button press %s was not answered", id)
	}
	return text
}

// newSends is what was sent since the last call.
func (e *testHub) newSends() []sendCall {
	all := e.bot.sends()
	out := all[e.seen:]
	e.seen = len(all)
	return out
}

// only asserts one send whose text contains want, and returns it.
func (e *testHub) find(sends []sendCall, want string) sendCall {
	e.t.Helper()
	var found []sendCall
	for _, s := range sends {
		if strings.Contains(s.text, want) {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		e.t.Fatalf("%d messages contain %q, want 1; sent: %s", len(found), want, texts(sends))
	}
	return found[0]
}

func texts(cs []sendCall) string {
	var b strings.Builder
	for _, c := range cs {
		fmt.Fprintf(&b, "\n  [%d/%d t%d] %q", c.chat, c.msg, c.thread, c.text)
	}
	return b.String()
}

// fromLink is what the hub sent the fleet since the last call.
func fromLink(f *fleet) []protocol.Message {
	var out []protocol.Message
	for {
		select {
		case m := <-f.link.out:
			out = append(out, m)
		default:
			return out
		}
	}
}

func prompts(ms []protocol.Message) []*protocol.Prompt {
	var out []*protocol.Prompt
	for _, m := range ms {
		if p, ok := m.(*protocol.Prompt); ok {
			out = append(out, p)
		}
	}
	return out
}

type nativeFrame struct {
	tid string
	req protocol.NativeRequest
}

func nativeFrames(t *testing.T, ms []protocol.Message) []nativeFrame {
	t.Helper()
	var out []nativeFrame
	for _, m := range ms {
		if n, ok := m.(*protocol.NativeRoot); ok {
			var r protocol.NativeRequest
			if err := json.Unmarshal(n.Request, &r); err != nil {
				t.Fatalf("nativeRoot request %s: %v", n.Request, err)
			}
			out = append(out, nativeFrame{n.ID, r})
		}
	}
	return out
}

func byAction(fs []nativeFrame, action string) []nativeFrame {
	var out []nativeFrame
	for _, f := range fs {
		if f.req.Action == action {
			out = append(out, f)
		}
	}
	return out
}

func buttonData(rows [][]telegram.Button) []string {
	var out []string
	for _, r := range rows {
		for _, b := range r {
			out = append(out, b.Data)
		}
	}
	return out
}

func buttonNamed(t *testing.T, rows [][]telegram.Button, label string) string {
	t.Helper()
	for _, r := range rows {
		for _, b := range r {
			if strings.Contains(b.Text, label) {
				return b.Data
			}
		}
	}
	t.Fatalf("no button %q in %+v", label, rows)
	return ""
}

func TestConfirmPostedToEveryChat(t *testing.T) {
	e := newTestHub(t, Config{AllowedChats: []int64{42, -100777}, Verbosity: Normal})
	f := e.addFleet("123-abc", "alpha")
	summary := strings.Repeat("rm -rf build && echo <script>alert('x')</script> & done\n", 20)
	e.frame(f, &protocol.ConfirmRequest{ID: "confirm-0123456789-abcdefghij-0123456789-abcdefghij-0123456789", Summary: summary}, false)
	e.flush()
	sends := e.newSends()
	if len(sends) != 2 {
		t.Fatalf("%d messages, want one per allowed chat: %s", len(sends), texts(sends))
	}
	chats := map[int64]bool{}
	var tokens []string
	for _, s := range sends {
		chats[s.chat] = true
		if !strings.Contains(s.text, esc(strings.TrimSpace(summary))) {
			t.Errorf("the summary is not there in full, escaped: %q", s.text)
		}
		if strings.Contains(s.text, "<script>") || strings.Contains(s.text, "& done") {
			t.Errorf("the summary is not HTML-escaped: %q", s.text)
		}
		if !strings.Contains(s.text, "alpha") {
			t.Errorf("the message does not name the fleet: %q", s.text)
		}
		if len(s.buttons) != 1 || len(s.buttons[0]) != 2 || !strings.Contains(s.buttons[0][0].Text, "Approve") || !strings.Contains(s.buttons[0][1].Text, "Deny") {
			t.Fatalf("buttons = %+v, want Approve and Deny", s.buttons)
		}
		for _, d := range buttonData(s.buttons) {
			if len(d) == 0 || len(d) > 64 {
				t.Errorf("callback_data %q is %d bytes; Telegram allows 1-64", d, len(d))
			}
			if strings.Contains(d, "confirm-") || strings.Contains(d, "0123456789") {
				t.Errorf("callback_data %q carries the request id", d)
			}
		}
		if s.buttons[0][0].Data == s.buttons[0][1].Data {
			t.Errorf("Approve and Deny have the same callback_data")
		}
		tokens = append(tokens, buttonData(s.buttons)...)
	}
	if !chats[42] || !chats[-100777] {
		t.Errorf("posted to %v", chats)
	}
	// Both chats answer the same request.
	if tokens[0] != tokens[2] || tokens[1] != tokens[3] {
		t.Errorf("the copies have different buttons: %v", tokens)
	}
}

func TestConfirmApproveFlow(t *testing.T) {
	e := newTestHub(t, Config{AllowedChats: []int64{42, 43}, Verbosity: Normal})
	f := e.addFleet("123-abc", "alpha")
	e.frame(f, &protocol.ConfirmRequest{ID: "c1", Summary: "deploy to prod"}, false)
	e.flush()
	sends := e.newSends()
	post := sends[0]
	approve := buttonNamed(t, post.buttons, "Approve")

	if got := e.press(post.chat, post.msg, approve, opUser); !strings.Contains(got, "Sent to alpha") || !strings.Contains(got, "approved") {
		t.Errorf("the presser was told %q", got)
	}
	ms := fromLink(f)
	if len(ms) != 1 {
		t.Fatalf("the fleet got %d frames: %+v", len(ms), ms)
	}
	if r, ok := ms[0].(*protocol.ConfirmResponse); !ok || *r != (protocol.ConfirmResponse{ID: "c1", Approve: true}) {
		t.Fatalf("the fleet got %#v, want confirmResponse{c1, approve}", ms[0])
	}
	// A second press before the fleet resolved it sends nothing.
	if got := e.press(post.chat, post.msg, buttonNamed(t, post.buttons, "Deny"), opUser); !strings.HasPrefix(got, "already answered (") {
		t.Errorf("a second press was told %q", got)
	}
	if ms := fromLink(f); len(ms) != 0 {
		t.Errorf("a second press sent %+v", ms)
	}

	e.frame(f, &protocol.ConfirmResolved{ID: "c1", Approved: true, Kind: protocol.KindConfirm, Reason: protocol.ReasonAnswered}, false)
	e.flush()
	for _, s := range sends {
		m := e.bot.message(s.chat, s.msg)
		if !strings.Contains(m.text, "approved here by "+opName) {
			t.Errorf("chat %d after the fleet resolved it: %q", s.chat, m.text)
		}
		if !strings.Contains(m.text, "deploy to prod") {
			t.Errorf("the outcome edit lost the summary: %q", m.text)
		}
		if len(m.buttons) != 0 {
			t.Errorf("chat %d still has buttons: %+v", s.chat, m.buttons)
		}
	}
	if got := e.press(post.chat, post.msg, approve, opUser); !strings.HasPrefix(got, "already answered (") || !strings.Contains(got, "approved here by") {
		t.Errorf("a press after the outcome was told %q", got)
	}
	if ms := fromLink(f); len(ms) != 0 {
		t.Errorf("a late press sent %+v", ms)
	}
}

func TestConfirmOutcomes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		press  bool
		res    protocol.ConfirmResolved
		want   string
		reject string
	}{
		{"superseded", false, protocol.ConfirmResolved{Approved: true, Reason: protocol.ReasonSuperseded}, "answered elsewhere", "here by"},
		{"superseded after our press", true, protocol.ConfirmResolved{Approved: false, Reason: protocol.ReasonSuperseded}, "answered elsewhere", "here by"},
		{"answered by another console", false, protocol.ConfirmResolved{Approved: false, Reason: protocol.ReasonAnswered}, "answered elsewhere", "here by"},
		{"legacy answered elsewhere", false, protocol.ConfirmResolved{Approved: true}, "answered elsewhere", "here by"},
		{"expired", false, protocol.ConfirmResolved{Reason: protocol.ReasonExpired}, "expired", "here by"},
		{"cancelled", false, protocol.ConfirmResolved{Reason: protocol.ReasonCancelled}, "cancelled", "here by"},
		{"denied here", true, protocol.ConfirmResolved{Approved: false, Reason: protocol.ReasonAnswered}, "denied here by " + opName, "elsewhere"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newTestHub(t, Config{Verbosity: Normal})
			f := e.addFleet("123-abc", "alpha")
			e.frame(f, &protocol.ConfirmRequest{ID: "c1", Summary: "do it"}, false)
			e.flush()
			post := e.newSends()[0]
			if tc.press {
				e.press(post.chat, post.msg, buttonNamed(t, post.buttons, "Deny"), opUser)
			}
			res := tc.res
			res.ID = "c1"
			e.frame(f, &res, false)
			e.flush()
			m := e.bot.message(post.chat, post.msg)
			if !strings.Contains(m.text, tc.want) || strings.Contains(m.text, tc.reject) || len(m.buttons) != 0 {
				t.Errorf("outcome: %q with buttons %+v; want %q without %q", m.text, m.buttons, tc.want, tc.reject)
			}
			if len(f.requests) != 0 {
				t.Errorf("the request is still pending")
			}
		})
	}
}

// When another console answers first (reason answered, the other verdict)
// after the operator pressed a button here, the hub must not say the
// operator gave the other console's verdict.
func TestConfirmAnsweredElsewhereAfterOurPress(t *testing.T) {
	e := newTestHub(t, Config{Verbosity: Normal})
	f := e.addFleet("123-abc", "alpha")
	e.frame(f, &protocol.ConfirmRequest{ID: "c1", Summary: "do it"}, false)
	e.flush()
	post := e.newSends()[0]
	e.press(post.chat, post.msg, buttonNamed(t, post.buttons, "Approve"), opUser)
	e.frame(f, &protocol.ConfirmResolved{ID: "c1", Approved: false, Kind: protocol.KindConfirm, Reason: protocol.ReasonAnswered}, false)
	e.flush()
	m := e.bot.message(post.chat, post.msg)
	if strings.Contains(m.text, "denied here by "+opName) {
		t.Errorf("%s pressed Approve, another console denied; the message says %q", opName, m.text)
	}
}

// A long summary is posted in parts, the buttons on the last; the outcome
// must be shown on that message (the one whose buttons go away).
func TestLongConfirmOutcomeShown(t *testing.T) {
	e := newTestHub(t, Config{Verbosity: Normal})
	f := e.addFleet("123-abc", "alpha")
	var b strings.Builder
	for i := range 300 {
		fmt.Fprintf(&b, "step %03d: run something long enough\n", i)
	}
	e.frame(f, &protocol.ConfirmRequest{ID: "c1", Summary: b.String()}, false)
	e.flush()
	sends := e.newSends()
	if len(sends) < 2 {
		t.Fatalf("a %d-char summary went in %d message(s)", b.Len(), len(sends))
	}
	var joined string
	for _, s := range sends {
		if utf16Len(s.text) > MaxMessageLen {
			t.Errorf("a part of %d units", utf16Len(s.text))
		}
		joined += s.text
	}
	if !strings.Contains(joined, "step 000") || !strings.Contains(joined, "step 299") {
		t.Errorf("the summary is not all there")
	}
	last := sends[len(sends)-1]
	if len(last.buttons) == 0 {
		t.Fatalf("the buttons are not on the last part")
	}
	e.press(last.chat, last.msg, buttonNamed(t, last.buttons, "Approve"), opUser)
	e.frame(f, &protocol.ConfirmResolved{ID: "c1", Approved: true, Reason: protocol.ReasonAnswered}, false)
	e.flush()
	m := e.bot.message(last.chat, last.msg)
	if len(m.buttons) != 0 {
		t.Errorf("the buttons stayed")
	}
	if !strings.Contains(m.text, "approved here by "+opName) {
		t.Errorf("the message that had the buttons does not show the outcome; it now reads %d units starting %q … ending %q",
			utf16Len(m.text), clip(m.text, 80), m.text[max(0, len(m.text)-80):])
	}
	if !strings.Contains(m.text, "step 299") {
		t.Errorf("the last part lost the end of the summary")
	}
}

func TestReplayedRequests(t *testing.T) {
	e := newTestHub(t, Config{Verbosity: Normal})
	f := e.addFleet("123-abc", "alpha")
	f.attachedOnce, f.connected, f.state = false, false, stateConnecting
	up := func() {
		e.h.onLink(f, linkEvent{id: f.d.ID, up: true, welcome: &protocol.Welcome{SessionID: "s1"}})
	}
	up()
	e.frame(f, &protocol.ConfirmRequest{ID: "old", Summary: "summary-old"}, true)
	e.frame(f, &protocol.ConfirmRequest{ID: "gone", Summary: "summary-gone"}, true)
	e.frame(f, &protocol.ConfirmRequest{ID: "old", Summary: "summary-old"}, true)
	e.frame(f, &protocol.Reply{Text: "an old reply from history"}, true)
	e.frame(f, &protocol.UserMessage{Source: "tui", Text: "an old prompt from history"}, true)
	e.frame(f, &protocol.ReplayEnd{}, false)
	e.flush()
	sends := e.newSends()
	old := e.find(sends, "summary-old")
	gone := e.find(sends, "summary-gone")
	if !strings.Contains(old.text, "asked before the hub attached") {
		t.Errorf("a replayed request should say it is from before: %q", old.text)
	}
	summary := e.find(sends, "attached to alpha")
	if !strings.Contains(summary.text, "2 earlier items of history not reposted") || !strings.Contains(summary.text, "2 pending request") {
		t.Errorf("summary: %q", summary.text)
	}
	for _, s := range sends {
		if strings.Contains(s.text, "from history") {
			t.Errorf("replayed history was posted: %q", s.text)
		}
	}
	if len(sends) != 3 {
		t.Errorf("sends: %s", texts(sends))
	}
	// Re-attach: the replay brings "old" again (not reposted); "gone" is
	// not in it any more.
	e.h.onLink(f, linkEvent{id: f.d.ID, err: errors.New("connection lost: EOF")})
	if f.state != stateReconnecting || f.connected {
		t.Errorf("after a lost connection: state %q connected %v", f.state, f.connected)
	}
	up()
	e.frame(f, &protocol.ConfirmRequest{ID: "old", Summary: "summary-old"}, true)
	e.frame(f, &protocol.ConfirmRequest{ID: "new", Summary: "asked while away"}, true)
	e.frame(f, &protocol.Reply{Text: "more history"}, true)
	e.frame(f, &protocol.ReplayEnd{}, false)
	e.flush()
	sends = e.newSends()
	e.find(sends, "asked while away")
	if len(sends) != 1 {
		t.Errorf("after the re-attach: %s; want only the new request", texts(sends))
	}
	if m := e.bot.message(gone.chat, gone.msg); !strings.Contains(m.text, "resolved while the hub was away") || len(m.buttons) != 0 {
		t.Errorf("a request that went away while detached: %q %+v", m.text, m.buttons)
	}
	if m := e.bot.message(old.chat, old.msg); len(m.buttons) == 0 || strings.Contains(m.text, "resolved") {
		t.Errorf("a request still pending was changed: %q", m.text)
	}
	if _, ok := f.requests["old"]; !ok || len(f.requests) != 2 {
		t.Errorf("pending: %v", f.requests)
	}
}

func TestLiveReplyPosted(t *testing.T) {
	e := newTestHub(t, Config{Verbosity: Quiet})
	f := e.addFleet("123-abc", "alpha")
	e.frame(f, &protocol.Reply{Text: "  here is <the> answer  "}, false)
	e.frame(f, &protocol.Reply{Text: "an old one"}, true)
	e.flush()
	sends := e.newSends()
	if len(sends) != 1 || !strings.Contains(sends[0].text, "here is &lt;the&gt; answer") || !strings.Contains(sends[0].text, "alpha") {
		t.Fatalf("sends: %s", texts(sends))
	}
	// A reply to that message is routed to its fleet.
	if ref, ok := e.h.posts.lookup(sends[0].chat, sends[0].msg); !ok || ref.fleet != f.d.ID {
		t.Errorf("the reply's message is not bound to its fleet: %+v %v", ref, ok)
	}
}

func TestOwnPromptNotEchoed(t *testing.T) {
	e := newTestHub(t, Config{Verbosity: Normal})
	f := e.addFleet("123-abc", "alpha")
	e.message(&telegram.Message{ID: 5, Text: "  run the tests  "})
	ps := prompts(fromLink(f))
	if len(ps) != 1 || ps[0].Text != "run the tests" || ps[0].RequestID == "" {
		t.Fatalf("the fleet got %+v, want one prompt with a requestId", ps)
	}
	e.frame(f, &protocol.UserMessage{Source: "telegram-hub", Text: "run the tests", RequestID: ps[0].RequestID}, false)
	e.frame(f, &protocol.UserMessage{Source: "tui", Text: "something else", RequestID: "req-other"}, false)
	e.flush()
	sends := e.newSends()
	if len(sends) != 1 {
		t.Fatalf("sends: %s", texts(sends))
	}
	if strings.Contains(sends[0].text, "run the tests") || !strings.Contains(sends[0].text, "tui") || !strings.Contains(sends[0].text, "something else") {
		t.Errorf("posted %q; want the other console's prompt only", sends[0].text)
	}
	// Quiet does not post other consoles' prompts.
	e.h.cfg.Verbosity = Quiet
	e.frame(f, &protocol.UserMessage{Source: "tui", Text: "quietly", RequestID: "req-3"}, false)
	e.flush()
	if s := e.newSends(); len(s) != 0 {
		t.Errorf("quiet posted %s", texts(s))
	}
}

func TestAllowlists(t *testing.T) {
	t.Run("chat", func(t *testing.T) {
		e := newTestHub(t, Config{AllowedChats: []int64{42}, Verbosity: Normal})
		f := e.addFleet("123-abc", "alpha")
		e.message(&telegram.Message{ChatID: 999, Text: "rm -rf /"})
		e.message(&telegram.Message{ChatID: 999, Text: "/fleets"})
		e.frame(f, &protocol.ConfirmRequest{ID: "c1", Summary: "x"}, false)
		e.flush()
		post := e.newSends()[0]
		if got := e.press(999, post.msg, buttonNamed(t, post.buttons, "Approve"), opUser); strings.Contains(got, "Sent") {
			t.Errorf("a press from another chat was told %q", got)
		}
		if ms := fromLink(f); len(ms) != 0 {
			t.Errorf("a chat not allowed reached the fleet: %+v", ms)
		}
		e.flush()
		for _, s := range e.bot.all() {
			if s.chat == 999 {
				t.Errorf("the hub wrote to a chat not allowed: %+v", s)
			}
		}
	})
	t.Run("user", func(t *testing.T) {
		e := newTestHub(t, Config{AllowedChats: []int64{-100500}, AllowedUsers: []int64{opUser}, Verbosity: Normal})
		f := e.addFleet("123-abc", "alpha")
		e.frame(f, &protocol.ConfirmRequest{ID: "c1", Summary: "x"}, false)
		e.flush()
		post := e.newSends()[0]
		approve := buttonNamed(t, post.buttons, "Approve")
		if got := e.press(post.chat, post.msg, approve, 8); !strings.Contains(got, "not allowed") {
			t.Errorf("a press by another user was told %q", got)
		}
		e.message(&telegram.Message{ChatID: -100500, FromID: 8, FromName: "mallory", Text: "hello"})
		if ms := fromLink(f); len(ms) != 0 {
			t.Errorf("another user reached the fleet: %+v", ms)
		}
		if f.requests["c1"].answer != "" {
			t.Errorf("the request was answered")
		}
		// The allowed user still can.
		if got := e.press(post.chat, post.msg, approve, opUser); !strings.Contains(got, "Sent") {
			t.Errorf("the allowed user was told %q", got)
		}
		if ms := fromLink(f); len(ms) != 1 {
			t.Errorf("the allowed user's press sent %+v", ms)
		}
	})
}

func TestRouting(t *testing.T) {
	e := newTestHub(t, Config{Verbosity: Normal})
	a := e.addFleet("100-aaaaaaaa", "alpha")
	b := e.addFleet("200-bbbbbbbb", "beta")

	// Neither a reply nor /use: the hub asks which.
	e.message(&telegram.Message{ID: 1, Text: "which one gets this?"})
	if ms := append(fromLink(a), fromLink(b)...); len(ms) != 0 {
		t.Fatalf("an ambiguous prompt was sent: %+v", ms)
	}
	e.flush()
	ask := e.find(e.newSends(), "Which fleet")
	if n := len(buttonData(ask.buttons)); n != 2 {
		t.Fatalf("%d fleet buttons, want 2: %+v", n, ask.buttons)
	}
	if got := e.press(ask.chat, ask.msg, buttonNamed(t, ask.buttons, "beta"), opUser); !strings.Contains(got, "beta") {
		t.Errorf("the press was told %q", got)
	}
	if ps := prompts(fromLink(b)); len(ps) != 1 || ps[0].Text != "which one gets this?" {
		t.Errorf("beta got %+v, want the stashed text", ps)
	}
	if ms := fromLink(a); len(ms) != 0 {
		t.Errorf("alpha got %+v", ms)
	}

	// A reply to one of beta's messages goes to beta.
	e.frame(b, &protocol.Reply{Text: "beta says hi"}, false)
	e.flush()
	bmsg := e.find(e.newSends(), "beta says hi")
	e.message(&telegram.Message{ID: 2, ReplyTo: bmsg.msg, Text: "for beta"})
	if ps := prompts(fromLink(b)); len(ps) != 1 || ps[0].Text != "for beta" {
		t.Errorf("a reply to beta's message: beta got %+v", ps)
	}
	if ms := fromLink(a); len(ms) != 0 {
		t.Errorf("alpha got %+v", ms)
	}

	// /use alpha: plain text goes to alpha; a reply to beta still to beta.
	e.message(&telegram.Message{ID: 3, Text: "/use alpha"})
	e.flush()
	e.find(e.newSends(), "Plain text now goes to")
	e.message(&telegram.Message{ID: 4, Text: "for alpha"})
	if ps := prompts(fromLink(a)); len(ps) != 1 || ps[0].Text != "for alpha" {
		t.Errorf("after /use alpha: alpha got %+v", ps)
	}
	e.message(&telegram.Message{ID: 5, ReplyTo: bmsg.msg, Text: "still beta"})
	if ps := prompts(fromLink(b)); len(ps) != 1 || ps[0].Text != "still beta" {
		t.Errorf("a reply beats /use: beta got %+v", ps)
	}
	if ms := append(fromLink(a), fromLink(b)...); len(ms) != 0 {
		t.Errorf("extra frames: %+v", ms)
	}

	// /use with an id prefix; and a fleet that is gone is not a target.
	e.message(&telegram.Message{ID: 6, Text: "/use 200"})
	e.message(&telegram.Message{ID: 7, Text: "by prefix"})
	if ps := prompts(fromLink(b)); len(ps) != 1 || ps[0].Text != "by prefix" {
		t.Errorf("/use 200: beta got %+v", ps)
	}
}

func TestForumTopics(t *testing.T) {
	const chat = -100500
	e := newTestHub(t, Config{AllowedChats: []int64{chat}, Verbosity: Normal})
	a := e.addFleet("100-aaaaaaaa", "alpha")
	b := e.addFleet("200-bbbbbbbb", "beta")
	e.message(&telegram.Message{ID: 1, ChatID: chat, IsForum: true, Text: "/fleets"})
	if calls := e.bot.topicCalls(); len(calls) != 0 {
		t.Fatalf("topics created before a post: %+v", calls)
	}
	e.frame(a, &protocol.ConfirmRequest{ID: "c1", Summary: "first"}, false)
	e.pump() // the topicResult
	if calls := e.bot.topicCalls(); len(calls) != 1 || calls[0] != (topicCall{chat, "alpha"}) {
		t.Fatalf("createForumTopic calls = %+v", calls)
	}
	thread := e.h.chats[chat].topics[a.d.ID]
	if thread == 0 {
		t.Fatal("no topic bound after the result")
	}
	e.frame(a, &protocol.ConfirmRequest{ID: "c2", Summary: "second"}, false)
	e.frame(a, &protocol.Reply{Text: "a reply in the topic"}, false)
	e.flush()
	sends := e.newSends()
	if s := e.find(sends, "second"); s.thread != thread {
		t.Errorf("a post after the topic exists went to thread %d, want %d", s.thread, thread)
	}
	if s := e.find(sends, "a reply in the topic"); s.thread != thread {
		t.Errorf("a merged line went to thread %d, want %d", s.thread, thread)
	}
	if len(e.bot.topicCalls()) != 1 {
		t.Errorf("the topic was created again: %+v", e.bot.topicCalls())
	}
	// A message in that topic is for alpha (two fleets, no /use, no reply).
	e.message(&telegram.Message{ID: 9, ChatID: chat, ThreadID: thread, IsForum: true, Text: "in alpha's topic"})
	if ps := prompts(fromLink(a)); len(ps) != 1 || ps[0].Text != "in alpha's topic" {
		t.Errorf("alpha got %+v", ps)
	}
	if ms := fromLink(b); len(ms) != 0 {
		t.Errorf("beta got %+v", ms)
	}
}

func TestForumTopicsUnsupported(t *testing.T) {
	const chat = -100500
	e := newTestHub(t, Config{AllowedChats: []int64{chat}, Verbosity: Normal})
	e.bot.topicErr = fmt.Errorf("telegram createForumTopic: %w", telegram.ErrUnsupported)
	a := e.addFleet("100-aaaaaaaa", "alpha")
	b := e.addFleet("200-bbbbbbbb", "beta")
	e.message(&telegram.Message{ID: 1, ChatID: chat, IsForum: true, Text: "/help"})
	e.frame(a, &protocol.ConfirmRequest{ID: "c1", Summary: "first"}, false)
	e.pump()
	e.frame(a, &protocol.ConfirmRequest{ID: "c2", Summary: "second"}, false)
	e.frame(b, &protocol.ConfirmRequest{ID: "c3", Summary: "third"}, false)
	e.pump()
	e.flush()
	for _, s := range e.newSends() {
		if s.thread != 0 {
			t.Errorf("a post went to thread %d without topics: %q", s.thread, s.text)
		}
	}
	if calls := e.bot.topicCalls(); len(calls) != 1 {
		t.Errorf("createForumTopic was called %d times after it failed, want once: %+v", len(calls), calls)
	}
}

func TestHealth(t *testing.T) {
	e := newTestHub(t, Config{DeafAfter: 45 * time.Second})
	now := time.Now()
	e.bot.setHealth(telegram.Health{LastPoll: now.Add(-time.Minute), Polls: 3})
	e.h.checkHealth(now)
	e.h.publish()
	if s := e.h.statusSnapshot().Telegram; !s.Deaf || s.Healthy {
		t.Errorf("no getUpdates for a minute: %+v, want deaf and not healthy", s)
	}
	e.bot.setHealth(telegram.Health{LastPoll: now.Add(-time.Second), Polls: 4})
	e.h.checkHealth(now)
	e.h.publish()
	if s := e.h.statusSnapshot().Telegram; s.Deaf || !s.Healthy || s.Polls != 4 {
		t.Errorf("a recent getUpdates: %+v, want healthy", s)
	}
	e.bot.setHealth(telegram.Health{LastPoll: now.Add(-time.Second), Conflict: true, LastError: "getUpdates: 409 Conflict", Failures: 1})
	e.h.checkHealth(now)
	e.h.publish()
	if s := e.h.statusSnapshot().Telegram; !s.Conflict || s.Healthy || s.LastError == "" {
		t.Errorf("409: %+v, want conflict, not healthy", s)
	}
	// Never polled: deaf once DeafAfter has passed since the start.
	e.bot.setHealth(telegram.Health{})
	e.h.checkHealth(e.h.start.Add(10 * time.Second))
	e.h.publish()
	if s := e.h.statusSnapshot().Telegram; s.Deaf || s.Healthy {
		t.Errorf("10 s after start, never polled: %+v, want not deaf yet, not healthy", s)
	}
	e.h.checkHealth(e.h.start.Add(46 * time.Second))
	e.h.publish()
	if s := e.h.statusSnapshot().Telegram; !s.Deaf {
		t.Errorf("46 s after start, never polled: %+v, want deaf", s)
	}
}

func TestStatusSnapshot(t *testing.T) {
	e := newTestHub(t, Config{Verbosity: Verbose})
	f := e.addFleet("123-abc", "alpha")
	e.frame(f, &protocol.ConfirmRequest{ID: "c1", Summary: "x"}, false)
	e.flush()
	s := e.h.statusSnapshot()
	if len(s.Fleets) != 1 || s.Fleets[0].ID != "123-abc" || s.Fleets[0].State != stateAttached || s.Fleets[0].Pending != 1 {
		t.Errorf("fleets = %+v", s.Fleets)
	}
	if s.Outbox.Sent != 1 || s.Verbosity != "verbose" {
		t.Errorf("status = %+v", s)
	}
}

func TestNativeAwaiting(t *testing.T) {
	task := protocol.NativeTask{ID: "t1", State: "reserved", EvidenceHash: "e1"}
	d := func(id, task, ev, sup string) protocol.NativeDecision {
		return protocol.NativeDecision{ID: id, TaskID: task, EvidenceHash: ev, Supersedes: sup, Verdict: "approve"}
	}
	for _, tc := range []struct {
		name string
		t    protocol.NativeTask
		ds   []protocol.NativeDecision
		want bool
		live string
	}{
		{"evidence, no decision", task, nil, true, ""},
		{"decided", task, []protocol.NativeDecision{d("d1", "t1", "e1", "")}, false, "d1"},
		{"decision for older evidence", task, []protocol.NativeDecision{d("d1", "t1", "e0", "")}, true, ""},
		{"decision for another task", task, []protocol.NativeDecision{d("d1", "t2", "e1", "")}, true, ""},
		{"superseded decision", task, []protocol.NativeDecision{d("d1", "t1", "e1", ""), d("d2", "t9", "e9", "d1")}, true, ""},
		{"superseding decision counts", task, []protocol.NativeDecision{d("d1", "t1", "e1", ""), d("d2", "t1", "e1", "d1")}, false, "d2"},
		{"no evidence", protocol.NativeTask{ID: "t1", State: "reserved"}, nil, false, ""},
		{"already ran", protocol.NativeTask{ID: "t1", State: "reserved", EvidenceHash: "e1", Attempts: 1}, nil, false, ""},
		{"running", protocol.NativeTask{ID: "t1", State: "running", EvidenceHash: "e1"}, nil, false, ""},
		{"settled", protocol.NativeTask{ID: "t1", State: "settled", EvidenceHash: "e1"}, nil, false, ""},
	} {
		if got := awaiting(tc.t, tc.ds); got != tc.want {
			t.Errorf("%s: awaiting = %v, want %v", tc.name, got, tc.want)
		}
		if tc.t.EvidenceHash == "" || tc.t.Attempts > 0 || tc.t.State != "reserved" {
			continue
		}
		got := liveDecision(tc.t, tc.ds)
		if (got == nil) != (tc.live == "") || (got != nil && got.ID != tc.live) {
			t.Errorf("%s: liveDecision = %+v, want %q", tc.name, got, tc.live)
		}
	}
}

func TestBoundRoot(t *testing.T) {
	r := func(id, prev string) protocol.NativeRootInfo {
		return protocol.NativeRootInfo{ID: id, PreviousRootID: prev}
	}
	for _, tc := range []struct {
		roots []protocol.NativeRootInfo
		want  string
	}{
		{nil, ""},
		{[]protocol.NativeRootInfo{r("r1", "")}, "r1"},
		{[]protocol.NativeRootInfo{r("r1", ""), r("r2", "r1"), r("r3", "r2")}, "r3"},
		{[]protocol.NativeRootInfo{r("r2", "r1"), r("r1", "")}, "r2"},
		{[]protocol.NativeRootInfo{r("a", ""), r("b", "")}, "b"},
		{[]protocol.NativeRootInfo{r("r1", ""), r("r2", "r1"), r("x", "")}, "x"},
		{[]protocol.NativeRootInfo{r("r2", "r1"), r("r1", ""), r("r3", "r2")}, "r3"},
	} {
		got := boundRoot(tc.roots)
		if (got == nil) != (tc.want == "") || (got != nil && got.ID != tc.want) {
			t.Errorf("boundRoot(%+v) = %+v, want %q", tc.roots, got, tc.want)
		}
	}
}

// nativeFleet is an attached native fleet whose bound root is known.
func nativeFleet(e *testHub) *fleet {
	f := e.addFleet("123-abc", "alpha")
	n := e.h.native(f)
	n.known, n.root, n.rev = true, "root-1", 3
	return f
}

func statusResult(tid string, rev int64) *protocol.NativeRootResult {
	return &protocol.NativeRootResult{ID: &tid, Result: protocol.NativeResult{Kind: protocol.NativeKindStatus, Root: &protocol.NativeRootStatus{
		ID: "root-1", Revision: rev, Intent: "run", Phase: "run",
		Tasks: []protocol.NativeTask{{ID: "t1", State: "settled"}},
	}}}
}

func TestNativeRootFlow(t *testing.T) {
	e := newTestHub(t, Config{Verbosity: Normal})
	f := nativeFleet(e)
	e.message(&telegram.Message{ID: 10, Text: "/root"})
	st := byAction(nativeFrames(t, fromLink(f)), protocol.NativeStatus)
	if len(st) != 1 || st[0].req.RootID != "root-1" || st[0].tid == "" {
		t.Fatalf("/root sent %+v, want one status request for root-1", st)
	}
	// A result with another transport id is not this request's.
	e.frame(f, statusResult("hub-other", 99), false)
	e.flush()
	if s := e.newSends(); len(s) != 0 {
		t.Fatalf("a result for another id was shown: %s", texts(s))
	}
	e.frame(f, statusResult(st[0].tid, 7), false)
	e.flush()
	root := e.find(e.newSends(), "root-1")
	if !strings.Contains(root.text, "revision 7") {
		t.Errorf("root text: %q", root.text)
	}
	if len(root.buttons) != 1 || len(root.buttons[0]) != 3 {
		t.Fatalf("root buttons = %+v, want Pause, Resume, Stop", root.buttons)
	}
	buttonNamed(t, root.buttons, "Resume")
	buttonNamed(t, root.buttons, "Stop")

	// First tap: a question, nothing sent.
	if got := e.press(root.chat, root.msg, buttonNamed(t, root.buttons, "Pause"), opUser); !strings.Contains(got, "second tap") {
		t.Errorf("the first tap was told %q", got)
	}
	if ms := fromLink(f); len(ms) != 0 {
		t.Fatalf("one tap sent %+v", ms)
	}
	e.flush()
	confirm := e.find(e.newSends(), "Tap to confirm")
	if !strings.Contains(confirm.text, "revision 7") {
		t.Errorf("the confirmation does not show the revision: %q", confirm.text)
	}
	yes := buttonNamed(t, confirm.buttons, "Confirm")
	if got := e.press(confirm.chat, confirm.msg, yes, opUser); !strings.Contains(got, "Sent pause") {
		t.Errorf("the second tap was told %q", got)
	}
	muts := byAction(nativeFrames(t, fromLink(f)), protocol.NativePause)
	if len(muts) != 1 {
		t.Fatalf("the second tap sent %+v, want one pause", muts)
	}
	m := muts[0].req
	if m.RootID != "root-1" || !strings.HasPrefix(m.OperationID, "hub-op-") || m.ExpectedRevision == nil || *m.ExpectedRevision != 7 {
		t.Fatalf("pause = %+v (expectedRevision %v), want root-1, an operationId and expectedRevision 7", m, m.ExpectedRevision)
	}
	// The confirmation is one-shot.
	if got := e.press(confirm.chat, confirm.msg, yes, opUser); !strings.Contains(got, "already sent") {
		t.Errorf("a third tap was told %q", got)
	}
	if ms := byAction(nativeFrames(t, fromLink(f)), protocol.NativePause); len(ms) != 0 {
		t.Errorf("a third tap sent %+v", ms)
	}

	// The result is lost: the same operation goes again.
	e.h.nativeTick(f, time.Now().Add(nativeTimeout+time.Second))
	again := byAction(nativeFrames(t, fromLink(f)), protocol.NativePause)
	if len(again) != 1 {
		t.Fatalf("after a lost result: %+v, want the pause resent", again)
	}
	if a := again[0].req; a.OperationID != m.OperationID || a.ExpectedRevision == nil || *a.ExpectedRevision != 7 || a.RootID != "root-1" {
		t.Errorf("resent %+v, want the same operationId %s and revision 7", a, m.OperationID)
	}
	// A revision conflict is said plainly.
	e.frame(f, &protocol.NativeRootResult{ID: &again[0].tid, Result: protocol.NativeResult{
		Kind: protocol.NativeKindError, Code: "revision_conflict", Message: "expected 7, root is at 8"}}, false)
	e.flush()
	res := e.find(e.newSends(), "conflict")
	if !strings.Contains(res.text, "expected 7, root is at 8") || res.replyTo != confirm.msg {
		t.Errorf("conflict result %q replying to %d, want a reply to %d", res.text, res.replyTo, confirm.msg)
	}
}

// A pause whose connection drops is sent again, with the same operation
// id and revision, each time the fleet is attached again; after
// client.NativeMaxTries attempts the operator is told it is uncertain.
func TestNativeMutationResentAfterReattach(t *testing.T) {
	e := newTestHub(t, Config{Verbosity: Normal})
	f := nativeFleet(e)
	confirm := rootConfirmation(t, e, f, "Pause")
	e.press(confirm.chat, confirm.msg, buttonNamed(t, confirm.buttons, "Confirm"), opUser)
	first := byAction(nativeFrames(t, fromLink(f)), protocol.NativePause)
	if len(first) != 1 {
		t.Fatalf("the confirmation sent %+v", first)
	}
	reattach := func() []nativeFrame {
		t.Helper()
		e.h.onLink(f, linkEvent{id: f.d.ID, err: errors.New("connection lost: EOF")})
		e.h.onLink(f, linkEvent{id: f.d.ID, up: true, welcome: &protocol.Welcome{SessionID: "s1"}})
		e.frame(f, &protocol.ReplayEnd{}, false)
		return byAction(nativeFrames(t, fromLink(f)), protocol.NativePause)
	}
	tids := map[string]bool{first[0].tid: true}
	for try := 2; try <= client.NativeMaxTries; try++ {
		again := reattach()
		if len(again) != 1 || !reflect.DeepEqual(again[0].req, first[0].req) || tids[again[0].tid] {
			t.Fatalf("attempt %d: %+v, want %+v under a new transport id", try, again, first[0].req)
		}
		tids[again[0].tid] = true
	}
	e.flush()
	e.newSends()
	if again := reattach(); len(again) != 0 {
		t.Fatalf("sent %d times: %+v", client.NativeMaxTries+1, again)
	}
	e.flush()
	e.find(e.newSends(), fmt.Sprintf("is uncertain: the connection to the fleet was lost. It was sent %d times with the same operation id", client.NativeMaxTries))
}

// rootConfirmation shows the root at revision 7 with /root, taps its
// button and returns the confirmation question.
func rootConfirmation(t *testing.T, e *testHub, f *fleet, button string) sendCall {
	t.Helper()
	e.message(&telegram.Message{ID: 10, Text: "/root"})
	st := byAction(nativeFrames(t, fromLink(f)), protocol.NativeStatus)
	e.frame(f, statusResult(st[0].tid, 7), false)
	e.flush()
	root := e.find(e.newSends(), "root-1")
	e.press(root.chat, root.msg, buttonNamed(t, root.buttons, button), opUser)
	e.flush()
	return e.find(e.newSends(), "Tap to confirm")
}

func TestNativeRootCancel(t *testing.T) {
	e := newTestHub(t, Config{Verbosity: Normal})
	f := nativeFleet(e)
	confirm := rootConfirmation(t, e, f, "Stop")
	if got := e.press(confirm.chat, confirm.msg, buttonNamed(t, confirm.buttons, "Cancel"), opUser); got != "Cancelled" {
		t.Errorf("cancel was told %q", got)
	}
	if ms := fromLink(f); len(ms) != 0 {
		t.Errorf("cancel sent %+v", ms)
	}
}

func TestNativeRootUnknownOrLegacy(t *testing.T) {
	e := newTestHub(t, Config{Verbosity: Normal})
	f := e.addFleet("123-abc", "alpha")
	e.message(&telegram.Message{ID: 10, Text: "/root"})
	list := byAction(nativeFrames(t, fromLink(f)), protocol.NativeList)
	if len(list) != 1 {
		t.Fatalf("/root on a fleet not probed yet: %+v, want a list probe", list)
	}
	e.flush()
	e.find(e.newSends(), "not known yet")
	e.frame(f, &protocol.NativeRootResult{ID: &list[0].tid, Result: protocol.NativeResult{Kind: protocol.NativeKindError, Code: "native_mode_required", Message: "legacy"}}, false)
	e.message(&telegram.Message{ID: 11, Text: "/root"})
	if ms := fromLink(f); len(ms) != 0 {
		t.Errorf("/root on a legacy fleet sent %+v", ms)
	}
	e.flush()
	e.find(e.newSends(), "legacy session")
}

// A native poll that could not be queued (the link's queue was full) must
// not stop the polling for good.
func TestNativePollRecoversFromAFullLink(t *testing.T) {
	e := newTestHub(t, Config{Verbosity: Normal, NativePoll: 2 * time.Second})
	f := nativeFleet(e)
	for f.link.send(&protocol.Prompt{Text: "filler"}) {
	}
	now := time.Now()
	e.h.nativeTick(f, now)
	fromLink(f) // the fleet catches up
	e.h.nativeTick(f, now.Add(10*time.Second))
	e.h.nativeTick(f, now.Add(30*time.Second))
	if st := byAction(nativeFrames(t, fromLink(f)), protocol.NativeStatus); len(st) == 0 {
		t.Errorf("no status poll after a poll could not be queued; polling=%v", f.native.polling)
	}
}

func TestAttachDeny(t *testing.T) {
	e := newTestHub(t, Config{Verbosity: Normal})
	d := registry.Descriptor{ID: "555-abcdef01", PID: 555, Name: "gamma", Cwd: "/w/<gamma>", StartedAt: 1}
	e.h.discover(d)
	e.flush()
	q := e.find(e.newSends(), "wants to attach")
	if !strings.Contains(q.text, "/w/&lt;gamma&gt;") {
		t.Errorf("question: %q", q.text)
	}
	if got := e.press(q.chat, q.msg, buttonNamed(t, q.buttons, "Deny"), opUser); !strings.Contains(got, "Denied") {
		t.Errorf("deny was told %q", got)
	}
	e.flush()
	if m := e.bot.message(q.chat, q.msg); !strings.Contains(m.text, "Denied") || !strings.Contains(m.text, opName) || len(m.buttons) != 0 {
		t.Errorf("after deny: %q %+v", m.text, m.buttons)
	}
	if got := e.press(q.chat, q.msg, buttonNamed(t, q.buttons, "Approve"), opUser); !strings.Contains(got, "already answered") {
		t.Errorf("approve after deny was told %q", got)
	}
	if f := e.h.fleets[d.ID]; f.state != stateDenied || f.link != nil {
		t.Errorf("fleet state %q link %v", f.state, f.link)
	}
	// The decision is kept for this fleet id.
	tr, err := loadTrust(filepath.Dir(e.h.trust.path))
	if err != nil {
		t.Fatal(err)
	}
	if en, ok := tr.decision(d.ID); !ok || en.Approved || en.By != opName {
		t.Errorf("stored decision %+v %v", en, ok)
	}
}

func TestTrust(t *testing.T) {
	dir := t.TempDir()
	tr, err := loadTrust(dir)
	if err != nil {
		t.Fatal(err)
	}
	a := registry.Descriptor{ID: "1-aaaaaaaa", Name: "alpha", Cwd: "/a"}
	b := registry.Descriptor{ID: "2-bbbbbbbb", Name: "beta", Cwd: "/b"}
	if err := tr.decide(a, true, "alice", 100); err != nil {
		t.Fatal(err)
	}
	if err := tr.decide(b, false, "bob", 200); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "trust.json")); err != nil || fi.Mode().Perm()&0o077 != 0 {
		t.Errorf("trust.json: %v, mode %v; want private", err, fi.Mode())
	}
	tr2, err := loadTrust(dir)
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := tr2.decision(a.ID); !ok || !e.Approved || e.By != "alice" || e.Name != "alpha" || e.Cwd != "/a" {
		t.Errorf("alpha after a reload: %+v %v", e, ok)
	}
	if e, ok := tr2.decision(b.ID); !ok || e.Approved {
		t.Errorf("beta after a reload: %+v %v", e, ok)
	}
	if !tr2.approvedBefore("alpha", "/a") || tr2.approvedBefore("beta", "/b") || tr2.approvedBefore("alpha", "/elsewhere") {
		t.Errorf("approvedBefore is wrong")
	}
	// Fleets no longer live are forgotten; the approved place is kept.
	if err := tr2.forget(map[string]bool{b.ID: true}); err != nil {
		t.Fatal(err)
	}
	tr3, _ := loadTrust(dir)
	if _, ok := tr3.decision(a.ID); ok {
		t.Errorf("a fleet that is gone kept its decision")
	}
	if _, ok := tr3.decision(b.ID); !ok {
		t.Errorf("a live fleet lost its decision")
	}
	if !tr3.approvedBefore("alpha", "/a") {
		t.Errorf("the approved name and folder were forgotten")
	}
	// A corrupt file: an error, and nothing trusted.
	if err := os.WriteFile(filepath.Join(dir, "trust.json"), []byte(`{"fleets": {"2-bbbbbbbb": {"approved": tr`), 0o600); err != nil {
		t.Fatal(err)
	}
	tr4, err := loadTrust(dir)
	if err == nil {
		t.Errorf("a corrupt file gave no error")
	}
	if tr4 == nil || len(tr4.f.Fleets) != 0 || len(tr4.f.Approved) != 0 || tr4.approvedBefore("alpha", "/a") {
		t.Fatalf("a corrupt file gave %+v, want an empty store", tr4)
	}
	// Well-formed JSON of the wrong shape, that a decoder would half fill.
	if err := os.WriteFile(filepath.Join(dir, "trust.json"), []byte(`{"fleets":{"2-bbbbbbbb":{"approved":true,"name":"beta","cwd":"/b"}},"approvedBefore":"oops"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tr4, err = loadTrust(dir)
	if err == nil {
		t.Errorf("a file of the wrong shape gave no error")
	}
	if _, ok := tr4.decision(b.ID); ok || len(tr4.f.Fleets) != 0 {
		t.Fatalf("a file of the wrong shape left decisions: %+v", tr4.f)
	}
	if err := tr4.decide(a, true, "alice", 300); err != nil {
		t.Errorf("the store from a corrupt file cannot save: %v", err)
	}
	if tr5, err := loadTrust(dir); err != nil || !tr5.approvedBefore("alpha", "/a") {
		t.Errorf("after saving over a corrupt file: %v", err)
	}
}

// A reply to a question that is already answered is not sent anywhere and
// says why; a reply to an open freeform question answers it.
func TestReplyToAnsweredAsk(t *testing.T) {
	e := newTestHub(t, Config{Verbosity: Normal})
	f := e.addFleet("100-aaaaaaaa", "alpha")
	e.frame(f, &protocol.AskRequest{ID: "ask-1", Question: "Name the release?", Kind: "freeform"}, false)
	e.flush()
	q := e.find(e.newSends(), "Name the release?")
	e.message(&telegram.Message{ID: 10, ReplyTo: q.msg, Text: "v1.2"})
	if ms := fromLink(f); len(ms) != 1 || ms[0].(*protocol.AskResponse).Text != "v1.2" {
		t.Fatalf("the reply to the open question sent %+v", ms)
	}
	e.frame(f, &protocol.ConfirmResolved{ID: "ask-1", Approved: true, Kind: protocol.KindAsk, Reason: protocol.ReasonAnswered}, false)
	e.message(&telegram.Message{ID: 11, ReplyTo: q.msg, Text: "v1.3"})
	if ms := fromLink(f); len(ms) != 0 {
		t.Errorf("a late reply reached the fleet: %+v", ms)
	}
	e.flush()
	e.find(e.newSends(), "already answered (answered here by alice: v1.2)")
}

// The "which fleet" buttons send the stashed text once, whichever is tapped.
func TestRouteButtonsSendOnce(t *testing.T) {
	e := newTestHub(t, Config{Verbosity: Normal})
	a := e.addFleet("100-aaaaaaaa", "alpha")
	b := e.addFleet("200-bbbbbbbb", "beta")
	e.message(&telegram.Message{ID: 1, Text: "deploy"})
	e.flush()
	ask := e.find(e.newSends(), "Which fleet")
	e.press(ask.chat, ask.msg, buttonNamed(t, ask.buttons, "alpha"), opUser)
	if got := e.press(ask.chat, ask.msg, buttonNamed(t, ask.buttons, "beta"), opUser); !strings.Contains(got, "Already sent to alpha") {
		t.Errorf("the second tap was told %q", got)
	}
	if n, m := len(prompts(fromLink(a))), len(prompts(fromLink(b))); n != 1 || m != 0 {
		t.Errorf("alpha got %d prompts, beta %d; want 1 and 0", n, m)
	}
}

// A refused descriptor is posted once, however many scans see it; a stale
// one (dead pid) is not posted at all.
func TestRefusedOnce(t *testing.T) {
	e := newTestHub(t, Config{Verbosity: Normal})
	bad := registry.Entry{Path: "/reg/1-a.json", Alive: true, Descriptor: registry.Descriptor{SchemaVersion: 1, ID: "1-a", PID: 1, HubAttach: true, ProtocolVersion: 1, FleetHome: "/h", SocketPath: "/elsewhere.sock"}}
	stale := registry.Entry{Path: "/reg/2-b.json", Alive: false, Descriptor: registry.Descriptor{SchemaVersion: 1, ID: "2-b", PID: 2, HubAttach: true}}
	for range 3 {
		e.h.handle(scan{entries: []registry.Entry{bad, stale}})
	}
	e.flush()
	sends := e.newSends()
	e.find(sends, "Refused a fleet descriptor")
	if strings.Contains(texts(sends), "2-b") {
		t.Errorf("a stale descriptor was posted: %s", texts(sends))
	}
	if len(e.h.fleets) != 0 {
		t.Errorf("refused descriptors became fleets: %v", e.h.fleets)
	}
}

// TestStatusShowsWorkerState: /status gives a worker's state when it says
// more than its status (waiting for the operator, rate-limited until a
// time, failed with the reason), from fleetState.
func TestStatusShowsWorkerState(t *testing.T) {
	e := newTestHub(t, Config{Verbosity: Normal})
	f := e.addFleet("123-abc", "alpha")
	e.frame(f, &protocol.Status{Processing: true, Workers: []protocol.StatusWorker{{Name: "w1", Status: "running"}, {Name: "w2", Status: "failed"}, {Name: "w3", Status: "running"}}}, false)
	until := time.Date(2026, 12, 2, 21, 23, 0, 0, time.UTC).UnixMilli()
	e.frame(f, &protocol.FleetState{Workers: []protocol.FleetWorkerSummary{
		{ID: "w1", Name: "w1", Status: "running", State: protocol.WorkerStateRateLimited, RateLimitedUntil: until, StateReason: "claude: usage limit"},
		{ID: "w2", Name: "w2", Status: "failed", State: protocol.WorkerStateFailed, StateReason: "stopped: its processes held 2100 MiB, over limits.workerMemoryMiB (2048 MiB)"},
		{ID: "w3", Name: "w3", Status: "running", State: protocol.WorkerStateWorking},
	}}, false)
	e.flush()
	e.newSends()
	e.message(&telegram.Message{ChatID: 42, Text: "/status"})
	e.flush()
	s := e.find(e.newSends(), "<code>w1</code>")
	for _, want := range []string{"<code>w1</code> running — rate-limited until 21:23 UTC: claude: usage limit",
		"<code>w2</code> failed — failed: stopped: its processes held 2100 MiB", "<code>w3</code> running\n"} {
		if !strings.Contains(s.text+"\n", want) {
			t.Errorf("/status lacks %q:\n%s", want, s.text)
		}
	}
}
