package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agents-fleet/fleet/protocol"
)

func TestPending(t *testing.T) {
	home := testHome(t)
	tf := startFleet(t, home, "alpha", "a1")

	out, _, err := runCmd(t, newPendingCmd(), nil)
	if err != nil || out != "no requests waiting\n" {
		t.Fatalf("pending with none waiting = %q, %v", out, err)
	}
	if out, _, err := runCmd(t, newPendingCmd(), nil, "--json"); err != nil || out != "[]\n" {
		t.Fatalf("pending --json with none waiting = %q, %v", out, err)
	}

	tf.confirm("confirm-1", "Push to origin?")
	a := &protocol.AskRequest{ID: "ask-2", Question: "Which env?\nPick one.", Kind: "choice", Ts: 1,
		Choices: []protocol.AskChoiceOption{{Label: "staging", Value: "staging"}, {Label: "Production", Value: "prod", Description: "the real one"}}}
	tf.mu.Lock()
	tf.pending[a.ID] = a
	tf.mu.Unlock()
	tf.srv.Broadcast(a)

	out, _, err = runCmd(t, newPendingCmd(), nil, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"confirm-1  confirm, waiting 0s\n  Push to origin?\n  answer: fleet answer confirm-1 yes|no\n",
		"\nask-2  ask, waiting ", // since 1970
		"\n  Which env?\n  Pick one.\n  1) staging\n  2) Production [prod] - the real one\n  answer: fleet answer ask-2 ANSWER (a number, label or value)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("pending output lacks %q:\n%s", want, out)
		}
	}

	out, _, err = runCmd(t, newPendingCmd(), nil, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var frames []map[string]any
	if err := json.Unmarshal([]byte(out), &frames); err != nil {
		t.Fatalf("pending --json is not a JSON array: %v\n%s", err, out)
	}
	if len(frames) != 2 || frames[0]["type"] != "confirmRequest" || frames[0]["id"] != "confirm-1" ||
		frames[1]["type"] != "askRequest" || frames[1]["id"] != "ask-2" {
		t.Fatalf("pending --json = %s", out)
	}
	// The frames are as the fleet sent them, byte for byte.
	want, _ := protocol.Encode(a)
	if !strings.Contains(out, strings.TrimSuffix(string(want), "\n")) {
		t.Fatalf("ask frame not as sent: %s\nwant %s", out, want)
	}
}

// runExecute runs the whole command line, as the binary does.
func runExecute(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var o, e cmdOutput
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	code = Execute(ctx, args, strings.NewReader(""), &o, &e)
	return o.String(), e.String(), code
}

func TestAnswer(t *testing.T) {
	home := testHome(t)
	tf := startFleet(t, home, "alpha", "a1")
	tf.confirm("confirm-1", "Push?")
	tf.ask("ask-2", "Which env?", "staging", "prod")
	tf.ask("ask-31", "Which region?", "eu", "us")
	tf.ask("ask-32", "Which zone?", "a", "b")

	for _, tt := range []struct {
		args   []string
		code   int
		stdout string // exact, for code 0
		stderr string // part of, otherwise
	}{
		// Refused before anything is sent.
		{[]string{"answer", "confirm-1", "maybe"}, 2, "", "confirm-1 is a confirmation: answer yes or no (y, yes, approve; n, no, deny), not \"maybe\""},
		{[]string{"answer", "ask-2", "dev"}, 2, "", `ask-2 takes one of its choices, by number, label or value: 1) staging, 2) prod; got "dev"`},
		{[]string{"answer", "ask-2", "3"}, 2, "", "1) staging, 2) prod"},
		{[]string{"answer", "ask-3", "x"}, 2, "", `"ask-3" matches 2 waiting requests (ask-31, ask-32)`},
		{[]string{"answer", "ask-2"}, 2, "", "fleet answer: missing ANSWER\nusage: fleet answer [FLEET] ID ANSWER [flags]"},
		// No such request.
		{[]string{"answer", "ask-99", "x"}, 2, "", "no request ask-99: the fleet has none with that id"},
		// Taken.
		{[]string{"answer", "alpha", "confirm", "YES"}, 0, "confirm-1 approved\n", ""}, // a unique prefix
		{[]string{"answer", "ask-2", "2"}, 0, "ask-2 answered: prod\n", ""},
		{[]string{"answer", "ask-32", "B"}, 0, "ask-32 answered: b\n", ""}, // a label, any case
		// Already resolved, with the reason.
		{[]string{"answer", "confirm-1", "no"}, 1, "", "request confirm-1 was already resolved: answered"},
		{[]string{"answer", "ask-2", "staging"}, 1, "", "request ask-2 was already resolved: answered"},
	} {
		out, errOut, code := runExecute(t, tt.args...)
		if code != tt.code || (tt.code == 0 && out != tt.stdout) || !strings.Contains(errOut, tt.stderr) {
			t.Errorf("fleet %s: exit %d, stdout %q, stderr %q; want exit %d, stdout %q, stderr containing %q",
				strings.Join(tt.args, " "), code, out, errOut, tt.code, tt.stdout, tt.stderr)
		}
	}
	tf.waitAnswer(t, "confirm-1=true")
	tf.waitAnswer(t, "ask-2=prod")
	tf.waitAnswer(t, "ask-32=b")
	tf.mu.Lock()
	answers := len(tf.answers)
	tf.mu.Unlock()
	if answers != 3 {
		t.Fatalf("answers recorded %v, want the three taken ones only", tf.answers)
	}
}

