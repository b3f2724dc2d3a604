package hub

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/hub/telegram"
)

// fakeClock is a clock the test moves by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Unix(1_800_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// sendCall is one Send or Edit the fake Bot API received.
type sendCall struct {
	at              time.Time
	edit            bool
	chat            int64
	msg             int64 // send: the id given; edit: the target
	thread, replyTo int64
	text            string
	buttons         [][]telegram.Button
	force           bool
	err             error
}

type fakeMsg struct {
	chat, id, thread int64
	text             string
	buttons          [][]telegram.Button
}

// fakeSender is an in-memory Bot API for Send and Edit: it records every
// call with the fake clock's time and keeps each message's current state.
type fakeSender struct {
	clock *fakeClock
	mu    sync.Mutex
	calls []sendCall
	msgs  map[msgKey]*fakeMsg
	next  int64
	// fail, when set, may fail a call; n counts the calls before it.
	fail func(c sendCall, n int) error
}

func newFakeSender(c *fakeClock) *fakeSender {
	return &fakeSender{clock: c, msgs: map[msgKey]*fakeMsg{}, next: 1000}
}

func (s *fakeSender) Send(ctx context.Context, m telegram.OutMessage) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := sendCall{at: s.clock.Now(), chat: m.ChatID, thread: m.ThreadID, replyTo: m.ReplyTo, text: m.Text, buttons: m.Buttons, force: m.ForceReply}
	if s.fail != nil {
		c.err = s.fail(c, len(s.calls))
	}
	if c.err != nil {
		s.calls = append(s.calls, c)
		return 0, c.err
	}
	s.next++
	c.msg = s.next
	s.calls = append(s.calls, c)
	s.msgs[msgKey{m.ChatID, c.msg}] = &fakeMsg{chat: m.ChatID, id: c.msg, thread: m.ThreadID, text: m.Text, buttons: m.Buttons}
	return c.msg, nil
}

func (s *fakeSender) Edit(ctx context.Context, chatID, messageID int64, text string, buttons [][]telegram.Button) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := sendCall{at: s.clock.Now(), edit: true, chat: chatID, msg: messageID, text: text, buttons: buttons}
	if s.fail != nil {
		c.err = s.fail(c, len(s.calls))
	}
	m := s.msgs[msgKey{chatID, messageID}]
	if c.err == nil && m == nil {
		c.err = fmt.Errorf("%w: message to edit not found", telegram.ErrBadRequest)
	}
	s.calls = append(s.calls, c)
	if c.err != nil {
		return c.err
	}
	m.text, m.buttons = text, buttons
	return nil
}

func (s *fakeSender) all() []sendCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sendCall(nil), s.calls...)
}

// ok is the calls that succeeded.
func (s *fakeSender) ok() []sendCall {
	var out []sendCall
	for _, c := range s.all() {
		if c.err == nil {
			out = append(out, c)
		}
	}
	return out
}

func (s *fakeSender) sends() []sendCall {
	var out []sendCall
	for _, c := range s.ok() {
		if !c.edit {
			out = append(out, c)
		}
	}
	return out
}

