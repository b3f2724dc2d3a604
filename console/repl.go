package console

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/agents-fleet/fleet/client"
	"github.com/agents-fleet/fleet/protocol"
)

// maxLine is the longest line the REPL reads from its input.
const maxLine = protocol.MaxFrameSize - 512

// maxOwnPrompts bounds the requestIds the REPL remembers while it waits for
// their echoes (an id whose prompt the fleet refused is never echoed).
const maxOwnPrompts = 1024

// ClosedError is returned by REPL.Run when the fleet's connection ended.
type ClosedError struct {
	// Reason is the last error frame the fleet sent, if any.
	Reason string
	// Err is the read error that ended the stream (io.EOF for a clean close).
	Err error
}

func (e *ClosedError) Error() string {
	msg := "the fleet closed the connection"
	if e.Reason != "" {
		msg += ": " + e.Reason
	} else if e.Err != nil && !errors.Is(e.Err, io.EOF) {
		msg = "connection to the fleet lost: " + e.Err.Error()
	}
	return msg
}

func (e *ClosedError) Unwrap() error { return e.Err }

// REPL is the line console behind `fleet attach`: it prints frames as they
// arrive and sends what the operator types. Typed lines become prompts, except
// the local commands /yes, /no, /answer, /pending, /status and /quit.
type REPL struct {
	// In is read line by line. Run does not close it; a goroutine stays
	// blocked in In.Read after Run returns until that read returns.
	In io.Reader
	// Out receives the rendered lines; only Run's goroutine writes to it.
	Out io.Writer
	// Conn is the attached connection. Run closes it when it returns.
	Conn *client.Conn
	// Color enables ANSI colours.
	Color bool

	// State below is owned by Run's goroutine. The requests seen and not
	// resolved are render's State().Pending().
	render   *Renderer
	own      map[string]struct{} // requestIds of our prompts, until echoed
	answered map[string]struct{} // ids this console answered
	lastErr  string              // the last error frame, for the close reason
}

type frameEvent struct {
	m       protocol.Message
	replay  bool
	err     error
	skipped int // malformed entries left out of m (client.Conn.Skipped)
}

type lineEvent struct {
	line string
	eof  bool  // the input ended
	err  error // with eof: why, nil at a clean end
}

// Run runs the REPL until /quit, the end of In or ctx's end (nil error), or
// until the connection closes (a *ClosedError) or a send fails.
func (r *REPL) Run(ctx context.Context) error {
	r.render = NewRenderer(r.Color)
	r.own = make(map[string]struct{})
	done := make(chan struct{})
	frames := make(chan frameEvent)
	lines := make(chan lineEvent)

	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		r.readFrames(frames, done)
	}()
	go r.readLines(lines, done)
	defer func() {
		close(done)
		r.Conn.Close()
		<-readerDone
	}()

	r.print(r.render.Render(r.Conn.Welcome(), false)...)
	r.print(r.paint(ansiDim, "type a prompt; local commands: /yes /no /answer /pending /status /quit; other /commands go to the fleet (try /help)"))

	// Typed lines wait until the replay is in, so that /status, /pending
	// and an id-less /yes see the state the fleet replayed.
	var input <-chan lineEvent
	if !slices.Contains(r.Conn.Welcome().Capabilities, protocol.CapReplayEnd) {
		input = lines
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev := <-frames:
			if ev.err != nil {
				var fe *client.FrameError
				if errors.As(ev.err, &fe) {
					r.print(r.paint(ansiRed, "error:") + " " + clean(ev.err.Error()))
					continue
				}
				return &ClosedError{Reason: r.lastErr, Err: ev.err}
			}
			r.handleFrame(ev.m, ev.replay)
			if ev.skipped > 0 {
				r.print(r.paint(ansiDim, skippedNote(ev.m, ev.skipped)))
			}
			if _, ok := ev.m.(*protocol.ReplayEnd); ok {
				input = lines
			}
		case ev := <-input:
			if ev.eof {
				if ev.err != nil {
					return fmt.Errorf("read input: %w", ev.err)
				}
				return nil
			}
			quit, err := r.handleLine(ev.line)
			if quit || err != nil {
				return err
			}
		}
	}
}

