package tui

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/protocol"
)

// sentPrompt returns the Prompt of the one Send in acts.
func sentPrompt(t *testing.T, acts []Action) *protocol.Prompt {
	t.Helper()
	if len(acts) != 1 {
		t.Fatalf("actions %#v, want one Send", acts)
	}
	s, ok := acts[0].(Send)
	if !ok {
		t.Fatalf("action %#v, want a Send", acts[0])
	}
	p, ok := s.Msg.(*protocol.Prompt)
	if !ok || s.Fleet != "f1" {
		t.Fatalf("sent %#v to %q, want a Prompt to f1", s.Msg, s.Fleet)
	}
	if !strings.HasPrefix(p.RequestID, "req-") || len(p.RequestID) < 10 {
		t.Errorf("prompt without a fresh request id: %+v", p)
	}
	return p
}

// sentOnly returns the message of the one Send to f1 in acts.
func sentOnly(t *testing.T, acts []Action) protocol.Message {
	t.Helper()
	if len(acts) != 1 {
		t.Fatalf("actions %#v, want one Send", acts)
	}
	s, ok := acts[0].(Send)
	if !ok || s.Fleet != "f1" {
		t.Fatalf("action %#v, want a Send to f1", acts[0])
	}
	return s.Msg
}

func typeText(m *Model, s string) { m.Key(Key{Text: s}) }

func TestWorkerKeys(t *testing.T) {
	prompts := []struct {
		keys []string
		want string
	}{
		{[]string{"d"}, "/diff router"},
		{[]string{"down", "d"}, "/diff docs"},
		{[]string{"m", "y"}, "/merge router"},
		{[]string{"p", "y"}, "/pr router"},
		{[]string{"x", "y"}, "/cancel router"},
		{[]string{"enter", "m", "y"}, "/merge router"}, // from the transcript too
		{[]string{"down", "up", "x", "Y"}, "/cancel router"},
	}
	for _, c := range prompts {
		t.Run(strings.Join(c.keys, " "), func(t *testing.T) {
			m, _ := loaded(false)
			acts := press(m, c.keys...)
			if p := sentPrompt(t, acts); p.Text != c.want {
				t.Errorf("sent %q, want %q", p.Text, c.want)
			}
		})
	}
	t.Run("confirmation asks first", func(t *testing.T) {
		m, _ := loaded(false)
		for _, k := range []string{"m", "p", "x"} {
			if acts := press(m, k); len(acts) != 0 {
				t.Fatalf("%s sent without confirmation: %v", k, acts)
			}
			want := map[string]string{"m": "merge router? y/n", "p": "open a pull request for router? y/n", "x": "cancel worker router? y/n"}[k]
			mustContain(t, m.View(), want)
			if acts := press(m, "n"); len(acts) != 0 {
				t.Fatalf("n sent %v", acts)
			}
			mustContain(t, m.View(), "cancelled")
		}
		press(m, "m")
		if acts := press(m, "esc"); len(acts) != 0 {
			t.Fatalf("esc sent %v", acts)
		}
	})
	t.Run("tell", func(t *testing.T) {
		m, _ := loaded(false)
		press(m, "down", "t")
		mustContain(t, m.View(), "› /tell docs █")
		typeText(m, "fix the conflict")
		if p := sentPrompt(t, press(m, "enter")); p.Text != "/tell docs fix the conflict" {
			t.Errorf("sent %q", p.Text)
		}
	})
	t.Run("selection", func(t *testing.T) {
		m, _ := loaded(false)
		m.Resize(80, 24)
		press(m, "down")
		mustContain(t, m.View(), "▸ docs", "── docs ─", "conflicts: docs/endpoints.md")
		press(m, "down") // stays on the last row
		mustContain(t, m.View(), "▸ docs")
		press(m, "up", "up")
		mustContain(t, m.View(), "▸ router")
	})
}