// A console that answers just before this one wins: the fleet resolves the
// request as answered (a confirmResolved this command sees too) and
// refuses this answer. It exits 1, not 0.
func TestAnswerLosesTheRace(t *testing.T) {
	home := testHome(t)
	tf := startFleet(t, home, "alpha", "a1")
	tf.ask("ask-1", "Which env?", "staging", "prod")
	tf.mu.Lock()
	tf.lost["ask-1"] = true
	tf.mu.Unlock()
	out, errOut, code := runExecute(t, "answer", "ask-1", "prod")
	if code != 1 || out != "" || !strings.Contains(errOut, "ask-1 was already resolved: answered") {
		t.Fatalf("lost race: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

func TestSendWaitReplyError(t *testing.T) {
	home := testHome(t)
	startFleet(t, home, "alpha", "a1")
	out, errOut, code := runExecute(t, "send", "--wait-reply", "/fail w9")
	if code != 1 || out != "" || errOut != "fleet: failed: /fail w9\n" {
		t.Fatalf("an error reply: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	out, errOut, code = runExecute(t, "send", "--wait-reply", "/tasks")
	if code != 0 || out != "echo: /tasks\n" || errOut != "" {
		t.Fatalf("a reply: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// Careless input gets a helpful answer: the closest flag or command, what
// a flag wants, the missing argument, and the usage line; exit 2.
func TestUsageErrors(t *testing.T) {
	testHome(t)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--worker", "3"}, "fleet run: unknown flag --worker (did you mean --workers?)\nusage: fleet run [PROMPT] [flags]\n"},
		{[]string{"run", "--workers", "two"}, "fleet run: --workers wants a number, got \"two\"\nusage: fleet run [PROMPT] [flags]\n"},
		{[]string{"run", "--request-ttl", "soon"}, "fleet run: --request-ttl wants a duration such as 30s, 5m or 1h30m, got \"soon\"\n"},
		{[]string{"events", "--count"}, "fleet events: --count wants a number\n"},
		{[]string{"events", "--cuont", "1"}, "fleet events: unknown flag --cuont (did you mean --count?)\n"},
		{[]string{"ls", "--zzzzzz"}, "fleet ls: unknown flag --zzzzzz (fleet ls --help lists the flags)\n"},
		{[]string{"send"}, "fleet send: missing TEXT\nusage: fleet send [FLEET] TEXT [flags]\n"},
		{[]string{"send", "a", "b", "c"}, "fleet send: accepts between 1 and 2 arg(s), received 3\nusage: fleet send [FLEET] TEXT [flags]\n"},
		{[]string{"diff"}, "fleet diff: missing WORKER\nusage: fleet diff WORKER [PATH...] [flags]\n"},
		{[]string{"merge"}, "fleet merge: missing WORKER\n"},
		{[]string{"answer"}, "fleet answer: missing ID ANSWER\n"},
		{[]string{"rnu"}, "fleet: unknown command \"rnu\" (did you mean \"run\"?)\nusage: fleet [command]\n"},
		{[]string{"worktrees", "prnue"}, "fleet worktrees: unknown command \"prnue\" (did you mean \"prune\"?)\n"},
		{[]string{"worktrees", "bogus"}, "fleet worktrees: unknown command \"bogus\" (fleet worktrees --help lists the commands)\n"},
		{[]string{"root", "status", "--revison", "1"}, "fleet root status: unknown flag --revison"},
		{[]string{"experiment", "run"}, "fleet experiment run: want one argument, the experiment FILE; got 0\n"},
	} {
		out, errOut, code := runExecute(t, tt.args...)
		if code != 2 || out != "" || !strings.Contains(errOut, tt.want) {
			t.Errorf("fleet %s: exit %d, stdout %q, stderr %q; want exit 2 and stderr containing %q",
				strings.Join(tt.args, " "), code, out, errOut, tt.want)
		}
	}
}

func TestAskAnswer(t *testing.T) {
	choices := []protocol.AskChoiceOption{{Label: "Allow once", Value: "allow"}, {Label: "Deny", Value: "deny"}}
	closed := &protocol.AskRequest{ID: "a", Kind: "choice", Choices: choices}
	open := &protocol.AskRequest{ID: "b", Kind: "choice", Choices: choices, AllowFreeform: protocol.Bool(true)}
	free := &protocol.AskRequest{ID: "c", Kind: "freeform"}
	for _, tt := range []struct {
		ask        *protocol.AskRequest
		typed      string
		want       string
		acceptable bool
	}{
		{closed, "allow", "allow", true},      // a value
		{closed, "2", "deny", true},           // a number
		{closed, " 1 ", "allow", true},        // spaces around a number
		{closed, "allow ONCE", "allow", true}, // a label, any case
		{closed, "3", "3", false},             // out of range
		{closed, "maybe", "maybe", false},     // not a choice
		{open, "2", "deny", true},
		{open, "only on Fridays", "only on Fridays", true},
		{free, "1", "1", true}, // free text is taken as typed
		{free, "use the staging db", "use the staging db", true},
	} {
		got, ok := askAnswer(tt.ask, tt.typed)
		if got != tt.want || ok != tt.acceptable {
			t.Errorf("askAnswer(%s, %q) = %q, %v; want %q, %v", tt.ask.ID, tt.typed, got, ok, tt.want, tt.acceptable)
		}
	}
	for _, w := range []string{"y", "YES", "Approve", "n", "no", "DENY"} {
		if _, ok := confirmWord(w); !ok {
			t.Errorf("confirmWord(%q) not a yes or no", w)
		}
	}
	for _, w := range []string{"", "yep", "ok", "1", "true"} {
		if _, ok := confirmWord(w); ok {
			t.Errorf("confirmWord(%q) taken as a yes or no", w)
		}
	}
}
