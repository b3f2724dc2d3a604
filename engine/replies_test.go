package engine

import (
	"errors"
	"strings"
	"testing"

	"github.com/agents-fleet/fleet/protocol"
)

// replyTo sends text as a prompt and returns the first reply published
// after it. The commands tested here reply before Prompt returns.
func replyTo(t *testing.T, e *Engine, rec *recorder, text string) *protocol.Reply {
	t.Helper()
	before := len(rec.all())
	e.Prompt("test", text)
	for _, m := range rec.all()[before:] {
		if r, ok := m.(*protocol.Reply); ok {
			return r
		}
	}
	t.Fatalf("no reply to %s", text)
	return nil
}

// Every reply that says a prompt or command failed or was refused is
// marked isError; every other reply is not marked at all.
func TestErrorRepliesAreMarked(t *testing.T) {
	e, rec := newEngine(t, nil)
	for _, tt := range []struct {
		prompt, want string
		isError      bool
	}{
		{"/tasks", "No tasks yet", false},
		{"/help", "Commands:", false},
		{"/pause", "Dispatch paused", false},
		{"/pause", "already paused", false}, // what was asked holds
		{"/resume", "Dispatch resumed", false},
		{"$ true", "Queued t1", false},
		{"/nope", "Unknown command /nope", true},
		{"/answer ask-1 1", "(/answer is a console command: use `fleet answer ID ANSWER`)", true},
		{"/yes", "fleet answer ID yes", true},
		{"/tell w9 hello", `no worker "w9"`, true},
		{"/tell", "Usage: /tell WORKER TEXT", true},
		{"/cancel t9", `No task, worker or loop "t9"`, true},
		{"/cancel", "Usage: /cancel", true},
		{"/plan bogus", "Usage: /plan on|off", true},
		{"/go t9", "t9 is not a planned task", true},
		{"/budget w9 10", `No worker "w9"`, true},
		{"/budget session lots", `"lots" is not a number of tokens`, true},
		{"/spawn", "nothing to do", true},
		{"/loop", "usage: /loop", true},
		{"/hold t1 why", "needs a native-root session", true},
		{"/diff w9", "no branch to diff", true},
		{"/merge", "Usage: /merge", true},
		{"/pr --bogus", "Usage: /pr", true},
		{"/clean", "no worktrees to clean", true},
		{"/fleet-intel", "Intel is unavailable", true},
		{"hello there", "a line starting with \"$ \" is a task", true},
		{strings.Repeat("$ true\n", maxTasksPerPrompt+1), "one prompt makes at most 200 tasks. Nothing was queued", true},
		{"$ true", "Queued t2:", false}, // the refused prompt made no task
	} {
		r := replyTo(t, e, rec, tt.prompt)
		if !strings.Contains(r.Text, tt.want) {
			t.Errorf("%s: reply %q, want it to contain %q", tt.prompt, r.Text, tt.want)
		}
		switch {
		case tt.isError && (r.IsError == nil || !*r.IsError):
			t.Errorf("%s: reply %q is not marked isError", tt.prompt, r.Text)
		case !tt.isError && r.IsError != nil:
			t.Errorf("%s: reply %q carries isError=%v", tt.prompt, r.Text, *r.IsError)
		}
	}
	rec.waitFor("t1 done", activity("completed", "t1"))
	// A task that has already ended is not a failure of /cancel.
	if r := replyTo(t, e, rec, "/cancel t1"); r.IsError != nil || !strings.Contains(r.Text, "already ended") {
		t.Errorf("/cancel of an ended task: %q isError=%v", r.Text, r.IsError)
	}
}

// An answer the broker does not take is refused with the error frame the
// answering client gets: its code says why, its id names the request.
func TestAnswerRefusalsCarryCodes(t *testing.T) {
	e, rec := newEngine(t, func(c *Config) {
		// Requests 1-7 were raised by an earlier process of the session.
		c.Restore = &Restore{Counters: map[string]int64{counterRequest: 7}}
	})
	e.Prompt("test", `$ echo '::ask::{"question":"Which env?","choices":["staging","prod"]}'; read answer; echo "got $answer"`)
	ask := rec.waitFor("ask", func(m protocol.Message) bool { _, ok := m.(*protocol.AskRequest); return ok }).(*protocol.AskRequest)
	if ask.ID != "ask-abcdef-8" {
		t.Fatalf("ask id %q, want ask-abcdef-8 (the counter was restored at 7)", ask.ID)
	}
	refused := func(err error, code, text string) {
		t.Helper()
		pe, ok := errors.AsType[*protocol.Error](err)
		if !ok {
			t.Fatalf("error %v (%T), want a *protocol.Error", err, err)
		}
		if pe.Code != code || !strings.Contains(pe.Message, text) {
			t.Fatalf("refused with %+v, want code %s and a message containing %q", pe, code, text)
		}
	}
	err := e.AnswerAsk(ask.ID, "dev", "answered")
	refused(err, protocol.ErrCodeAnswerInvalid, "one of: staging, prod")
	if pe, _ := errors.AsType[*protocol.Error](err); pe.ID != ask.ID {
		t.Fatalf("error id %q, want %q", pe.ID, ask.ID)
	}
	refused(e.AnswerConfirm(ask.ID, true, "answered"), protocol.ErrCodeAnswerInvalid, "answer it with askResponse")
	if err := e.AnswerAsk(ask.ID, "prod", "answered"); err != nil {
		t.Fatal(err)
	}
	rec.waitFor("answer echoed", transcript("got prod"))
	refused(e.AnswerAsk(ask.ID, "prod", "answered"), protocol.ErrCodeRequestResolved, "already resolved: answered from a console")
	// Raised by the session before this process: resolved, not unknown.
	refused(e.AnswerAsk("ask-abcdef-3", "x", "answered"), protocol.ErrCodeRequestResolved, "already resolved earlier")
	refused(e.AnswerConfirm("confirm-abcdef-7", true, "answered"), protocol.ErrCodeRequestResolved, "already resolved earlier")
	for _, id := range []string{"ask-abcdef-9", "ask-abcdef-0", "ask-abcdef-03", "ask-other1-2", "nope"} {
		refused(e.AnswerAsk(id, "x", "answered"), protocol.ErrCodeRequestUnknown, "no pending request")
	}
}