func TestTranscriptFollowAndSearch(t *testing.T) {
	m, _ := loaded(false)
	m.Resize(80, 24)
	f := m.cur()
	for i := range 100 {
		m.Apply("f1", &protocol.Transcript{Agent: "router", Role: protocol.RoleAssistant, Text: fmt.Sprintf("step %03d", i)}, false)
	}
	press(m, "enter")
	s := m.View()
	mustContain(t, s, "step 099", "following")
	mustNotContain(t, s, "step 080")

	// New lines scroll while following.
	m.Apply("f1", &protocol.Transcript{Agent: "router", Text: "step 100"}, false)
	mustContain(t, m.View(), "step 100")

	// up leaves follow mode: the screen holds still as lines arrive.
	press(m, "up")
	held := m.View()
	mustContain(t, held, "paused (f follows)", "step 099")
	mustNotContain(t, held, "step 100")
	m.Apply("f1", &protocol.Transcript{Agent: "router", Text: "step 101"}, false)
	body := func(s string) string { return strings.Join(lines(s)[4:21], "\n") }
	if got := m.View(); body(got) != body(held) {
		t.Errorf("paused transcript moved:\n%s", got)
	}
	press(m, "pgup", "pgup")
	mustNotContain(t, m.View(), "step 099")
	press(m, "f")
	mustContain(t, m.View(), "step 101", "following")
	press(m, "pgup", "end")
	mustContain(t, m.View(), "step 101", "following")
	press(m, "home")
	mustContain(t, m.View(), "Reading the current router.")

	// Search: type, enter jumps to the next match, the count shows k/n.
	press(m, "end", "/")
	typeText(m, "STEP 05")
	mustContain(t, m.View(), "search: STEP 05█")
	press(m, "enter")
	s = m.View()
	mustContain(t, s, "“STEP 05” 1/10", ">  step 050")
	press(m, "n", "n")
	mustContain(t, m.View(), "3/10", ">  step 052")
	press(m, "N")
	mustContain(t, m.View(), "2/10", ">  step 051")
	press(m, "N", "N") // wraps to the last match
	mustContain(t, m.View(), "10/10", ">  step 059")
	press(m, "n")
	mustContain(t, m.View(), "1/10")
	press(m, "/", "ctrl+u")
	typeText(m, "nothing like this")
	press(m, "enter")
	mustContain(t, m.View(), "no match for nothing like this")
	press(m, "/", "esc")
	mustNotContain(t, m.View(), "“")

	// esc goes back to the table.
	press(m, "esc")
	mustContain(t, m.View(), "NAME", "▸ router")
	if f.log("router").lines.len() != 108 { // 6 from the fixture, 102 here
		t.Errorf("log has %d lines", f.log("router").lines.len())
	}
}

func TestTaskKeys(t *testing.T) {
	m, _ := loaded(false)
	st := fleetState()
	st.Tasks.Items = nil
	for i := range 40 {
		st.Tasks.Items = append(st.Tasks.Items, protocol.FleetTaskItem{ID: fmt.Sprintf("t-%02d", i), Subject: "task", Status: "pending"})
	}
	st.Tasks.Total = 60
	m.Apply("f1", st, false)
	m.Resize(80, 24)
	press(m, "2")
	s := m.View()
	mustContain(t, s, "60 tasks", "(showing 40)", "t-00")
	press(m, "down", "down")
	s = m.View()
	mustNotContain(t, s, "t-01 ")
	mustContain(t, s, "t-02")
	press(m, "up", "up", "up")
	mustContain(t, m.View(), "t-00")
}

func TestFeedKeys(t *testing.T) {
	m, _ := loaded(false)
	m.Resize(100, 30)
	press(m, "3")
	kinds := []struct {
		kind string
		has  []string
		not  []string
	}{
		{"tools", []string{"▶ router Bash", "✓ router Bash 1.8s"}, []string{"✎", "•", "! error"}},
		{"files", []string{"✎ router edited"}, []string{"▶", "•"}},
		{"hub", []string{"• coordinator spawned", "• docs completed"}, []string{"▶", "✎"}},
		{"errors", []string{"! error budget", "✗ router Bash"}, []string{"▶", "✓ router", "✎"}},
		{"all", []string{"▶", "✎", "•", "! error"}, nil},
	}
	for _, k := range kinds {
		press(m, "k")
		s := m.View()
		mustContain(t, s, append(k.has, "kind: "+k.kind)...)
		mustNotContain(t, s, k.not...)
	}
	press(m, "/")
	typeText(m, "HANDLERS")
	s := m.View() // the filter applies as typed
	mustContain(t, s, "filter: “HANDLERS”", "1 entry", "✎ router edited internal/router/handlers.go")
	press(m, "enter")
	mustContain(t, m.View(), "filter: “HANDLERS”")
	press(m, "/", "esc")
	mustContain(t, m.View(), "7 entries")

	for i := range 50 {
		m.Apply("f1", &protocol.HubEvent{From: "w", Kind: "message", Text: fmt.Sprintf("msg %02d", i)}, false)
	}
	mustContain(t, m.View(), "msg 49")
	press(m, "pgup")
	s = m.View()
	mustNotContain(t, s, "msg 49")
	mustContain(t, s, "newer below")
	press(m, "end")
	mustContain(t, m.View(), "msg 49")
}

