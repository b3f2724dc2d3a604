package protocol

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
)

// slowTranscript encodes through the generic (encoding/json) path.
func slowTranscript(t testing.TB, m *Transcript) ([]byte, error) {
	t.Helper()
	return appendFrame(nil, TypeTranscript, m, MaxFrameSize)
}

func TestTranscriptFastPath(t *testing.T) {
	for _, m := range []*Transcript{
		{Role: RoleTool, Text: "plain"},
		{Role: RoleTool, Text: "", Agent: "w1", Ts: 1796029701035, Stream: StreamStderr},
		{Role: RoleAssistant, Text: "quote \" backslash \\ slash / <html> & amp"},
		{Role: RoleSystem, Text: "ctl \x00\x01\b\f\n\r\t\x1f\x7f end"},
		{Role: RoleTool, Text: "bad utf8 \xff\xfe \xc3 and \xe2\x80 cut"},
		{Role: RoleTool, Text: "seps \u2028 \u2029 emoji 🚀 é 中文"},
		{Role: RoleTool, Text: strings.Repeat("x", 10000), Agent: "a\"gent", Ts: -5},
		{Role: Role("weird\nrole"), Text: "t", Stream: Stream("s\u2028")},
	} {
		fast, ferr := appendTranscript(nil, m, MaxFrameSize)
		slow, serr := slowTranscript(t, m)
		if ferr != nil || serr != nil || !bytes.Equal(fast, slow) {
			t.Errorf("%+v:\nfast %q (%v)\nslow %q (%v)", m, fast, ferr, slow, serr)
		}
	}
	huge := &Transcript{Role: RoleTool, Text: strings.Repeat("y", MaxFrameSize)}
	if _, err := Encode(huge); err != ErrFrameTooLarge {
		t.Fatalf("oversized transcript: %v", err)
	}
}

func FuzzTranscriptFastPath(f *testing.F) {
	for _, s := range []string{"", "a", "\"\\", "\x00\x1f", "\xff", "\u2028", "é", "<>&"} {
		f.Add(s, "w1", int64(1), "stderr")
	}
	f.Fuzz(func(t *testing.T, text, agent string, ts int64, stream string) {
		m := &Transcript{Role: RoleTool, Text: text, Agent: agent, Ts: ts, Stream: Stream(stream)}
		fast, ferr := appendTranscript(nil, m, MaxFrameSize)
		slow, serr := slowTranscript(t, m)
		if (ferr == nil) != (serr == nil) || ferr == nil && !bytes.Equal(fast, slow) {
			t.Fatalf("fast %q (%v)\nslow %q (%v)", fast, ferr, slow, serr)
		}
	})
}

// TestPlain8: for a word with any one byte set to any value, and for
// random words, plain8 is never true for a word that needs escaping; for
// single bytes it is exact.
func TestPlain8(t *testing.T) {
	needs := func(b byte) bool { return b < 0x20 || b >= 0x80 || b == '"' || b == '\\' }
	for pos := range 8 {
		for v := range 256 {
			w := []byte("abcdefgh")
			w[pos] = byte(v)
			if got, want := plain8(string(w)), !needs(byte(v)); got != want {
				t.Errorf("plain8(%q) = %v, want %v", w, got, want)
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 1_000_000 {
		var w [8]byte
		clean := true
		for i := range w {
			w[i] = byte(rng.Uint32())
			if rng.IntN(2) == 0 { // half the bytes plain, to mix the two
				w[i] = byte(0x20 + rng.IntN(0x5f))
			}
			clean = clean && !needs(w[i])
		}
		if plain8(string(w[:])) && !clean {
			t.Fatalf("plain8(%q) = true for a word that needs escaping", w)
		}
	}
}

// plain8 is the encoder's word test on the first 8 bytes of s.
func plain8(s string) bool { return plainWord(load64(s)) }
