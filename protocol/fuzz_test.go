package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"testing"
	"testing/iotest"
)

var trickyFrames = []string{
	``, `{}`, `[]`, `null`, `"type"`, `{"type":""}`, `{"type":"prompt"}`,
	`{"type":"prompt","text":"\ud800"}`, `{"type":"prompt","text":"\xff\xfe"}`,
	`{"type":"prompt","text":"a","text":"b"}`, `{"type":"prompt","text":"a","TEXT":"b"}`,
	`{"type":"prompt","text":"a","type":"prompt"}`, `{"type":"pro\u006dpt","text":"x"}`,
	`{"type":"toolCall","agent":"a","tool":"t","phase":"start","ts":1,"input":{"n":1e308,"m":-0,"a":[{}],"e":{}}}`,
	`{"type":"toolCall","agent":"a","tool":"t","phase":"start","ts":1,"input":{"n":1e999}}`,
	`{"type":"reply","text":"x","ts":-9223372036854775808}`, `{"type":"reply","text":"x","ts":9223372036854775808}`,
	`{"type":"reply","text":"x","ts":1e3}`, `{"type":"reply","text":"x","ts":-}`,
	`{"type":"status","processing":true,"workers":[]}`, `{"type":"status","processing":tru}`,
	`{"type":"nativeRoot","request":{ "a" : [ 1 , 2 ] }}`, `{"type":"nativeRoot","id":"x","request":{"a":"<&>"}}`,
	`{"type":"nativeRootResult","id":null,"result":{"kind":"roots"}}`,
	`{"type":"nativeRootResult","id":"x","result":{"kind":"roots","roots":[]}}`,
	`{"type":"hydrate","conversation":[],"transcripts":[],"hub":[{"type":"hubEvent","type":"x","from":"a","kind":"k","ts":1}],"truncated":false}`,
	`{"type":"fleetState","ts":1,"coordinator":{"isProcessing":false,"planMode":false,"dispatchPaused":false},"workers":[],"workerActive":0,"workerTotal":0,"tasks":{"done":0,"running":0,"pending":0,"blocked":0,"total":0},"session":{},"loops":[]}`,
	`{"type":"fleetIntel","ts":1,"summary":{"sessionCount":0,"totalAgentRuns":0,"failedRuns":0,"successRate":1.5e-7,"totalTokens":0,"avgSessionDurationMs":0,"topErrors":[]},"suggestions":[],"skills":[]}`,
	`{"type":"future","nested":{"type":"prompt"}}`, `{"type":"x"`, `{"type":"x",}`, `{"type":"x"}}`,
	"{\"type\":\"prompt\",\"text\":\"a\u2028b<>&\"}\r", `{"a":"\"type\":1","type":"ping"}`,
}

// FuzzDecode: Decode never panics; a decoded known message re-encodes, and
// decoding that encoding gives an equal value and the same bytes again.
func FuzzDecode(f *testing.F) {
	for _, b := range goldenFrames(f) {
		f.Add(b)
	}
	for _, s := range trickyFrames {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		m, err := Decode(frame)
		if err != nil {
			var de *DecodeError
			if !errors.As(err, &de) || m != nil {
				t.Fatalf("Decode error %T %v with message %v", err, err, m)
			}
			return
		}
		if _, err := PeekType(frame); err != nil {
			t.Fatalf("Decode succeeded but PeekType failed: %v", err)
		}
		enc, err := Encode(m)
		if errors.Is(err, ErrFrameTooLarge) {
			return
		}
		if err != nil {
			t.Fatalf("Encode(%#v): %v", m, err)
		}
		if bytes.IndexByte(enc, '\n') != len(enc)-1 {
			t.Fatalf("encoding is not one line: %q", enc)
		}
		m2, err := Decode(enc)
		if err != nil {
			t.Fatalf("Decode(Encode(m)) of %q: %v", enc, err)
		}
		if u, ok := m.(*Unknown); ok {
			if u2, ok := m2.(*Unknown); !ok || u2.Type != u.Type {
				t.Fatalf("Unknown did not round-trip: %#v", m2)
			}
			return
		}
		if !reflect.DeepEqual(m, m2) {
			t.Fatalf("round trip changed the message\nframe: %q\n  enc: %q\n  m1: %#v\n  m2: %#v", frame, enc, m, m2)
		}
		enc2, err := Encode(m2)
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("second encoding differs: %v\n%q\n%q", err, enc, enc2)
		}
	})
}