func TestRequestKeys(t *testing.T) {
	t.Run("confirm", func(t *testing.T) {
		for _, c := range []struct {
			key     string
			approve bool
		}{{"y", true}, {"n", false}} {
			m, _ := loaded(false)
			press(m, "5")
			msg := sentOnly(t, press(m, c.key))
			want := &protocol.ConfirmResponse{ID: "c-17", Approve: c.approve}
			if !reflect.DeepEqual(msg, want) {
				t.Errorf("%s sent %#v, want %#v", c.key, msg, want)
			}
			mustContain(t, m.View(), "answering…")
			if acts := press(m, "y"); len(acts) != 0 {
				t.Errorf("answered twice: %v", acts)
			}
		}
	})
	ask := func(keys ...string) (*Model, []Action) {
		m, _ := loaded(false)
		m.Resize(80, 24)
		press(m, "5", "down")
		return m, press(m, keys...)
	}
	t.Run("choice by number", func(t *testing.T) {
		m, acts := ask("2")
		if msg := sentOnly(t, acts); !reflect.DeepEqual(msg, &protocol.AskResponse{ID: "a-4", Text: "sqlite"}) {
			t.Errorf("sent %#v", msg)
		}
		mustContain(t, m.View(), "answering… (SQLite)")
		m.Apply("f1", &protocol.ConfirmResolved{ID: "a-4", Approved: true, Kind: protocol.KindAsk, Reason: protocol.ReasonAnswered}, false)
		mustNotContain(t, m.View(), "a-4", "dismissed")
	})
	t.Run("choice highlighted", func(t *testing.T) {
		m, acts := ask("right", "right", "left")
		if len(acts) != 0 {
			t.Fatalf("moving sent %v", acts)
		}
		mustContain(t, m.View(), "  ▸ 1) Postgres")
		if msg := sentOnly(t, press(m, "enter")); !reflect.DeepEqual(msg, &protocol.AskResponse{ID: "a-4", Text: "pg"}) {
			t.Errorf("sent %#v", msg)
		}
	})
	t.Run("enter with nothing highlighted", func(t *testing.T) {
		m, acts := ask("enter")
		if len(acts) != 0 {
			t.Errorf("sent %v", acts)
		}
		mustContain(t, m.View(), "pick a choice first")
	})
	t.Run("no such choice", func(t *testing.T) {
		m, acts := ask("7")
		if len(acts) != 0 || m.view != viewRequests {
			t.Errorf("7 on a 2-choice ask: %v, view %d", acts, m.view)
		}
	})
	t.Run("freeform", func(t *testing.T) {
		m, acts := ask("i")
		if len(acts) != 0 {
			t.Fatal(acts)
		}
		typeText(m, "MySQL, 8.4")
		mustContain(t, m.View(), "answer a-4: MySQL, 8.4█")
		if msg := sentOnly(t, press(m, "enter")); !reflect.DeepEqual(msg, &protocol.AskResponse{ID: "a-4", Text: "MySQL, 8.4"}) {
			t.Errorf("sent %#v", msg)
		}
	})
	t.Run("freeform refused", func(t *testing.T) {
		m, _ := connected(false)
		a := askReq()
		a.AllowFreeform = nil
		m.Apply("f1", a, false)
		press(m, "5", "i")
		if m.focus != inputNone {
			t.Error("i opened an answer line for a choice-only ask")
		}
		mustContain(t, m.View(), "takes one of its choices")
	})
	t.Run("freeform only", func(t *testing.T) {
		m, _ := connected(false)
		m.Apply("f1", &protocol.AskRequest{ID: "q", Question: "Name the release?", Kind: "freeform"}, false)
		press(m, "5", "i")
		typeText(m, "v2")
		if msg := sentOnly(t, press(m, "enter")); !reflect.DeepEqual(msg, &protocol.AskResponse{ID: "q", Text: "v2"}) {
			t.Errorf("sent %#v", msg)
		}
	})
	t.Run("digits switch views on a confirm", func(t *testing.T) {
		m, _ := loaded(false)
		press(m, "5", "3")
		if m.view != viewFeed {
			t.Errorf("view %d", m.view)
		}
	})
	t.Run("disconnected", func(t *testing.T) {
		m, _ := loaded(false)
		m.Disconnected("f1", errors.New("EOF"), time.Second)
		press(m, "5")
		if acts := press(m, "y"); len(acts) != 0 {
			t.Errorf("sent while disconnected: %v", acts)
		}
		mustContain(t, m.View(), "not connected to api-overhaul")
	})
}

