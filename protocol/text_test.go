package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

// worstText is n bytes of the characters JSON escaping grows the most,
// mixed with the ones it does not: quotes, backslashes, control
// characters, U+2028/9, invalid UTF-8, multi-byte runes and HTML.
func worstText(n int) string {
	pieces := []string{"\"", "\\", "\x00", "\x01", "\x1f", "\n", "\u2028", "\u2029", "\xff", "é", "中", "🚀", "<", "&", "a"}
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		b.WriteString(pieces[i%len(pieces)])
	}
	return b.String()[:n] // may end inside a rune: invalid UTF-8 is part of the test
}

// encodedString is how the codec writes s, without the quotes.
func encodedString(t testing.TB, s string) []byte {
	t.Helper()
	f, err := appendMessage(nil, &Reply{Text: s}, 1<<40)
	if err != nil {
		t.Fatal(err)
	}
	const prefix = `{"type":"reply","text":"`
	if !bytes.HasPrefix(f, []byte(prefix)) || !bytes.HasSuffix(f, []byte("\"}\n")) {
		t.Fatalf("unexpected frame %q", f)
	}
	return f[len(prefix) : len(f)-3]
}

func TestEncodedLenMatchesTheCodec(t *testing.T) {
	for _, s := range []string{"", "plain", "\"\\/", "\x00\x07\x1f\x7f", "\b\f\n\r\t", "\u2028\u2029", "\xff\xfe\xc3", "é中🚀", "<>&",
		worstText(1000), worstText(999), strings.Repeat("\x00", 100)} {
		if got, want := EncodedLen(s), len(encodedString(t, s)); got != want {
			t.Errorf("EncodedLen(%q) = %d, the codec writes %d bytes", s, got, want)
		}
	}
}

var markerRE = regexp.MustCompile(`… \[truncated (\d+) bytes\]$`)

func TestCutText(t *testing.T) {
	if got := CutText("short", 5); got != "short" {
		t.Fatalf("a text that fits is kept: %q", got)
	}
	for _, s := range []string{strings.Repeat("x", 5000), worstText(5000), strings.Repeat("\x00", 5000), strings.Repeat("🚀", 2000)} {
		for _, max := range []int{MinCut, 100, 1000, 4999, EncodedLen(s) - 1} {
			got := CutText(s, max)
			if n := EncodedLen(got); n > max {
				t.Fatalf("CutText(%.20q…, %d) encodes to %d bytes", s, max, n)
			}
			m := markerRE.FindStringSubmatch(got)
			if m == nil {
				t.Fatalf("CutText(%.20q…, %d) = %.60q…: no marker", s, max, got)
			}
			kept := got[:len(got)-len(m[0])]
			if !strings.HasPrefix(s, kept) || m[1] != fmt.Sprint(len(s)-len(kept)) {
				t.Fatalf("CutText(%.20q…, %d): kept %d bytes, marker says %s left out of %d", s, max, len(kept), m[1], len(s))
			}
			if utf8.ValidString(s) && !utf8.ValidString(kept) {
				t.Fatalf("CutText(%.20q…, %d) cut inside a rune", s, max)
			}
			// Not too short either: the next character would not have fit
			// beside the marker (sized for the largest count).
			w, _ := unitLen(s[len(kept):])
			if EncodedLen(kept)+w+len(fmt.Sprintf(cutMarker, len(s))) <= max {
				t.Fatalf("CutText(%.20q…, %d) kept %d bytes, one more character fits", s, max, len(kept))
			}
		}
	}
	if got := CutText(strings.Repeat("x", 100), 10); got != "" {
		t.Fatalf("a bound below the marker: %q", got)
	}
}

func TestCheckPromptText(t *testing.T) {
	if err := CheckPromptText(strings.Repeat("a", MaxPromptText)); err != nil {
		t.Fatalf("a plain prompt at the limit: %v", err)
	}
	if err := CheckPromptText(strings.Repeat("\"", MaxPromptText/2)); err != nil {
		t.Fatalf("quotes at the limit once escaped: %v", err)
	}
	err := CheckPromptText(strings.Repeat("\"", MaxPromptText/2+1))
	if err == nil || !strings.Contains(err.Error(), fmt.Sprint(MaxPromptText)) {
		t.Fatalf("one quote over the limit: %v", err)
	}
	// A prompt at the limit of the worst characters: its echo fits, with
	// the longest source and requestId the server lets through.
	text := CutText(worstText(MaxPromptText), MaxPromptText)
	text = strings.TrimSuffix(text, markerRE.FindString(text))
	if CheckPromptText(text) != nil {
		t.Fatal("the cut worst text should be admitted")
	}
	echo := &UserMessage{Source: strings.Repeat("\x00", 128), Text: text, RequestID: strings.Repeat("\x01", 256)}
	if _, err := Encode(echo); err != nil {
		t.Fatalf("the echo of an admitted prompt: %v", err)
	}
}