func (s *fakeSender) message(chat, id int64) *fakeMsg {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m := s.msgs[msgKey{chat, id}]; m != nil {
		c := *m
		return &c
	}
	return nil
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

func newTestOutbox(t *testing.T) (*outbox, *fakeSender, *fakeClock, *[]sentNote) {
	clock := newFakeClock()
	s := newFakeSender(clock)
	var notes []sentNote
	o := newOutbox(s, discard(), func(n sentNote) { notes = append(notes, n) })
	o.now = clock.Now
	return o, s, clock, &notes
}

// drive runs the outbox on the fake clock: every call pick allows is made,
// and the clock jumps to when the next one is due, until nothing is due
// within limit. The outbox's own rate limits are what spaces the calls.
func drive(t testing.TB, o *outbox, c *fakeClock, limit time.Duration, after func()) {
	t.Helper()
	ctx := context.Background()
	deadline := c.Now().Add(limit)
	for range 1_000_000 {
		j, wait := o.pick()
		if j != nil {
			o.do(ctx, j)
			if after != nil {
				after()
			}
			continue
		}
		if wait <= 0 {
			t.Fatalf("pick returned no job and no wait")
		}
		if wait >= time.Hour || c.Now().Add(wait).After(deadline) {
			return
		}
		c.Advance(wait)
	}
	t.Fatal("the outbox never settled")
}

func TestOutboxPrivateChatGap(t *testing.T) {
	o, s, c, _ := newTestOutbox(t)
	o.Enqueue(outItem{chat: 42, text: "one", h: o.NewHandle()})
	o.Enqueue(outItem{chat: 42, text: "two", h: o.NewHandle()})
	j, _ := o.pick()
	if j == nil || j.item.text != "one" {
		t.Fatalf("first pick = %+v, want one", j)
	}
	o.do(context.Background(), j)
	c.Advance(privateGap - time.Millisecond)
	if j, wait := o.pick(); j != nil {
		t.Fatalf("a second message to a private chat went %v after the first", privateGap-time.Millisecond)
	} else if wait > time.Millisecond {
		t.Fatalf("pick waits %v, want the rest of the 1 s gap", wait)
	}
	drive(t, o, c, time.Minute, nil)
	calls := s.ok()
	if len(calls) != 2 || calls[1].text != "two" {
		t.Fatalf("calls = %+v", calls)
	}
	if gap := calls[1].at.Sub(calls[0].at); gap < privateGap {
		t.Errorf("private chat: %v between two messages, want ≥ %v", gap, privateGap)
	}
}

func TestOutboxGroupChatGap(t *testing.T) {
	o, s, c, _ := newTestOutbox(t)
	for i := range 3 {
		o.Enqueue(outItem{chat: -100123, text: fmt.Sprint(i), h: o.NewHandle()})
	}
	drive(t, o, c, time.Minute, nil)
	calls := s.ok()
	if len(calls) != 3 {
		t.Fatalf("%d calls, want 3", len(calls))
	}
	for i := 1; i < 3; i++ {
		if calls[i].text != fmt.Sprint(i) {
			t.Errorf("call %d is %q: order changed", i, calls[i].text)
		}
		if gap := calls[i].at.Sub(calls[i-1].at); gap < groupGap {
			t.Errorf("group chat: %v between messages %d and %d, want ≥ %v", gap, i-1, i, groupGap)
		}
	}
}

func TestOutboxTwoChatsBackToBack(t *testing.T) {
	o, s, c, _ := newTestOutbox(t)
	o.Enqueue(outItem{chat: 1, text: "a", h: o.NewHandle()})
	o.Enqueue(outItem{chat: 2, text: "b", h: o.NewHandle()})
	o.Enqueue(outItem{chat: -3, text: "c", h: o.NewHandle()})
	drive(t, o, c, time.Minute, nil)
	calls := s.ok()
	if len(calls) != 3 {
		t.Fatalf("%d calls, want 3", len(calls))
	}
	chats := map[int64]bool{}
	for i, cl := range calls {
		chats[cl.chat] = true
		if i == 0 {
			continue
		}
		gap := cl.at.Sub(calls[i-1].at)
		if gap < globalGap {
			t.Errorf("%v between calls to different chats, under the global gap %v", gap, globalGap)
		}
		if gap >= privateGap {
			t.Errorf("%v between calls to different chats: one chat's gap held up another", gap)
		}
	}
	if len(chats) != 3 {
		t.Errorf("chats called: %v", chats)
	}
}

func TestOutboxRetryAfter(t *testing.T) {
	o, s, c, _ := newTestOutbox(t)
	s.fail = func(cl sendCall, n int) error {
		if n == 0 {
			return &telegram.RetryAfterError{After: 3 * time.Second, Method: "sendMessage"}
		}
		return nil
	}
	o.Enqueue(outItem{chat: 42, text: "first", h: o.NewHandle()})
	o.Enqueue(outItem{chat: 42, text: "second", h: o.NewHandle()})
	drive(t, o, c, time.Minute, nil)
	calls := s.all()
	if len(calls) != 3 {
		t.Fatalf("calls = %+v, want first (429), first, second", calls)
	}
	if calls[0].text != "first" || calls[0].err == nil || calls[1].text != "first" || calls[1].err != nil || calls[2].text != "second" {
		t.Fatalf("order = %q %q %q, want the 429'd message retried first", calls[0].text, calls[1].text, calls[2].text)
	}
	if gap := calls[1].at.Sub(calls[0].at); gap < 3*time.Second {
		t.Errorf("retried %v after a 429 asking for 3 s", gap)
	}
	st := o.Stats()
	if st.RetryAfter != 1 || st.Sent != 2 || st.Dropped != 0 {
		t.Errorf("stats = %+v, want 1 retryAfter, 2 sent, 0 dropped", st)
	}
}

func TestOutboxRetryAfterHoldsOnlyThatChat(t *testing.T) {
	o, s, c, _ := newTestOutbox(t)
	s.fail = func(cl sendCall, n int) error {
		if cl.chat == 1 && n == 0 {
			return &telegram.RetryAfterError{After: 10 * time.Second}
		}
		return nil
	}
	o.Enqueue(outItem{chat: 1, text: "held", h: o.NewHandle()})
	j, _ := o.pick()
	o.do(context.Background(), j)
	o.Enqueue(outItem{chat: 2, text: "other", h: o.NewHandle()})
	drive(t, o, c, time.Minute, nil)
	calls := s.ok()
	if len(calls) != 2 || calls[0].text != "other" || calls[1].text != "held" {
		t.Fatalf("calls = %+v, want the other chat served while the first waits", calls)
	}
	if calls[0].at.Sub(s.all()[0].at) >= 10*time.Second {
		t.Errorf("the other chat waited out the 429 of the first")
	}
}

func TestOutboxPermanentErrorDrops(t *testing.T) {
	o, s, c, _ := newTestOutbox(t)
	s.fail = func(cl sendCall, n int) error {
		if cl.text == "bad" {
			return fmt.Errorf("telegram sendMessage: 400 can't parse entities: %w", telegram.ErrBadRequest)
		}
		return nil
	}
	o.Enqueue(outItem{chat: 42, text: "bad", h: o.NewHandle()})
	o.Enqueue(outItem{chat: 42, text: "good", h: o.NewHandle()})
	drive(t, o, c, time.Hour, nil)
	var bad int
	for _, cl := range s.all() {
		if cl.text == "bad" {
			bad++
		}
	}
	if bad != 1 {
		t.Errorf("a message Telegram refused was tried %d times, want once", bad)
	}
	if got := s.sends(); len(got) != 1 || got[0].text != "good" {
		t.Errorf("sends = %+v, want the next message to go on", got)
	}
	if st := o.Stats(); st.Dropped != 1 || st.Sent != 1 {
		t.Errorf("stats = %+v, want 1 dropped, 1 sent", st)
	}
}

func TestOutboxTransientErrorRetries(t *testing.T) {
	t.Run("gives up after maxTries", func(t *testing.T) {
		o, s, c, _ := newTestOutbox(t)
		s.fail = func(sendCall, int) error { return errors.New("connection reset by peer") }
		o.Enqueue(outItem{chat: 42, text: "x", h: o.NewHandle()})
		drive(t, o, c, time.Hour, nil)
		calls := s.all()
		if len(calls) != maxTries {
			t.Fatalf("%d tries, want maxTries = %d", len(calls), maxTries)
		}
		for i := 1; i < len(calls); i++ {
			if calls[i].at.Sub(calls[i-1].at) < privateGap {
				t.Errorf("retry %d came %v after the failure", i, calls[i].at.Sub(calls[i-1].at))
			}
		}
		if st := o.Stats(); st.Dropped != 1 || st.Sent != 0 {
			t.Errorf("stats = %+v, want 1 dropped", st)
		}
	})
	t.Run("succeeds on a retry", func(t *testing.T) {
		o, s, c, notes := newTestOutbox(t)
		s.fail = func(_ sendCall, n int) error {
			if n < 2 {
				return errors.New("502 bad gateway")
			}
			return nil
		}
		h := o.NewHandle()
		o.Enqueue(outItem{chat: 42, text: "x", h: h})
		o.Enqueue(outItem{chat: 42, text: "y", h: o.NewHandle()})
		drive(t, o, c, time.Hour, nil)
		ok := s.sends()
		if len(ok) != 2 || ok[0].text != "x" || ok[1].text != "y" {
			t.Fatalf("sends = %+v, want x (after 2 failures) then y", ok)
		}
		if o.messageID(h) != ok[0].msg || len(*notes) != 2 || (*notes)[0].h != h || (*notes)[0].message != ok[0].msg {
			t.Errorf("handle %d bound to %d, notes %+v; want message %d", h, o.messageID(h), *notes, ok[0].msg)
		}
	})
}

func lines(n int, format string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf(format, i+1)
	}
	return out
}