func TestRequestShownInFull(t *testing.T) {
	m, _ := connected(false)
	long := strings.Repeat("rm -rf ./build/artifacts/cache ", 12) + "END"
	m.Apply("f1", &protocol.ConfirmRequest{ID: "c-1", Summary: "Approve this command?\n" + long}, false)
	m.Resize(60, 24)
	press(m, "5")
	s := m.View()
	flat := strings.Join(strings.Fields(s), " ")
	mustContain(t, flat, strings.TrimSpace(strings.Join(strings.Fields(long), " ")))

	// Taller than the screen: pgdn reaches the rest.
	m.Apply("f1", &protocol.ConfirmRequest{ID: "c-2", Summary: strings.Repeat("line\n", 40) + "LAST LINE"}, false)
	press(m, "down")
	s = m.View()
	mustContain(t, s, "▸ [2/2] confirm c-2", "more lines (pgdn)")
	mustNotContain(t, s, "LAST LINE")
	press(m, "pgdown", "pgdown", "pgdown")
	mustContain(t, m.View(), "LAST LINE", "y approve · n deny")
}

func TestBannerAndJump(t *testing.T) {
	m, _ := loaded(false)
	m.Resize(80, 24)
	for _, v := range []string{"1", "2", "3", "4", "6", "8"} {
		press(m, v)
		mustContain(t, m.View(), "⚠ 2 requests waiting — press 5 (or r): Run a shell command")
	}
	press(m, "7")
	mustContain(t, m.View(), "⚠ 2 requests waiting — press 5: ")
	press(m, "2", "r")
	if m.view != viewRequests {
		t.Fatalf("r went to view %d", m.view)
	}
	mustNotContain(t, m.View(), "⚠ 2 requests")
	mustContain(t, m.View(), "[5 Requests(2)]")
	press(m, "y", "down", "1")
	m.Apply("f1", &protocol.ConfirmResolved{ID: "c-17", Approved: true}, false)
	m.Apply("f1", &protocol.ConfirmResolved{ID: "a-4", Approved: true}, false)
	press(m, "1")
	mustNotContain(t, m.View(), "⚠")
}

func TestConversationKeys(t *testing.T) {
	m, _ := loaded(false)
	m.Resize(80, 24)
	for i := range 40 {
		m.Apply("f1", &protocol.Reply{Text: fmt.Sprintf("answer %02d", i)}, false)
	}
	press(m, "6")
	mustContain(t, m.View(), "answer 39")
	press(m, "pgup")
	s := m.View()
	mustNotContain(t, s, "answer 39")
	mustContain(t, s, "newer lines (end)")
	press(m, "end")
	mustContain(t, m.View(), "answer 39")
	press(m, "home")
	mustContain(t, m.View(), "user: Split the router")
}

func nativeReq(t *testing.T, msg protocol.Message) (*protocol.NativeRoot, protocol.NativeRequest) {
	t.Helper()
	nr, ok := msg.(*protocol.NativeRoot)
	if !ok {
		t.Fatalf("sent %#v, want a NativeRoot", msg)
	}
	req, err := protocol.ParseNativeRequest(nr.Request)
	if err != nil {
		t.Fatalf("request %s: %v", nr.Request, err)
	}
	if err := req.Validate(); err != nil {
		t.Fatalf("request %s: %v", nr.Request, err)
	}
	if nr.ID == "" {
		t.Error("native frame without a transport id")
	}
	return nr, *req
}

