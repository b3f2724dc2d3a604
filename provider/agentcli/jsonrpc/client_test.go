package jsonrpc

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agents-fleet/fleet/provider"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// wire is the CLI's stdin: it keeps each line written, or fails them all.
type wire struct {
	mu    sync.Mutex
	lines []string
	fail  error
}

func (w *wire) WriteLine(_ context.Context, line []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fail != nil {
		return w.fail
	}
	w.lines = append(w.lines, string(line))
	return nil
}

func (w *wire) written() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.lines...)
}

// handler records what the client dispatched to it.
type handler struct {
	got []string // "request ID METHOD PARAMS", "notification METHOD PARAMS", "invalid LINE"
}

func (h *handler) Request(id json.RawMessage, method string, p Params) {
	h.got = append(h.got, "request "+string(id)+" "+method+" "+decoded(p))
}

func (h *handler) Notification(method string, p Params) {
	h.got = append(h.got, "notification "+method+" "+decoded(p))
}

func (h *handler) Invalid(line []byte) { h.got = append(h.got, "invalid "+string(line)) }

// decoded is the params' "x" member, or why they did not decode.
func decoded(p Params) string {
	var v struct {
		X string `json:"x"`
	}
	if err := p.Decode(&v); err != nil {
		return "undecodable"
	}
	return v.X
}

func TestDispatch(t *testing.T) {
	for _, c := range []struct {
		name string
		opts Options
		in   []string
		want []string
	}{
		{"codex dialect", Options{Notification: func(m string) bool { return m == "known" }}, []string{
			`{"method":"known","params":{"x":"fast"}}`,
			`{"method":"ask","id":7,"params":{"x":"numeric id"}}`,
			`{"method":"ask","id":"s1","params":{"x":"string id"}}`,
			`{"method":"other","params":{"x":"no id"}}`,
			`{"params":{"x":"params first"},"id":8,"method":"ask"}`,
			`{"method":"ask","id":null,"params":{"x":"null id"}}`,
			`{"id":99,"result":{}}`, // nobody waits: dropped
			`not json`,
			`[1,2,3]`,
			`{"neither":"kind"}`,
			`{"method":"other","params":{`,
			`   `,
		}, []string{
			"notification known fast",
			"request 7 ask numeric id",
			`request "s1" ask string id`,
			"notification other no id",
			"request 8 ask params first",
			"notification ask null id",
			"invalid not json",
			"invalid [1,2,3]",
			`invalid {"neither":"kind"}`,
			`invalid {"method":"other","params":{`,
		}},
		{"2.0 dialect", Options{Version: true}, []string{
			`{"jsonrpc":"2.0","method":"note","params":{"x":"fast"}}`,
			`{"jsonrpc":"2.0","id":3,"method":"ask","params":{"x":"id first"}}`,
			`{"method":"note","params":{"x":"no version"}}`,
			`{"jsonrpc":"1.0","method":"note","params":{}}`,
		}, []string{
			"notification note fast",
			"request 3 ask id first",
			`invalid {"method":"note","params":{"x":"no version"}}`,
			`invalid {"jsonrpc":"1.0","method":"note","params":{}}`,
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := &handler{}
			cl := NewClient(&wire{}, h, c.opts)
			for _, l := range c.in {
				cl.Dispatch([]byte(l))
			}
			if strings.Join(h.got, "\n") != strings.Join(c.want, "\n") {
				t.Errorf("got:\n%s\nwant:\n%s", strings.Join(h.got, "\n"), strings.Join(c.want, "\n"))
			}
		})
	}
}