func TestOutboxFloodIsOneMessageEditedInPlace(t *testing.T) {
	o, s, c, _ := newTestOutbox(t)
	head := "<b>[alpha]</b>"
	// 1000 lines in ten bursts; each burst arrives within the gather
	// window and is flushed before the next.
	for b := range 10 {
		for i := range 100 {
			o.Line(42, 0, "f1", false, head, fmt.Sprintf("line %d", b*100+i+1))
		}
		if b == 0 {
			if j, _ := o.pick(); j != nil {
				t.Fatalf("a stream line went out before the gather window ended: %q", j.item.text)
			}
		}
		drive(t, o, c, privateGap, nil)
	}
	drive(t, o, c, time.Minute, nil)
	calls := s.all()
	sends := s.sends()
	if len(sends) != 1 {
		t.Fatalf("%d messages sent for one flood, want 1: %+v", len(sends), sends)
	}
	id := sends[0].msg
	if !strings.Contains(sends[0].text, "100 updates so far") {
		t.Errorf("first flood message: %q", sends[0].text)
	}
	edits := 0
	for _, cl := range calls {
		if cl.edit {
			edits++
			if cl.msg != id || cl.chat != 42 {
				t.Errorf("flood edit of message %d in chat %d, want %d in 42", cl.msg, cl.chat, id)
			}
		}
		if n := utf16Len(cl.text); n > MaxMessageLen {
			t.Errorf("a call of %d units", n)
		}
	}
	if edits == 0 {
		t.Fatal("later flushes were not edits of the flood message")
	}
	final := s.message(42, id)
	if !strings.Contains(final.text, "1000 updates so far") || !strings.Contains(final.text, "line 1000") || !strings.HasPrefix(final.text, head) {
		t.Errorf("final flood text: %q", final.text)
	}
	if strings.Contains(final.text, "line 985\n") || !strings.Contains(final.text, "line 986") {
		t.Errorf("final flood text should show the last %d lines: %q", floodTail, final.text)
	}
	if len(calls) > 12 {
		t.Errorf("%d calls for a 1000-line flood", len(calls))
	}
}