// FuzzReader: the Reader never panics, never returns a frame longer than its
// cap or containing a newline, and returns exactly the non-empty lines of
// the input until it stops.
func FuzzReader(f *testing.F) {
	f.Add([]byte("{\"a\":1}\n\n{\"b\":2}\n"), uint16(16), uint8(0))
	f.Add([]byte("aaaaaaaaaaaaaaaaaaaaaaaaaaaa\nb\n"), uint16(8), uint8(1))
	f.Add([]byte("partial"), uint16(100), uint8(2))
	f.Add(bytes.Repeat([]byte("0123456789abcdef\n"), 20), uint16(40), uint8(5))
	f.Fuzz(func(t *testing.T, data []byte, max16 uint16, mode uint8) {
		max := int(max16%1024) + 1
		var src io.Reader = bytes.NewReader(data)
		switch mode % 3 {
		case 1:
			src = iotest.OneByteReader(src)
		case 2:
			src = iotest.HalfReader(src)
		}
		// A 16-byte read buffer (bufio's minimum) makes small inputs cross
		// buffer boundaries the way big frames cross the real 4 KiB one.
		size := ReaderBufferSize
		if mode&4 != 0 {
			size = 16
		}
		var want [][]byte
		for _, l := range bytes.Split(data, []byte("\n")) {
			if len(l) > 0 {
				want = append(want, l)
			}
		}
		large := 0
		if mode&8 != 0 {
			large = 48 // switch to a (still small) large buffer and back
		}
		r := newReaderSize(src, max, size, large)
		for i := 0; ; i++ {
			frame, err := r.ReadFrame()
			if err != nil {
				switch {
				case errors.Is(err, ErrFrameTooLarge):
					if i >= len(want) || len(want[i]) <= max {
						t.Fatalf("ErrFrameTooLarge at frame %d with cap %d", i, max)
					}
				case err == io.EOF:
					if i != len(want) || (len(data) > 0 && data[len(data)-1] != '\n') {
						t.Fatalf("io.EOF after %d of %d frames", i, len(want))
					}
				case err == io.ErrUnexpectedEOF:
					if i != len(want)-1 || data[len(data)-1] == '\n' {
						t.Fatalf("io.ErrUnexpectedEOF at frame %d of %d", i, len(want))
					}
				default:
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if len(frame) > max || bytes.IndexByte(frame, '\n') >= 0 || len(frame) == 0 {
				t.Fatalf("bad frame of %d bytes (cap %d)", len(frame), max)
			}
			if i >= len(want) || !bytes.Equal(frame, want[i]) {
				t.Fatalf("frame %d = %q, want the input's line", i, frame)
			}
		}
	})
}

// FuzzParseNativeRequest: never panics; errors are typed; an accepted
// request re-marshals to something it accepts again, equal.
func FuzzParseNativeRequest(f *testing.F) {
	for _, s := range []string{
		`{"action":"list"}`,
		`{"action":"approve","rootId":"R","operationId":"op-1","expectedRevision":4,"taskId":"t","rationale":"ok","supersedes":"d"}`,
		`{"action":"status","rootId":"R","principal":"x"}`,
		`{"action":"pause","expectedRevision":"3"}`, `{"action":"pause","expectedRevision":-0}`,
		`{"action":"list","ACTION":"x"}`, `{"acti\u006fn":"list"}`, `[]`, `{}`, `{"action":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		req, err := ParseNativeRequest(raw)
		if err != nil {
			var de *DecodeError
			if !errors.As(err, &de) && !errors.Is(err, ErrFrameTooLarge) {
				t.Fatalf("untyped error %T %v", err, err)
			}
			if req != nil {
				t.Fatal("request with error")
			}
			return
		}
		_ = req.Validate() // must not panic
		b, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		req2, err := ParseNativeRequest(b)
		if err != nil {
			t.Fatalf("re-parse of %s: %v", b, err)
		}
		if !reflect.DeepEqual(req, req2) {
			t.Fatalf("re-parse differs: %+v vs %+v", req, req2)
		}
	})
}