func TestNativeKeys(t *testing.T) {
	t.Run("refresh lists first", func(t *testing.T) {
		m, _ := connected(false)
		press(m, "7")
		nr, req := nativeReq(t, sentOnly(t, press(m, "r")))
		if req.Action != protocol.NativeList {
			t.Fatalf("first refresh sent %+v", req)
		}
		m.Apply("f1", &protocol.NativeRootResult{ID: protocol.String(nr.ID), Result: protocol.NativeResult{Kind: protocol.NativeKindRoots,
			Roots: []protocol.NativeRootInfo{{ID: "root-old", Revision: 3}, {ID: "root-new", Revision: 1, PreviousRootID: "root-old"}}}}, false)
		mustContain(t, m.View(), "▸ root-new rev 1")
		_, req = nativeReq(t, sentOnly(t, press(m, "r")))
		if req.Action != protocol.NativeStatus || req.RootID != "root-new" {
			t.Errorf("second refresh sent %+v", req)
		}
		press(m, "up")
		if _, req = nativeReq(t, sentOnly(t, press(m, "r"))); req.RootID != "root-old" {
			t.Errorf("after up, status of %q", req.RootID)
		}
	})
	t.Run("not native", func(t *testing.T) {
		m, _ := connected(false)
		press(m, "7")
		nr, _ := nativeReq(t, sentOnly(t, press(m, "r")))
		m.Apply("f1", &protocol.NativeRootResult{ID: protocol.String(nr.ID), Result: protocol.NativeResult{Kind: protocol.NativeKindError,
			Code: "native_mode_required", Message: "legacy session"}}, false)
		mustContain(t, m.View(), "not a native session")
	})
	t.Run("mutations", func(t *testing.T) {
		for _, c := range []struct{ key, action string }{{"p", "pause"}, {"u", "resume"}, {"s", "stop"}} {
			m, _ := loaded(false)
			m.Resize(100, 30)
			press(m, "7")
			if acts := press(m, c.key); len(acts) != 0 {
				t.Fatalf("%s sent without confirmation", c.key)
			}
			mustContain(t, m.View(), c.action+" root root-7a1 at revision 12? y/n")
			_, req := nativeReq(t, sentOnly(t, press(m, "y")))
			if req.Action != c.action || req.RootID != "root-7a1" || req.ExpectedRevision == nil || *req.ExpectedRevision != 12 ||
				!strings.HasPrefix(req.OperationID, "console-op-") {
				t.Errorf("%s sent %+v", c.key, req)
			}
		}
	})
	t.Run("receipt and conflict", func(t *testing.T) {
		m, _ := loaded(false)
		m.Resize(100, 30)
		press(m, "7", "p")
		nr, _ := nativeReq(t, sentOnly(t, press(m, "y")))
		mustContain(t, m.View(), "pending: pause root root-7a1 at revision 12", "waiting for the result")
		m.Apply("f1", &protocol.NativeRootResult{ID: protocol.String(nr.ID), Result: protocol.NativeResult{Kind: protocol.NativeKindReceipt,
			Receipt:            &protocol.NativeReceipt{OperationID: "console-op-x", Action: "pause", RootID: "root-7a1", Revision: 13, Status: "persisted"},
			AcknowledgmentOnly: protocol.Bool(true)}}, false)
		s := m.View()
		mustContain(t, s, "last: receipt: pause root root-7a1 → revision 13, persisted")
		mustNotContain(t, s, "pending: pause")
		if acts := press(m, "R"); len(acts) != 0 {
			t.Errorf("R retried an answered mutation: %v", acts)
		}
		press(m, "s")
		nr, _ = nativeReq(t, sentOnly(t, press(m, "y")))
		m.Apply("f1", &protocol.NativeRootResult{ID: protocol.String(nr.ID), Result: protocol.NativeResult{Kind: protocol.NativeKindError,
			Code: "revision_conflict", Message: "expected revision 12, root is at 13"}}, false)
		mustContain(t, m.View(), "conflict: the root changed since you looked (you saw revision 12)", "expected revision 12, root is at 13")
	})
	t.Run("retry uncertain with the same operation id", func(t *testing.T) {
		m, _ := loaded(false)
		m.Resize(100, 30)
		press(m, "7", "p")
		first, req1 := nativeReq(t, sentOnly(t, press(m, "y")))
		if acts := press(m, "R"); len(acts) != 0 {
			t.Errorf("R retried a mutation still in flight: %v", acts)
		}
		m.Disconnected("f1", errors.New("EOF"), time.Second)
		m.Connected("f1", welcome())
		mustContain(t, m.View(), "uncertain", "R retries it")
		second, req2 := nativeReq(t, sentOnly(t, press(m, "R")))
		if !reflect.DeepEqual(req1, req2) {
			t.Errorf("retry sent %+v, want the same body %+v", req2, req1)
		}
		if string(first.Request) != string(second.Request) || first.ID == second.ID {
			t.Errorf("retry frame %s id %s, first %s id %s", second.Request, second.ID, first.Request, first.ID)
		}
		// A late answer to the retry settles it.
		m.Apply("f1", &protocol.NativeRootResult{ID: protocol.String(second.ID), Result: protocol.NativeResult{Kind: protocol.NativeKindReceipt,
			Receipt: &protocol.NativeReceipt{Action: "pause", RootID: "root-7a1", Revision: 13, Status: "persisted"}}}, false)
		mustNotContain(t, m.View(), "uncertain")
	})
	t.Run("no status yet", func(t *testing.T) {
		m, _ := connected(false)
		press(m, "7")
		if acts := press(m, "p"); len(acts) != 0 || m.confirm != nil {
			t.Errorf("pause without a status: %v", acts)
		}
		mustContain(t, m.View(), "no root status yet: press r first")
	})
}