func TestOutboxThousandLinesInOneBurstIsOneSend(t *testing.T) {
	o, s, c, _ := newTestOutbox(t)
	for _, l := range lines(1000, "line %d") {
		o.Line(42, 0, "f1", false, "<b>[alpha]</b>", l)
	}
	drive(t, o, c, time.Minute, nil)
	calls := s.all()
	if len(calls) != 1 || calls[0].edit {
		t.Fatalf("calls = %d (%+v), want one send", len(calls), calls)
	}
	if !strings.Contains(calls[0].text, "1000 updates so far") || !strings.Contains(calls[0].text, "line 1000") {
		t.Errorf("flood text: %q", calls[0].text)
	}
	// After floodQuiet the flood is over: new lines are a new message.
	c.Advance(floodQuiet)
	o.Line(42, 0, "f1", false, "<b>[alpha]</b>", "after the flood")
	drive(t, o, c, time.Minute, nil)
	sends := s.sends()
	if len(sends) != 2 || !strings.Contains(sends[1].text, "after the flood") || strings.Contains(sends[1].text, "so far") {
		t.Errorf("after the flood: %+v", sends)
	}
}

func TestOutboxStreamMemoryBounded(t *testing.T) {
	o, s, c, _ := newTestOutbox(t)
	for _, l := range lines(100_000, "a line of output number %d, padded a little") {
		o.Line(42, 0, "f1", true, "<b>[alpha]</b>", l)
	}
	o.mu.Lock()
	st := o.chats[42].streams[0]
	bytes, n := st.bytes, len(st.lines)
	sum := 0
	for _, l := range st.lines {
		sum += len(l) + 1
	}
	o.mu.Unlock()
	if bytes > maxStreamBytes || sum > maxStreamBytes {
		t.Errorf("a stream holds %d bytes (counted %d) after 100k lines, over %d", sum, bytes, maxStreamBytes)
	}
	if n == 0 || n > maxStreamBytes/10 {
		t.Errorf("a stream holds %d lines", n)
	}
	drive(t, o, c, time.Minute, nil)
	sends := s.sends()
	if len(sends) != 1 || !strings.Contains(sends[0].text, "100000 lines of output so far") || !strings.Contains(sends[0].text, "number 100000,") {
		t.Errorf("sends = %+v", sends)
	}
}