// readFrames forwards frames until the stream ends or done is closed.
func (r *REPL) readFrames(out chan<- frameEvent, done <-chan struct{}) {
	for {
		m, _, replay, err := r.Conn.Next()
		var fe *client.FrameError
		fatal := err != nil && !errors.As(err, &fe)
		if fatal && errors.Is(err, net.ErrClosed) {
			select {
			case <-done:
				return // our own Close
			default:
			}
		}
		select {
		case out <- frameEvent{m: m, replay: replay, err: err, skipped: r.Conn.Skipped()}:
		case <-done:
			return
		}
		if fatal {
			return
		}
	}
}

// skippedNote says that n malformed entries of m were left out.
func skippedNote(m protocol.Message, n int) string {
	if _, ok := m.(*protocol.Hydrate); ok {
		return fmt.Sprintf("(%d history %s skipped: malformed)", n, plural(n, "entry", "entries"))
	}
	return fmt.Sprintf("(%d malformed %s %s skipped)", n, m.MessageType(), plural(n, "entry", "entries"))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// readLines forwards input lines, then one eof event.
func (r *REPL) readLines(out chan<- lineEvent, done <-chan struct{}) {
	sc := bufio.NewScanner(r.In)
	sc.Buffer(make([]byte, 0, 4096), maxLine)
	for sc.Scan() {
		select {
		case out <- lineEvent{line: sc.Text()}:
		case <-done:
			return
		}
	}
	err := sc.Err()
	if errors.Is(err, bufio.ErrTooLong) {
		err = fmt.Errorf("line longer than %d bytes", maxLine)
	}
	select {
	case out <- lineEvent{eof: true, err: err}:
	case <-done:
	}
}

func (r *REPL) paint(code, s string) string { return r.render.paint(code, s) }

// print writes lines to Out in one write. Output errors are ignored: the
// REPL keeps serving the fleet even if its terminal went away.
func (r *REPL) print(lines ...string) {
	if len(lines) == 0 {
		return
	}
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	io.WriteString(r.Out, b.String())
}

func (r *REPL) handleFrame(msg protocol.Message, replay bool) {
	show := msg
	switch m := msg.(type) {
	case *protocol.UserMessage:
		if _, ok := r.own[m.RequestID]; ok && m.RequestID != "" {
			delete(r.own, m.RequestID)
			return // printed as "you: …" when typed
		}
	case *protocol.ConfirmResolved:
		if _, mine := r.answered[m.ID]; mine {
			delete(r.answered, m.ID)
			if m.Reason == protocol.ReasonSuperseded {
				// The fleet's own terminal answers as "superseded" for
				// everyone else; for the console that answered, it was
				// simply answered.
				c := *m
				c.Reason = protocol.ReasonAnswered
				show = &c
			}
		}
	case *protocol.Error:
		r.lastErr = m.Message
	}
	r.print(r.render.Render(show, replay)...)
}

// noteAnswered remembers an id this console answered. The set is bounded:
// it is cleared when it reaches 256 ids (answers that never resolved).
func (r *REPL) noteAnswered(id string) {
	if r.answered == nil {
		r.answered = make(map[string]struct{})
	}
	if len(r.answered) >= 256 {
		clear(r.answered)
	}
	r.answered[id] = struct{}{}
}

// handleLine acts on one typed line. quit reports /quit; err is fatal.
func (r *REPL) handleLine(line string) (quit bool, err error) {
	line = strings.TrimSpace(line)
	if line == "" {
		return false, nil
	}
	if !strings.HasPrefix(line, "/") {
		return false, r.prompt(line)
	}
	cmd, args, _ := strings.Cut(line, " ")
	args = strings.TrimSpace(args)
	switch cmd {
	case "/quit", "/exit":
		return true, nil
	case "/yes", "/no":
		return false, r.confirm(cmd == "/yes", args)
	case "/answer":
		return false, r.answer(args)
	case "/pending":
		r.listPending()
		return false, nil
	case "/status":
		r.print(r.render.Summary()...)
		return false, nil
	}
	return false, r.prompt(line)
}

// prompt sends text with a fresh requestId, remembered so that the fleet's
// echo of it is not printed a second time.
func (r *REPL) prompt(text string) error {
	id := client.NewRequestID()
	if len(r.own) >= maxOwnPrompts {
		clear(r.own)
	}
	r.own[id] = struct{}{}
	r.print(r.render.labelled(r.paint(ansiBold, "you:"), text)...)
	return r.Conn.Send(&protocol.Prompt{Text: text, RequestID: id})
}

// find resolves the id a command refers to among pending requests of kind:
// an exact id or a unique prefix; with arg empty, the only one pending.
// ok is false when a message explaining why was printed instead.
func (r *REPL) find(kind protocol.ResolvedKind, arg, usage string) (p client.Request, ok bool) {
	var of []client.Request
	for _, q := range r.render.State().Pending() {
		if q.Kind() == kind {
			of = append(of, q)
		}
	}
	noun := map[protocol.ResolvedKind]string{protocol.KindConfirm: "confirmation", protocol.KindAsk: "question"}[kind]
	if arg == "" {
		switch len(of) {
		case 0:
			r.print("no pending " + noun)
			return p, false
		case 1:
			return of[0], true
		}
		ids := make([]string, len(of))
		for i, q := range of {
			ids[i] = clean(q.ID())
		}
		r.print(fmt.Sprintf("%d %ss pending (%s); name one: %s", len(of), noun, strings.Join(ids, ", "), usage))
		return p, false
	}
	for _, q := range of {
		if q.ID() == arg {
			return q, true
		}
	}
	var match []client.Request
	for _, q := range of {
		if strings.HasPrefix(q.ID(), arg) {
			match = append(match, q)
		}
	}
	if len(match) == 1 {
		return match[0], true
	}
	return p, false
}

func (r *REPL) confirm(approve bool, arg string) error {
	cmd := "/no"
	if approve {
		cmd = "/yes"
	}
	id := arg
	if p, ok := r.find(protocol.KindConfirm, arg, cmd+" <id>"); ok {
		id = p.ID()
	} else if arg == "" {
		return nil // find explained why
	}
	// An id the REPL has not seen still goes to the fleet, which knows best.
	word := "no"
	if approve {
		word = "yes"
	}
	r.print(r.paint(ansiDim, "answering "+clean(id)+": "+word))
	r.noteAnswered(id)
	return r.Conn.Confirm(id, approve)
}

func (r *REPL) answer(args string) error {
	const usage = "/answer [id] <text or choice number>"
	if args == "" {
		r.print("usage: " + usage)
		return nil
	}
	first, rest, _ := strings.Cut(args, " ")
	rest = strings.TrimSpace(rest)
	if p, ok := r.find(protocol.KindAsk, first, ""); ok && rest == "" && p.ID() == first {
		r.print("usage: " + usage) // an id without an answer
		return nil
	}
	var (
		ask  *protocol.AskRequest
		id   string
		text string
	)
	if p, ok := r.find(protocol.KindAsk, first, ""); rest != "" && ok {
		ask, id, text = p.Ask, p.ID(), rest
	} else {
		n := 0
		for _, q := range r.render.State().Pending() {
			if q.Ask != nil {
				n++
				ask = q.Ask
			}
		}
		switch {
		case n == 1:
			id, text = ask.ID, args
		case n == 0 && rest != "":
			// Not a question this REPL has seen: let the fleet judge it.
			ask, id, text = nil, first, rest
		case n == 0:
			r.print("no pending question")
			return nil
		default:
			r.find(protocol.KindAsk, "", usage) // prints which ids are pending
			return nil
		}
	}
	text = choose(ask, text)
	r.print(r.paint(ansiDim, "answering "+clean(id)+": "+clean(text)))
	r.noteAnswered(id)
	return r.Conn.Answer(id, text)
}

// choose maps an answer to a choice value: a value as is, a number n in
// range to the n-th choice, a label (case-insensitive) to its value. Anything
// else is sent as typed, for the fleet to accept (freeform) or refuse.
func choose(ask *protocol.AskRequest, text string) string {
	if ask == nil || len(ask.Choices) == 0 {
		return text
	}
	for _, c := range ask.Choices {
		if c.Value == text {
			return text
		}
	}
	if n, err := strconv.Atoi(text); err == nil && n >= 1 && n <= len(ask.Choices) {
		return ask.Choices[n-1].Value
	}
	for _, c := range ask.Choices {
		if c.Label != "" && strings.EqualFold(c.Label, text) {
			return c.Value
		}
	}
	return text
}

func (r *REPL) listPending() {
	pending := r.render.State().Pending()
	if len(pending) == 0 {
		r.print("no pending requests")
		return
	}
	for _, p := range pending {
		r.print(r.render.render(p.Message())...) // shown again, not folded again
	}
}