func TestAppendFitCutsTheLongestTexts(t *testing.T) {
	big := worstText(MaxFrameSize)
	in := &FleetState{Ts: 1, Workers: []FleetWorkerSummary{{ID: "w1", Name: "w1", Status: "running", RecentActivity: big}},
		Tasks: FleetTaskSummary{Items: []FleetTaskItem{{ID: "t1", Subject: big, Status: "running"}, {ID: "t2", Subject: "small", Status: "done"}}}}
	if _, err := Encode(in); err != ErrFrameTooLarge {
		t.Fatalf("the test message should be too large: %v", err)
	}
	frame, out, err := AppendFit([]byte("prefix"), in)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(frame, []byte("prefix")) || len(frame)-len("prefix")-1 > MaxFrameSize {
		t.Fatalf("frame of %d bytes", len(frame)-len("prefix"))
	}
	if in.Tasks.Items[0].Subject != big || in.Workers[0].RecentActivity != big {
		t.Fatal("AppendFit modified its argument")
	}
	got, err := Decode(frame[len("prefix"):])
	if err != nil {
		t.Fatal(err)
	}
	fs := got.(*FleetState)
	if !markerRE.MatchString(fs.Tasks.Items[0].Subject) || !markerRE.MatchString(fs.Workers[0].RecentActivity) {
		t.Fatal("the long texts are not marked")
	}
	if fs.Tasks.Items[1].Subject != "small" || fs.Tasks.Items[0].ID != "t1" {
		t.Fatalf("short texts must be kept: %+v", fs.Tasks.Items)
	}
	if enc, _ := Encode(out); !bytes.Equal(enc, frame[len("prefix"):]) {
		t.Fatal("the returned message is not what the frame encodes")
	}
	// Both halves share the cut: each loses about half.
	if a, b := len(fs.Tasks.Items[0].Subject), len(fs.Workers[0].RecentActivity); a < MaxFrameSize/8 || b < MaxFrameSize/8 {
		t.Fatalf("cut too much: %d and %d bytes kept", a, b)
	}

	// Free-form input: strings inside maps and arrays, numbers kept exact.
	tc := &ToolCall{Agent: "w1", Tool: "Write", Phase: PhaseStart, Ts: 1, Detail: "write",
		Input: map[string]any{"content": big, "n": json.Number("9007199254740993"), "parts": []any{big, "x"}}}
	frame, _, err = AppendFit(nil, tc)
	if err != nil || len(frame)-1 > MaxFrameSize {
		t.Fatalf("toolCall: %v, %d bytes", err, len(frame))
	}
	got, _ = Decode(frame)
	in2 := got.(*ToolCall).Input
	if !markerRE.MatchString(in2["content"].(string)) || !markerRE.MatchString(in2["parts"].([]any)[0].(string)) ||
		!bytes.Contains(frame, []byte(`"n":9007199254740993`)) {
		t.Fatalf("toolCall input: %.200s", frame)
	}

	// A transcript line, the hot path's type.
	frame, out, err = AppendFit(nil, &Transcript{Role: RoleTool, Text: big, Agent: "w1"})
	if err != nil || len(frame)-1 > MaxFrameSize || !markerRE.MatchString(out.(*Transcript).Text) {
		t.Fatalf("transcript: %v, %d bytes", err, len(frame))
	}

	// A frame that fits is the same bytes as Encode's, and m itself.
	r := &Reply{Text: "hi"}
	frame, out, err = AppendFit(nil, r)
	if enc, _ := Encode(r); err != nil || !bytes.Equal(frame, enc) || out != Message(r) {
		t.Fatalf("a frame that fits: %q %v", frame, err)
	}

	// Too many entries to fit by cutting texts: refused, never sent.
	many := &FileChange{Ts: 1}
	for i := range MaxFrameSize / 40 {
		many.Changes = append(many.Changes, FileChangeEntry{Path: fmt.Sprint(i), AbsolutePath: "/", Agent: "w", Tool: "t", ChangeType: ChangeEdited, Ts: 1})
	}
	if _, _, err := AppendFit(nil, many); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("too many entries: %v", err)
	}
}