func TestOutboxBurstIsOneMessage(t *testing.T) {
	o, s, c, notes := newTestOutbox(t)
	o.Line(42, 7, "f1", false, "<b>[alpha]</b>", "one")
	c.Advance(100 * time.Millisecond)
	o.Line(42, 7, "f1", false, "<b>[alpha]</b>", "two")
	c.Advance(100 * time.Millisecond)
	o.Line(42, 7, "f1", false, "<b>[alpha]</b>", "three")
	drive(t, o, c, time.Minute, nil)
	sends := s.sends()
	if len(sends) != 1 {
		t.Fatalf("%d messages for a 3-line burst, want 1", len(sends))
	}
	if want := "<b>[alpha]</b>\none\ntwo\nthree"; sends[0].text != want || sends[0].thread != 7 {
		t.Errorf("burst = %q in thread %d, want %q in 7", sends[0].text, sends[0].thread, want)
	}
	// The merged message is about its fleet: a reply to it is routed there.
	if len(*notes) != 1 || (*notes)[0].fleet != "f1" || (*notes)[0].message != sends[0].msg {
		t.Errorf("notes = %+v", *notes)
	}
}

func TestOutboxOutputAndNoticesApart(t *testing.T) {
	o, s, c, _ := newTestOutbox(t)
	for _, l := range lines(200, "output %d") {
		o.Line(42, 0, "f1", true, "<b>[alpha]</b>", l)
	}
	o.Line(42, 0, "f1", false, "<b>[alpha]</b>", "✅ the task completed")
	for _, l := range lines(200, "more output %d") {
		o.Line(42, 0, "f1", true, "<b>[alpha]</b>", l)
	}
	drive(t, o, c, time.Minute, nil)
	sends := s.sends()
	if len(sends) != 2 {
		t.Fatalf("%d messages, want 2 (the output flood and the notice): %+v", len(sends), sends)
	}
	var notice, flood int
	for _, m := range sends {
		switch {
		case strings.Contains(m.text, "the task completed"):
			notice++
			if strings.Contains(m.text, "output") {
				t.Errorf("the notice was merged with output: %q", m.text)
			}
		case strings.Contains(m.text, "lines of output so far"):
			flood++
			if !strings.Contains(m.text, "400 lines of output") {
				t.Errorf("flood count: %q", m.text)
			}
		}
	}
	if notice != 1 || flood != 1 {
		t.Errorf("notice %d, flood %d: %+v", notice, flood, sends)
	}
}

func TestOutboxUrgentBeforeStream(t *testing.T) {
	o, s, c, _ := newTestOutbox(t)
	o.Line(42, 0, "f1", false, "<b>[alpha]</b>", "a reply")
	c.Advance(time.Second) // the line is ready
	o.Enqueue(outItem{chat: 42, text: "🔐 Approve?", h: o.NewHandle()})
	drive(t, o, c, time.Minute, nil)
	sends := s.sends()
	if len(sends) != 2 || sends[0].text != "🔐 Approve?" {
		t.Fatalf("sends = %+v, want the urgent message first", sends)
	}
}

