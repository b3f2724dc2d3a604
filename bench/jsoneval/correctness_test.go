package jsoneval

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/agents-fleet/fleet/protocol"
)

// TestDecodeMatchesStdlib requires every library to decode every golden
// frame without error into a struct reflect.DeepEqual to encoding/json's.
func TestDecodeMatchesStdlib(t *testing.T) {
	corpus, _ := loadCorpus(t)
	for _, c := range codecs {
		t.Run(c.name, func(t *testing.T) {
			for _, f := range corpus {
				want := f.new()
				if err := json.Unmarshal(f.data, want); err != nil {
					t.Fatalf("%s: encoding/json: %v", f.name, err)
				}
				got := f.new()
				if err := c.unmarshal(f.data, got); err != nil {
					t.Errorf("%s: %v", f.name, err)
					continue
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s: differs from encoding/json\n got: %#v\nwant: %#v", f.name, got, want)
				}
			}
		})
	}
}

// TestProtocolDecodeVsStdlib logs where protocol.Decode's result differs
// from bare encoding/json. Differences are by design (protocol.Decode turns
// empty optional arrays into nil, compacts nativeRoot.request, gives a roots
// result an empty Roots); the test fails only on a decode error.
func TestProtocolDecodeVsStdlib(t *testing.T) {
	corpus, _ := loadCorpus(t)
	same := 0
	for _, f := range corpus {
		want := f.new()
		if err := json.Unmarshal(f.data, want); err != nil {
			t.Fatalf("%s: encoding/json: %v", f.name, err)
		}
		got, err := protocol.Decode(f.data)
		if err != nil {
			t.Errorf("%s: protocol.Decode: %v", f.name, err)
			continue
		}
		if reflect.DeepEqual(got, want) {
			same++
			continue
		}
		t.Logf("%s: protocol.Decode differs from encoding/json (by design)\n got: %#v\nwant: %#v", f.name, got, want)
	}
	t.Logf("protocol.Decode == encoding/json on %d of %d frames", same, len(corpus))
}

// TestEncodeMatchesProtocol requires every library's encoding of the two
// benchmark messages to be byte-for-byte protocol.Encode's frame (newline
// aside), so the encode benchmarks compare equal work. Strings that need
// escaping are probed in TestEncodeProbes.
func TestEncodeMatchesProtocol(t *testing.T) {
	fs := benchFleetState()
	cases := []struct {
		name string
		m    protocol.Message
		v    any
	}{
		{"fleetState", fs, fleetStateFrame(fs)},
		{"transcript", benchTranscript, transcriptFrame(benchTranscript)},
	}
	for _, c := range codecs {
		for _, tc := range cases {
			want, err := protocol.Encode(tc.m)
			if err != nil {
				t.Fatal(err)
			}
			want = bytes.TrimSuffix(want, []byte("\n"))
			got, err := c.marshal(tc.v)
			if err != nil {
				t.Errorf("%s/%s: %v", c.name, tc.name, err)
				continue
			}
			if !bytes.Equal(got, want) {
				report := t.Errorf
				if why := encodeDiffExpected[c.name]; why != "" {
					report = t.Logf
					t.Logf("%s/%s: expected difference: %s", c.name, tc.name, why)
				}
				report("%s/%s: differs from protocol.Encode (%d vs %d bytes), first at %s", c.name, tc.name, len(got), len(want), firstDiff(got, want))
			}
		}
	}
}

// encodeDiffExpected names libraries whose output is known to differ from
// protocol.Encode under their default options, and why.
var encodeDiffExpected = map[string]string{
	"jsonv2": "v2's omitempty omits only empty JSON values (\"\", null, [], {}), so an int64 0 with omitempty (completedAt, ts) is written; the protocol would need omitzero tags or OmitEmptyWithLegacySemantics",
}

// firstDiff describes where a and b first differ, with context.
func firstDiff(a, b []byte) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	lo := max(0, i-40)
	return fmt.Sprintf("byte %d:\n got: …%s…\nwant: …%s…", i, a[lo:min(len(a), i+40)], b[lo:min(len(b), i+40)])
}

// TestEncodeProbes logs, for transcript texts that need escaping, which
// libraries write protocol.Encode's bytes (which are encoding/json's with
// HTML escaping off). It reports; it does not fail.
func TestEncodeProbes(t *testing.T) {
	probes := []struct{ name, text string }{
		{"html <>&", "a<b>&c"},
		{"U+2028/U+2029", "a\u2028b\u2029c"},
		{"invalid UTF-8", "a\xffb"},
		{"control chars", "a\x01\x1fb\x7f"},
		{"quote/backslash/tab", "a\"\\\tb"},
		{"non-ASCII", "héllo ✓ 😀"},
	}
	var rows []string
	for _, p := range probes {
		m := &protocol.Transcript{Role: protocol.RoleTool, Text: p.text}
		want, err := protocol.Encode(m)
		if err != nil {
			t.Fatal(err)
		}
		want = bytes.TrimSuffix(want, []byte("\n"))
		row := fmt.Sprintf("%-20s protocol: %s", p.name, want)
		for _, c := range codecs {
			got, err := c.marshal(transcriptFrame(m))
			switch {
			case err != nil:
				row += fmt.Sprintf("\n    %-14s ERROR %v", c.name, err)
			case bytes.Equal(got, want):
				row += fmt.Sprintf("\n    %-14s same", c.name)
			default:
				row += fmt.Sprintf("\n    %-14s DIFFERS: %s", c.name, got)
			}
		}
		rows = append(rows, row)
	}
	t.Logf("encode probes (transcript text as written):\n%s", strings.Join(rows, "\n"))
}