func TestPromptLine(t *testing.T) {
	m, _ := loaded(false)
	m.Resize(80, 24)
	if acts := press(m, ":", "enter"); len(acts) != 0 {
		t.Errorf("empty prompt sent %v", acts)
	}
	typeText(m, "hello")
	press(m, "left", "left", "backspace")
	typeText(m, "L")
	press(m, "home")
	typeText(m, ">")
	press(m, "end")
	typeText(m, "!")
	if got := m.prompt.String(); got != ">heLlo!" {
		t.Fatalf("edited line %q", got)
	}
	// Keys go to the line while it has focus.
	press(m, "q", "1", "?", "r")
	if got := m.prompt.String(); got != ">heLlo!q1?r" || m.view != viewWorkers || m.help {
		t.Fatalf("line %q, view %d, help %v", got, m.view, m.help)
	}
	mustContain(t, m.View(), "keys go to the prompt · enter send · esc leave")
	press(m, "ctrl+u")
	typeText(m, "first")
	sentPrompt(t, press(m, "enter"))
	// Sent: the line gives the keys back and says so.
	if m.focus != inputNone || m.prompt.len() != 0 {
		t.Fatalf("after enter: focus %d, line %q", m.focus, m.prompt.String())
	}
	s := m.View()
	mustContain(t, s, "sent: first", "› press : to type a prompt")
	mustNotContain(t, s, "keys go to the prompt")
	press(m, "6")
	if m.view != viewConversation || m.prompt.len() != 0 {
		t.Fatalf("6 after sending: view %d, line %q", m.view, m.prompt.String())
	}
	press(m, "1", ":")
	typeText(m, "second\nline")
	if p := sentPrompt(t, press(m, "enter")); p.Text != "second line" {
		t.Errorf("pasted line sent as %q", p.Text)
	}
	press(m, ":")
	typeText(m, "draft")
	press(m, "up")
	if got := m.prompt.String(); got != "second line" {
		t.Errorf("up recalled %q", got)
	}
	press(m, "up", "up")
	if got := m.prompt.String(); got != "first" {
		t.Errorf("up up recalled %q", got)
	}
	press(m, "down", "down")
	if got := m.prompt.String(); got != "draft" {
		t.Errorf("down back to the draft: %q", got)
	}
	// ctrl+c clears a line with text, then quits.
	if acts := press(m, "ctrl+c"); len(acts) != 0 || m.prompt.len() != 0 {
		t.Errorf("first ctrl+c: %v, line %q", acts, m.prompt.String())
	}
	if acts := press(m, "ctrl+c"); !reflect.DeepEqual(acts, []Action{Quit{}}) {
		t.Errorf("second ctrl+c: %v", acts)
	}
	typeText(m, "kept")
	press(m, "esc")
	if m.focus != inputNone {
		t.Error("esc kept the focus")
	}
	mustContain(t, m.View(), "› kept")
	press(m, "/")
	if got := m.prompt.String(); got != "/" || m.focus != inputPrompt {
		t.Errorf("/ opened %q", got)
	}
}

func TestPromptHistoryBounded(t *testing.T) {
	m, _ := connected(false)
	for i := range 150 {
		press(m, "i")
		typeText(m, fmt.Sprint("p", i))
		press(m, "enter")
	}
	if len(m.history) != maxHistory || m.history[0] != "p50" {
		t.Errorf("history %d, oldest %q", len(m.history), m.history[0])
	}
}

func TestPromptNotSentWhileDisconnected(t *testing.T) {
	m, _ := loaded(false)
	m.Disconnected("f1", errors.New("EOF"), time.Second)
	press(m, ":")
	typeText(m, "are you there")
	if acts := press(m, "enter"); len(acts) != 0 {
		t.Errorf("sent %v", acts)
	}
	if m.prompt.String() != "are you there" {
		t.Error("the unsent line was lost")
	}
}

func TestTabCompletion(t *testing.T) {
	m, _ := loaded(false)
	m.Resize(80, 24)
	press(m, ":")
	typeText(m, "/h")
	press(m, "tab")
	if got := m.prompt.String(); got != "/h" {
		t.Errorf("ambiguous completion gave %q", got)
	}
	mustContain(t, m.View(), "/help  /history  /hub")
	typeText(m, "i")
	press(m, "tab")
	if got := m.prompt.String(); got != "/history " {
		t.Errorf("unique completion gave %q", got)
	}
	press(m, "ctrl+u")
	typeText(m, "/me")
	press(m, "tab")
	if got := m.prompt.String(); got != "/merge " {
		t.Errorf("completion gave %q", got)
	}
	press(m, "ctrl+u")
	typeText(m, "/zz")
	press(m, "tab")
	mustContain(t, m.View(), "no command starts with /zz")
	m.Apply("f1", &protocol.CommandCatalog{Commands: []protocol.CommandCatalogEntry{{Name: "/help"}, {Name: "/helpful"}}}, false)
	press(m, "ctrl+u")
	typeText(m, "/h")
	press(m, "tab")
	if got := m.prompt.String(); got != "/help" {
		t.Errorf("common prefix %q", got)
	}
}