func TestOutboxEditsAndHandles(t *testing.T) {
	o, s, c, notes := newTestOutbox(t)
	// An edit of a handle that was never sent makes no call.
	o.Enqueue(outItem{chat: 42, h: o.NewHandle(), edit: true, text: "nope"})
	drive(t, o, c, time.Minute, nil)
	if calls := s.all(); len(calls) != 0 {
		t.Fatalf("an edit of an unsent message made calls: %+v", calls)
	}
	h := o.NewHandle()
	o.Enqueue(outItem{chat: 42, h: h, text: "v1", fleet: "f1", buttons: [][]telegram.Button{{{Text: "ok", Data: "d"}}}})
	o.Enqueue(outItem{chat: 42, h: h, edit: true, text: "v2"})
	drive(t, o, c, time.Minute, nil)
	calls := s.ok()
	if len(calls) != 2 || calls[0].edit || !calls[1].edit || calls[1].msg != calls[0].msg {
		t.Fatalf("calls = %+v, want a send then an edit of it", calls)
	}
	if len(*notes) != 1 || (*notes)[0] != (sentNote{h: h, chat: 42, message: calls[0].msg, fleet: "f1"}) {
		t.Errorf("onSent = %+v, want handle %d → message %d", *notes, h, calls[0].msg)
	}
	if o.messageID(h) != calls[0].msg {
		t.Errorf("messageID(%d) = %d, want %d", h, o.messageID(h), calls[0].msg)
	}
	if m := s.message(42, calls[0].msg); m.text != "v2" || len(m.buttons) != 0 {
		t.Errorf("after the edit: %+v", m)
	}
	if st := o.Stats(); st.Sent != 1 || st.Edited != 1 {
		t.Errorf("stats = %+v", st)
	}
}

// A flood's progress message that Telegram refused with 429 must still
// show up once the chat may be written again, even when no new line comes
// (the stream has gone quiet), and so must the last edit of one: the
// count and tail a user sees are otherwise stuck at an older state (or
// the whole flood is never shown).
func TestOutboxFloodRetryAfterNotLost(t *testing.T) {
	t.Run("first send", func(t *testing.T) {
		o, s, c, _ := newTestOutbox(t)
		s.fail = func(_ sendCall, n int) error {
			if n == 0 {
				return &telegram.RetryAfterError{After: 3 * time.Second}
			}
			return nil
		}
		for _, l := range lines(100, "line %d") {
			o.Line(42, 0, "f1", false, "<b>[alpha]</b>", l)
		}
		drive(t, o, c, time.Minute, nil)
		sends := s.sends()
		if len(sends) != 1 || !strings.Contains(sends[0].text, "100 updates so far") {
			t.Errorf("after a 429 on the flood message and no more lines, sends = %+v; want the flood message sent after the wait", sends)
		}
	})
	t.Run("last edit", func(t *testing.T) {
		o, s, c, _ := newTestOutbox(t)
		for _, l := range lines(100, "line %d") {
			o.Line(42, 0, "f1", false, "<b>[alpha]</b>", l)
		}
		drive(t, o, c, privateGap, nil)
		s.fail = func(cl sendCall, n int) error {
			if cl.edit && n == 1 {
				return &telegram.RetryAfterError{After: 3 * time.Second}
			}
			return nil
		}
		for _, l := range lines(100, "more %d") {
			o.Line(42, 0, "f1", false, "<b>[alpha]</b>", l)
		}
		drive(t, o, c, time.Minute, nil)
		sends := s.sends()
		if len(sends) != 1 {
			t.Fatalf("sends = %+v", sends)
		}
		if m := s.message(42, sends[0].msg); !strings.Contains(m.text, "200 updates so far") || !strings.Contains(m.text, "more 100") {
			t.Errorf("after a 429 on the last flood edit, the message stays %q; want the 200-line state", m.text)
		}
	})
}

// A flood's progress message that Telegram refused for good (a 400) must
// not silence the rest of the flood: its later updates are edits of a
// message that does not exist, dropped without a call, so nothing of the
// flood ever shows.
func TestOutboxFloodAfterRefusedFirstMessage(t *testing.T) {
	o, s, c, _ := newTestOutbox(t)
	s.fail = func(_ sendCall, n int) error {
		if n == 0 {
			return fmt.Errorf("telegram sendMessage: 400 Bad Request: %w", telegram.ErrBadRequest)
		}
		return nil
	}
	for _, l := range lines(100, "line %d") {
		o.Line(42, 0, "f1", false, "<b>[alpha]</b>", l)
	}
	drive(t, o, c, privateGap, nil)
	for _, l := range lines(100, "more %d") {
		o.Line(42, 0, "f1", false, "<b>[alpha]</b>", l)
	}
	drive(t, o, c, time.Minute, nil)
	sends := s.sends()
	if len(sends) == 0 {
		t.Fatalf("the first flood message was refused, and nothing of the next 100 lines was sent (calls: %d)", len(s.all()))
	}
	if m := s.message(42, sends[len(sends)-1].msg); !strings.Contains(m.text, "more 100") {
		t.Errorf("flood message: %q", m.text)
	}
}