// decodeProbe is one edge-case frame, decoded into a Prompt, Transcript or
// Hello.
type decodeProbe struct {
	name  string
	frame string
}

var decodeProbes = []decodeProbe{
	{"exact key", `{"type":"prompt","text":"hi"}`},
	{"upper-case key TEXT", `{"type":"prompt","TEXT":"hi"}`},
	{"Kelvin sign key to\u212aen", `{"type":"hello","to` + "\u212a" + `en":"x","clientKind":"repl"}`},
	{`escaped key te\u0078t`, `{"type":"prompt","te\u0078t":"hi"}`},
	{"duplicate key", `{"type":"prompt","text":"a","text":"b"}`},
	{"duplicate key, other case", `{"type":"prompt","text":"a","Text":"b"}`},
	{"invalid UTF-8", "{\"type\":\"prompt\",\"text\":\"a\xffb\"}"},
	{`lone surrogate \ud800`, `{"type":"prompt","text":"a\ud800b"}`},
	{"raw control char", "{\"type\":\"prompt\",\"text\":\"a\x01b\"}"},
	{"unknown field", `{"type":"prompt","text":"a","extra":[1,{"x":2}]}`},
	{"trailing garbage", `{"type":"prompt","text":"a"}x`},
	{"two values", `{"type":"prompt","text":"a"} {}`},
	{"number for string", `{"type":"prompt","text":5}`},
	{"null for string", `{"type":"prompt","text":null}`},
	{"missing required text", `{"type":"prompt"}`},
	{"float for int64", `{"type":"transcript","role":"tool","text":"x","ts":1.5}`},
	{"exponent for int64", `{"type":"transcript","role":"tool","text":"x","ts":1e3}`},
	{"int64 overflow", `{"type":"transcript","role":"tool","text":"x","ts":9223372036854775808}`},
	{"not an object", `[1,2]`},
}

// probeTarget returns a fresh struct for the probe's type.
func probeTarget(frame string) protocol.Message {
	switch {
	case strings.Contains(frame, `"hello"`):
		return &protocol.Hello{}
	case strings.Contains(frame, `"transcript"`):
		return &protocol.Transcript{}
	}
	return &protocol.Prompt{}
}

func summarize(m any, err error) string {
	if err != nil {
		msg := err.Error()
		if len(msg) > 60 {
			msg = msg[:60] + "…"
		}
		return fmt.Sprintf("ERR %T (%s)", err, msg)
	}
	// %#v shows bytes exactly (e.g. "a\xffb" vs "a\ufffdb"); drop the
	// package prefix for width.
	return strings.ReplaceAll(fmt.Sprintf("%#v", reflect.ValueOf(m).Elem().Interface()), "protocol.", "")
}

// TestDecodeProbes logs how protocol.Decode and each library treat
// edge-case frames, marking where a library differs from encoding/json.
// It reports; it does not fail.
func TestDecodeProbes(t *testing.T) {
	var rows []string
	for _, p := range decodeProbes {
		data := []byte(p.frame)
		std := probeTarget(p.frame)
		stdErr := json.Unmarshal(data, std)
		stdSum := summarize(std, stdErr)
		row := fmt.Sprintf("%-28s %s", p.name, strings.ReplaceAll(fmt.Sprintf("%q", p.frame), "\\\"", "\""))
		m, err := protocol.Decode(data)
		row += fmt.Sprintf("\n    %-16s %s", "protocol.Decode", summarize(m, err))
		for _, c := range codecs {
			v := probeTarget(p.frame)
			got := summarize(v, c.unmarshal(data, v))
			mark := "  "
			if c.name != "encoding_json" && !sameOutcome(got, stdSum) {
				mark = "≠ "
			}
			row += fmt.Sprintf("\n  %s%-16s %s", mark, c.name, got)
		}
		rows = append(rows, row)
	}
	t.Logf("decode probes (≠: outcome differs from encoding/json):\n%s", strings.Join(rows, "\n"))
}

// sameOutcome compares two summaries: equal values, or both errors (error
// types and texts differ between libraries and are not counted).
func sameOutcome(a, b string) bool {
	if strings.HasPrefix(a, "ERR ") && strings.HasPrefix(b, "ERR ") {
		return true
	}
	return a == b
}