func TestGlobalKeys(t *testing.T) {
	m, _ := loaded(false)
	if acts := press(m, "q"); !reflect.DeepEqual(acts, []Action{Quit{}}) {
		t.Errorf("q: %v", acts)
	}
	if acts := m.Key(Key{Name: "q"}); !reflect.DeepEqual(acts, []Action{Quit{}}) {
		t.Errorf("q as a name: %v", acts)
	}
	if acts := press(m, "ctrl+c"); !reflect.DeepEqual(acts, []Action{Quit{}}) {
		t.Errorf("ctrl+c: %v", acts)
	}
	if acts := m.Key(Key{Text: "quit"}); len(acts) != 0 {
		t.Errorf("a paste outside the prompt acted: %v", acts)
	}
	for i := 1; i <= 8; i++ {
		press(m, fmt.Sprint(i))
		if m.view != view(i) {
			t.Errorf("%d went to view %d", i, m.view)
		}
	}
	press(m, "tab")
	if m.view != viewWorkers {
		t.Errorf("tab from the last view: %d", m.view)
	}
	press(m, "shift+tab")
	if m.view != viewIntel {
		t.Errorf("shift+tab from the first view: %d", m.view)
	}
	press(m, "tab", "tab")
	if m.view != viewTasks {
		t.Errorf("tab tab: %d", m.view)
	}
	press(m, "?")
	mustContain(t, m.View(), "jump to Requests", "retry uncertain mutation")
	press(m, "3") // ignored while help is open
	if m.view != viewTasks || !m.help {
		t.Errorf("help let 3 through")
	}
	press(m, "esc")
	press(m, "?", "?")
	if m.help {
		t.Error("? did not close the help")
	}
}

func TestHelpListsEveryKey(t *testing.T) {
	m, _ := loaded(false)
	m.Resize(200, 60)
	press(m, "?")
	s := m.View()
	for _, k := range []string{"1-8 tab", " r ", ": i /", "F ] [", "q ctrl+c", "↑ ↓ enter", "d t", "m a p x",
		"f end home", "/ n N", "/ k", "y n", "1-9", "←→ enter", " i ", "r ↑ ↓", "p u s", " R ", "↑ ↓ tab", "ctrl+u", "ctrl+c"} {
		if !strings.Contains(s, k) {
			t.Errorf("help lacks %q", k)
		}
	}
	// At 80×24 it fits without scrolling.
	m.Resize(80, 24)
	mustNotContain(t, m.View(), "↓ more")
}

func TestFleetSwitching(t *testing.T) {
	m, _ := loaded(false)
	if acts := press(m, "]"); !reflect.DeepEqual(acts, []Action{SwitchFleet{ID: "f2"}}) || m.Selected() != "f2" {
		t.Errorf("]: %v, selected %q", acts, m.Selected())
	}
	mustContain(t, m.View(), "fleet web", "fleet 2/2", "⚠ 2 waiting in other fleets")
	if acts := press(m, "]"); !reflect.DeepEqual(acts, []Action{SwitchFleet{ID: "f1"}}) {
		t.Errorf("] wraps: %v", acts)
	}
	if acts := press(m, "["); !reflect.DeepEqual(acts, []Action{SwitchFleet{ID: "f2"}}) {
		t.Errorf("[: %v", acts)
	}
	press(m, "F")
	mustContain(t, m.View(), "▸ 2 web (current)", "1 api-overhaul · connected · ⚠ 2 requests waiting")
	if acts := press(m, "up", "enter"); !reflect.DeepEqual(acts, []Action{SwitchFleet{ID: "f1"}}) || m.Selected() != "f1" || m.picker {
		t.Errorf("picker enter: %v, selected %q", acts, m.Selected())
	}
	press(m, "F", "esc")
	if m.picker {
		t.Error("esc did not close the picker")
	}

	one, _ := connected(false)
	if acts := press(one, "]"); len(acts) != 0 {
		t.Errorf("] with one fleet: %v", acts)
	}
	// The current fleet stopped (no longer listed): ] and [ reach the others.
	gone, _ := loaded(false)
	gone.SetFleets([]FleetRef{{ID: "f2", Name: "web"}, {ID: "f3", Name: "docs"}})
	if acts := press(gone, "["); !reflect.DeepEqual(acts, []Action{SwitchFleet{ID: "f3"}}) {
		t.Errorf("[ from a stopped fleet: %v", acts)
	}
	gone.SetFleets([]FleetRef{{ID: "f2", Name: "web"}})
	gone.Select("f1")
	if acts := press(gone, "]"); !reflect.DeepEqual(acts, []Action{SwitchFleet{ID: "f2"}}) {
		t.Errorf("] from a stopped fleet to the only live one: %v", acts)
	}
}

