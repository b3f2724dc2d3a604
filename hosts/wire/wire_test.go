package wire

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/provider"
)

// Every provider event crosses the wire and comes back the same.
func TestProviderEventsRoundTrip(t *testing.T) {
	events := []provider.Event{
		provider.SessionStarted{ID: "s-1", Model: "m"},
		provider.Output{Stream: provider.Stderr, Lines: []string{"a", "", "é \"q\" \x01"}},
		provider.Text{Text: "thinking", Reasoning: true},
		provider.Note{Text: "retrying"},
		provider.ToolStarted{ID: "t1", Name: "Bash", Detail: "ls", Input: map[string]any{"command": "ls"}},
		provider.ToolCompleted{ID: "t1", Name: "Bash", Result: "x", IsError: true, Duration: 1500 * time.Millisecond},
		provider.FileEdited{Path: "a/b.go", Change: provider.Edited, Tool: "Edit"},
		provider.Usage{InputTokens: 1, OutputTokens: 2, CacheReadTokens: 3, CacheWriteTokens: 4, ContextTokens: 5, ContextWindow: 6},
		provider.TurnEnded{Result: "done", ExitCode: 3, Interrupted: true, Err: errors.New("exit status 3")},
	}
	raw := make([][]byte, len(events))
	for i, ev := range events {
		raw[i] = EncodeEvent(FromProvider(ev))
	}
	b, err := DecodeBatch(EncodeBatch("s1-w1.abc", 7, raw))
	if err != nil {
		t.Fatal(err)
	}
	if b.Seq != 7 || len(b.Events) != len(events) {
		t.Fatalf("batch seq %d with %d events", b.Seq, len(b.Events))
	}
	for i, e := range b.Events {
		got, ok := e.Provider()
		if !ok {
			t.Fatalf("event %d (%s) is not a provider event", i, e.Kind)
		}
		want := events[i]
		if te, ok := want.(provider.TurnEnded); ok {
			g := got.(provider.TurnEnded)
			if g.Err == nil || g.Err.Error() != te.Err.Error() {
				t.Fatalf("turnEnded err = %v", g.Err)
			}
			g.Err, te.Err = nil, nil
			got, want = g, te
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("event %d: got %#v, want %#v", i, got, want)
		}
	}
}

// What a host sends that the fleet cannot rely on is refused, with the reason.
func TestBadBatchesAreRefused(t *testing.T) {
	for _, c := range []struct{ name, data, want string }{
		{"not json", "{", "event batch"},
		{"no seq", `{"events":[{"k":"note"}]}`, "seq 0"},
		{"no events", `{"seq":1,"events":[]}`, "0 events"},
		{"unknown kind", `{"seq":1,"events":[{"k":"format-disk"}]}`, `unknown event kind "format-disk"`},
		{"bad stream", `{"seq":1,"events":[{"k":"output","stream":"stdin","lines":["x"]}]}`, `stream "stdin"`},
		{"usage without counts", `{"seq":1,"events":[{"k":"usage"}]}`, "without counts"},
		{"negative usage", `{"seq":1,"events":[{"k":"usage","usage":{"InputTokens":-1}}]}`, "negative"},
		{"permission without id", `{"seq":2,"events":[{"k":"note"},{"k":"permission"}]}`, "event 3: permission"},
		{"branch without key", `{"seq":1,"events":[{"k":"branch","commit":"abc"}]}`, "without a key"},
		{"file without path", `{"seq":1,"events":[{"k":"file","change":"edited"}]}`, "without a path"},
		{"oversized", `{"seq":1,"events":[{"k":"note","text":"` + strings.Repeat("x", MaxMessage) + `"}]}`, "limit"},
	} {
		if _, err := DecodeBatch([]byte(c.data)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want it to say %q", c.name, err, c.want)
		}
	}
}

// An event too big to cross becomes a note saying so; the batch stays under the limit.
func TestOversizedEventBecomesANote(t *testing.T) {
	big := FromProvider(provider.ToolStarted{ID: "t", Name: "Write", Input: map[string]any{"content": strings.Repeat("x", MaxBatch)}})
	b, err := DecodeBatch(EncodeBatch("c", 1, [][]byte{EncodeEvent(big)}))
	if err != nil {
		t.Fatal(err)
	}
	if e := b.Events[0]; e.Kind != KindNote || !strings.Contains(e.Text, "toolStart event") {
		t.Fatalf("got %+v", e)
	}
}

func TestClaimsAreChecked(t *testing.T) {
	good := Start{Claim: "s1-w1.0a1b", Session: "s1", Worker: "w1", Provider: "local", Repo: "r", Base: "b", Branch: "fleet/s1/w1", Env: []string{"AGENTS_FLEET_SESSION=s1"}}
	data, _ := json.Marshal(good)
	if _, err := DecodeStart(data); err != nil {
		t.Fatal(err)
	}
	for name, edit := range map[string]func(*Start){
		"dotted worker": func(s *Start) { s.Worker = "w1.>" },
		"no base":       func(s *Start) { s.Base = "" },
		"secret env":    func(s *Start) { s.Env = []string{"ANTHROPIC_API_KEY=sk"} },
	} {
		s := good
		edit(&s)
		data, _ := json.Marshal(s)
		if _, err := DecodeStart(data); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