// Calls are numbered from 1; each response reaches its call's callback, in
// stream order; Close fails the rest in the order they were made, and
// later calls fail with provider.ErrClosed.
func TestCalls(t *testing.T) {
	w := &wire{}
	c := NewClient(w, &handler{}, Options{Version: true})
	var got []string
	record := func(name string) func(json.RawMessage, error) {
		return func(res json.RawMessage, err error) {
			switch {
			case err != nil:
				got = append(got, name+": "+err.Error())
			default:
				got = append(got, name+": "+string(res))
			}
		}
	}
	for _, name := range []string{"a", "b", "c", "d"} {
		if err := c.Call(context.Background(), name, map[string]any{"n": name}, record(name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Notify(context.Background(), "note", nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Respond(json.RawMessage(`"s1"`), nil); err != nil {
		t.Fatal(err)
	}
	if err := c.RespondError(json.RawMessage(`5`), CodeMethodNotFound, "no such thing"); err != nil {
		t.Fatal(err)
	}
	want := []string{
		`{"jsonrpc":"2.0","id":1,"method":"a","params":{"n":"a"}}` + "\n",
		`{"jsonrpc":"2.0","id":2,"method":"b","params":{"n":"b"}}` + "\n",
		`{"jsonrpc":"2.0","id":3,"method":"c","params":{"n":"c"}}` + "\n",
		`{"jsonrpc":"2.0","id":4,"method":"d","params":{"n":"d"}}` + "\n",
		`{"jsonrpc":"2.0","method":"note"}` + "\n",
		`{"jsonrpc":"2.0","id":"s1","result":{}}` + "\n",
		`{"jsonrpc":"2.0","id":5,"error":{"code":-32601,"message":"no such thing"}}` + "\n",
	}
	if strings.Join(w.written(), "") != strings.Join(want, "") {
		t.Fatalf("written:\n%s", strings.Join(w.written(), ""))
	}
	c.Dispatch([]byte(`{"jsonrpc":"2.0","id":2,"result":{"ok":true}}`))
	c.Dispatch([]byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"it failed","data":"the details"}}`))
	c.Dispatch([]byte(`{"jsonrpc":"2.0","id":2,"result":{"again":true}}`)) // answered already: dropped
	c.Close(errors.New("the CLI exited"))
	c.Close(errors.New("a second Close counts for nothing"))
	if err := c.Call(context.Background(), "e", nil, record("e")); !errors.Is(err, provider.ErrClosed) {
		t.Errorf("Call after Close = %v", err)
	}
	wantGot := []string{
		`b: {"ok":true}`,
		"a: it failed: the details (JSON-RPC error -32603)",
		"c: the CLI exited",
		"d: the CLI exited",
	}
	if strings.Join(got, "\n") != strings.Join(wantGot, "\n") {
		t.Errorf("callbacks:\n%s", strings.Join(got, "\n"))
	}
}

// Await returns the response, ctx's end, or the reason Close gives; a
// failed write waits (bounded) for that reason.
func TestAwait(t *testing.T) {
	w := &wire{}
	c := NewClient(w, &handler{}, Options{})
	go func() {
		for len(w.written()) == 0 {
			time.Sleep(time.Millisecond) // the request is on the wire: answer it
		}
		c.Dispatch([]byte(`{"id":1,"result":{"thread":"t1"}}`))
	}()
	var seen string
	res, err := c.Await(context.Background(), "start", nil, func(r json.RawMessage, err error) { seen = string(r) })
	if err != nil || string(res) != `{"thread":"t1"}` || seen != string(res) {
		t.Fatalf("Await = %s, %v (callback saw %s)", res, err, seen)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Await(ctx, "never", nil, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("Await with a cancelled ctx = %v", err)
	}

	w.mu.Lock()
	w.fail = errors.New("broken pipe")
	w.mu.Unlock()
	gone := errors.New("the CLI exited: exit status 3")
	go c.Close(gone)
	if _, err := c.Await(context.Background(), "more", nil, nil); err != gone {
		t.Errorf("Await on a dead CLI = %v, want the reason it died", err)
	}

	c2 := NewClient(&wire{fail: errors.New("broken pipe")}, &handler{}, Options{})
	ctx, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := c2.Await(ctx, "x", nil, nil); err == nil || !strings.Contains(err.Error(), "write x: broken pipe") {
		t.Errorf("Await on a pipe that broke, nobody closing = %v", err)
	}
}

func TestMaxPending(t *testing.T) {
	c := NewClient(&wire{}, &handler{}, Options{})
	for i := 0; i < MaxPending; i++ {
		if err := c.Call(context.Background(), "m", nil, nil); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if err := c.Call(context.Background(), "m", nil, nil); !errors.Is(err, ErrTooManyCalls) {
		t.Fatalf("call past MaxPending = %v", err)
	}
	c.Dispatch([]byte(`{"id":1,"result":{}}`))
	if err := c.Call(context.Background(), "m", nil, nil); err != nil {
		t.Fatalf("call after one was answered: %v", err)
	}
	c.Close(provider.ErrClosed)
}

// A prompt's answer goes back under the request's id, unless the CLI
// withdrew the request meanwhile.
func TestPrompt(t *testing.T) {
	w := &wire{}
	c := NewClient(w, &handler{}, Options{})
	c.Prompt(json.RawMessage(`4`), context.Background(), func(context.Context) any { return map[string]string{"decision": "accept"} })
	asked := make(chan struct{})
	c.Prompt(json.RawMessage(`"w"`), context.Background(), func(ctx context.Context) any {
		close(asked)
		<-ctx.Done()
		return "too late"
	})
	<-asked
	c.Withdraw(json.RawMessage(`"w"`))
	c.WaitPrompts()
	if got := strings.Join(w.written(), ""); got != `{"id":4,"result":{"decision":"accept"}}`+"\n" {
		t.Errorf("written %q", got)
	}
}

func TestParams(t *testing.T) {
	line := Params{line: []byte(`{"method":"m","params":{"x":"in the line"}}`)}
	split := Params{raw: json.RawMessage(`{"x":"split off"}`), split: true}
	broken := Params{line: []byte(`{"method":"m","params":{"x":`)}
	if decoded(line) != "in the line" || decoded(split) != "split off" || decoded(broken) != "undecodable" {
		t.Errorf("decoded %q %q %q", decoded(line), decoded(split), decoded(broken))
	}
	var syntax *json.SyntaxError
	if err := broken.Decode(&struct{}{}); !errors.As(err, &syntax) {
		t.Errorf("a broken line's error = %v", err)
	}
	if !line.Valid() || !split.Valid() || broken.Valid() {
		t.Error("Valid")
	}
	if string(line.Raw()) != `{"x":"in the line"}` || line.Line() == nil || split.Line() != nil {
		t.Errorf("Raw %s", line.Raw())
	}
	if err := (Params{split: true}).Decode(&struct{}{}); err == nil {
		t.Error("no params decoded")
	}
}