func TestDecodeLenientSkipsBadEntries(t *testing.T) {
	// The fleet before issue 21 sent coordinator lines in hydrate without
	// the agent that hydrate entries require.
	frame := `{"type":"hydrate","conversation":[{"role":"user","text":"hi","ts":1},{"role":"user","ts":2}],` +
		`"transcripts":[{"role":"assistant","text":"coordinator line","ts":3},{"agent":"w1","role":"tool","text":"kept","ts":4},null],` +
		`"hub":[{"type":"hubEvent","from":"w1","kind":"spawned","ts":5},{"type":"reply","from":"x","kind":"k","ts":6},{"from":"w2","kind":"k","ts":7}],"truncated":false}`
	if _, err := Decode([]byte(frame)); err == nil {
		t.Fatal("Decode must stay strict")
	}
	m, skipped, err := DecodeLenient([]byte(frame + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	h := m.(*Hydrate)
	if skipped != 4 || len(h.Conversation) != 1 || len(h.Transcripts) != 1 || h.Transcripts[0].Text != "kept" ||
		len(h.Hub) != 2 || h.Hub[1].From != "w2" {
		t.Fatalf("skipped %d: %+v", skipped, h)
	}

	// Nested: a bad entry inside a good one costs only itself.
	fs := `{"type":"fleetState","ts":1,"coordinator":{"isProcessing":false,"planMode":false,"dispatchPaused":false},` +
		`"workers":[{"id":"w1","name":"w1","status":"running","toolUseCount":0,"tokenCount":0,"git":{"branch":"b","ahead":0,"behind":0,"uncommitted":0,"filesChanged":0,"linesAdded":0,"linesRemoved":0,"merged":false,` +
		`"files":[{"path":"a","status":"M","added":1,"removed":0},{"path":"b"}]}},{"id":"w2"}],` +
		`"workerActive":0,"workerTotal":0,"tasks":{"done":0,"running":0,"pending":0,"blocked":0,"total":0}}`
	m, skipped, err = DecodeLenient([]byte(fs))
	if err != nil {
		t.Fatal(err)
	}
	st := m.(*FleetState)
	if skipped != 2 || len(st.Workers) != 1 || st.Workers[0].Git == nil || len(st.Workers[0].Git.Files) != 1 {
		t.Fatalf("skipped %d: %+v", skipped, st.Workers)
	}

	// What is not an entry of an array still fails, as with Decode.
	for _, bad := range []string{
		`{"type":"hydrate","conversation":[],"transcripts":[],"hub":[]}`,
		`{"type":"hydrate","conversation":{},"transcripts":[],"hub":[],"truncated":false}`,
		`{"type":"prompt"}`, `{"type":"hydrate",`,
	} {
		if m, n, err := DecodeLenient([]byte(bad)); err == nil || m != nil || n != 0 {
			t.Errorf("DecodeLenient(%s) = %v, %d, %v", bad, m, n, err)
		}
	}
	// A good frame is Decode's.
	if m, n, err := DecodeLenient([]byte(`{"type":"reply","text":"x"}`)); err != nil || n != 0 || m.(*Reply).Text != "x" {
		t.Fatalf("good frame: %v %d %v", m, n, err)
	}
}

// FuzzDecodeLenient: never panics; what it decodes re-encodes and decodes
// strictly; it succeeds wherever Decode does, with the same message.
func FuzzDecodeLenient(f *testing.F) {
	for _, b := range goldenFrames(f) {
		f.Add(b)
	}
	for _, s := range trickyFrames {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"type":"hydrate","conversation":[{"role":"user","ts":2}],"transcripts":[{"role":"assistant","text":"c","ts":3}],"hub":[],"truncated":true}`))
	f.Fuzz(func(t *testing.T, frame []byte) {
		strict, serr := Decode(frame)
		m, n, err := DecodeLenient(frame)
		switch {
		case serr == nil && (err != nil || n != 0):
			t.Fatalf("Decode succeeded, DecodeLenient: %v, %d", err, n)
		case err != nil:
			if m != nil || n != 0 {
				t.Fatalf("error %v with %v, %d", err, m, n)
			}
			return
		}
		enc, err := Encode(m)
		if errors.Is(err, ErrFrameTooLarge) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Decode(enc); err != nil {
			t.Fatalf("lenient result %s does not decode strictly: %v", enc, err)
		}
		if serr == nil {
			if senc, _ := Encode(strict); !bytes.Equal(senc, enc) {
				t.Fatalf("lenient %s, strict %s", enc, senc)
			}
		}
	})
}

// FuzzCutText: EncodedLen is what the codec writes, and CutText stays
// within its bound, keeping a prefix.
func FuzzCutText(f *testing.F) {
	for _, s := range []string{"", "a", "\"\\", "\x00\x1f", "\xff", "\u2028", "é🚀", "<>&", worstText(300)} {
		f.Add(s, 50)
	}
	f.Fuzz(func(t *testing.T, s string, max int) {
		if got, want := EncodedLen(s), len(encodedString(t, s)); got != want {
			t.Fatalf("EncodedLen(%q) = %d, the codec writes %d", s, got, want)
		}
		max = MinCut + (max&0xffff)%(len(s)*6+1)
		got := CutText(s, max)
		if EncodedLen(got) > max {
			t.Fatalf("CutText(%q, %d) = %q", s, max, got)
		}
		if got != s {
			m := markerRE.FindString(got)
			if m == "" || !strings.HasPrefix(s, strings.TrimSuffix(got, m)) {
				t.Fatalf("CutText(%q, %d) = %q", s, max, got)
			}
		}
	})
}