// TestRandomKeysNeverBreakTheScreen drives random keys and frames, on a
// loaded model and on one with no fleet, checking the View contract.
func TestRandomKeysNeverBreakTheScreen(t *testing.T) {
	names := []string{"enter", "esc", "tab", "shift+tab", "up", "down", "left", "right", "pgup", "pgdown",
		"home", "end", "backspace", "delete", "ctrl+u", "ctrl+w", "ctrl+l", "f1", "space"}
	texts := []string{"1", "2", "3", "4", "5", "6", "7", "8", "9", "?", "r", "F", "]", "[", ":", "i", "/",
		"d", "m", "p", "x", "t", "f", "n", "N", "k", "y", "u", "s", "R", "a", "é", "日本", "paste\nme"}
	for seed := range 20 {
		var m *Model
		if seed%4 == 0 {
			m, _ = newModel(seed%8 == 0)
		} else {
			m, _ = loaded(seed%2 == 0)
		}
		rng := uint64(seed)*2654435761 + 1
		next := func(n int) int {
			rng ^= rng << 13
			rng ^= rng >> 7
			rng ^= rng << 17
			return int(rng % uint64(n))
		}
		for i := range 400 {
			if next(3) == 0 {
				m.Key(Key{Name: names[next(len(names))]})
			} else {
				m.Key(Key{Text: texts[next(len(texts))]})
			}
			switch next(40) {
			case 0:
				m.Disconnected("f1", errors.New("EOF"), time.Second)
			case 1:
				attach(m, "f1")
			case 2:
				m.Apply("f1", &protocol.ConfirmResolved{ID: "c-17"}, false)
			case 3:
				m.Apply("f1", askReq(), false)
			}
			w, h := 20+next(120), 3+next(40)
			m.Resize(w, h)
			checkScreen(t, m.View(), w, h)
			if t.Failed() {
				t.Fatalf("seed %d step %d", seed, i)
			}
		}
	}
}

// After an accepted mutation the model asks for the root's status again, so
// the view shows the new revision rather than the one acted on.
func TestNativeRefreshAfterReceipt(t *testing.T) {
	m, _ := connected(false)
	m.Apply("f1", &protocol.NativeRootResult{ID: new("x"), Result: protocol.NativeResult{Kind: protocol.NativeKindRoots, Roots: []protocol.NativeRootInfo{{ID: "root-1", Revision: 1, Intent: "run", Phase: "running"}}}}, false)
	if acts := m.Pending(); len(acts) != 0 {
		t.Fatalf("nothing accepted yet, but Pending = %+v", acts)
	}
	m.Apply("f1", &protocol.NativeRootResult{ID: new("y"), Result: protocol.NativeResult{Kind: protocol.NativeKindReceipt, Receipt: &protocol.NativeReceipt{OperationID: "op", RootID: "root-1", Action: "pause", Revision: 2, Status: "persisted"}}}, false)
	acts := m.Pending()
	if len(acts) != 1 {
		t.Fatalf("after a receipt Pending = %+v, want one status request", acts)
	}
	_, req := nativeReq(t, acts[0].(Send).Msg)
	if req.Action != protocol.NativeStatus || req.RootID != "root-1" {
		t.Errorf("refresh request %+v", req)
	}
	if acts := m.Pending(); len(acts) != 0 {
		t.Errorf("the refresh was asked twice: %+v", acts)
	}
}

// a applies the selected worker's change to the operator's work tree, by
// running fleet apply in the fleet's folder, after a y.
func TestApplyRunsFleetApply(t *testing.T) {
	m, _ := connected(false)
	m.Apply("f1", fleetState(), false)
	m.Key(Key{Text: "1"})
	if acts := m.Key(Key{Text: "a"}); len(acts) != 0 {
		t.Fatalf("a ran before the confirmation: %+v", acts)
	}
	acts := m.Key(Key{Text: "y"})
	if len(acts) != 1 {
		t.Fatalf("after y: %+v", acts)
	}
	run, ok := acts[0].(RunFleet)
	w := welcome()
	if !ok || run.Dir != w.Cwd || len(run.Args) != 2 || run.Args[0] != "apply" || !strings.HasPrefix(run.Args[1], w.SessionID+"/") {
		t.Errorf("a y → %+v, want fleet apply SESSION/WORKER in %s", acts[0], w.Cwd)
	}
	m.Note("f1", "fleet apply: applied 1 file")
	mustContain(t, screen(m, viewConversation, 100, 24), "console: fleet apply: applied 1 file")
	// n cancels.
	m.Key(Key{Text: "a"})
	if acts := m.Key(Key{Text: "n"}); len(acts) != 0 {
		t.Errorf("n still ran: %+v", acts)
	}
}
