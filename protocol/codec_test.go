package protocol

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name, frame string
		wantType    string
		wantMsg     string
	}{
		{"invalid JSON", `{"type":"prompt","text":`, "", "invalid JSON"},
		{"garbage", `hello`, "", "invalid JSON"},
		{"empty", ``, "", "invalid JSON"},
		{"array", `[{"type":"prompt"}]`, "", "frame is not a JSON object"},
		{"string", `"prompt"`, "", "frame is not a JSON object"},
		{"null", `null`, "", "frame is not a JSON object"},
		{"missing type", `{"text":"hi"}`, "", `missing required field "type"`},
		{"number type", `{"type":5,"text":"hi"}`, "", `field "type" must be a string`},
		{"null type", `{"type":null}`, "", `field "type" must be a string`},
		{"text not string", `{"type":"prompt","text":5}`, TypePrompt, `prompt: field "text" must be a string`},
		{"text null", `{"type":"prompt","text":null}`, TypePrompt, `prompt: field "text" must be a string`},
		{"text case-folded key", `{"type":"prompt","TEXT":5}`, TypePrompt, `prompt: field "text" must be a string`},
		{"missing text", `{"type":"prompt","requestId":"r"}`, TypePrompt, `prompt: missing required field "text"`},
		{"requestId not string", `{"type":"prompt","text":"x","requestId":7}`, TypePrompt, `prompt: field "requestId" must be a string`},
		{"approve as string", `{"type":"confirmResponse","id":"c","approve":"true"}`, TypeConfirmResponse, `confirmResponse: field "approve" must be a boolean`},
		{"missing approve", `{"type":"confirmResponse","id":"c"}`, TypeConfirmResponse, `confirmResponse: missing required field "approve"`},
		{"missing token", `{"type":"hello","clientKind":"repl"}`, TypeHello, `hello: missing required field "token"`},
		{"version fraction", `{"type":"hello","token":"t","clientKind":"repl","protocolVersion":1.5}`, TypeHello, `hello: field "protocolVersion" must be an integer`},
		{"version string", `{"type":"hello","token":"t","clientKind":"repl","protocolVersion":"1"}`, TypeHello, `hello: field "protocolVersion" must be an integer`},
		{"ts overflow", `{"type":"reply","text":"x","ts":99999999999999999999}`, TypeReply, `reply: field "ts" must be an integer`},
		{"nested missing", `{"type":"fleetState","ts":1,"coordinator":{"planMode":false,"dispatchPaused":false},"workers":[],"workerActive":0,"workerTotal":0,"tasks":{"done":0,"running":0,"pending":0,"blocked":0,"total":0}}`, TypeFleetState, `fleetState: missing required field "coordinator.isProcessing"`},
		{"array element missing", `{"type":"fileChange","ts":1,"changes":[{"path":"a","absolutePath":"/a","agent":"w","tool":"t","changeType":"edited","ts":1},{"path":"b"}]}`, TypeFileChange, `fileChange: missing required field "changes[1].absolutePath"`},
		{"array element wrong", `{"type":"welcome","capabilities":["replayEnd",3]}`, TypeWelcome, `welcome: field "capabilities[1]" must be a string`},
		{"array element null", `{"type":"status","processing":true,"workers":[null]}`, TypeStatus, `status: field "workers[0]" must be an object`},
		{"required array null", `{"type":"fileChange","ts":1,"changes":null}`, TypeFileChange, `fileChange: field "changes" must be an array`},
		{"required array object", `{"type":"commandCatalog","commands":{}}`, TypeCommandCatalog, `commandCatalog: field "commands" must be an array`},
		{"input not object", `{"type":"toolCall","agent":"a","tool":"t","phase":"start","ts":1,"input":[1]}`, TypeToolCall, `toolCall: field "input" must be an object`},
		{"rate as string", `{"type":"fleetIntel","ts":1,"summary":{"sessionCount":0,"totalAgentRuns":0,"failedRuns":0,"successRate":"1","totalTokens":0,"avgSessionDurationMs":0,"topErrors":[]},"suggestions":[],"skills":[]}`, TypeFleetIntel, `fleetIntel: field "summary.successRate" must be a number`},
		{"duplicate type", `{"type":"prompt","text":"x","type":"reply"}`, TypePrompt, `prompt: duplicate field "type"`},
		{"duplicate type unknown", `{"type":"zzz","type":"prompt","text":"x"}`, "", `duplicate field "type"`},
		{"invalid JSON unknown type", `{"type":"zzz",}`, "", "invalid JSON"},
		{"nativeRoot id number", `{"type":"nativeRoot","id":1,"request":{}}`, TypeNativeRoot, `nativeRoot: field "id" must be a string`},
		{"nativeRoot id null", `{"type":"nativeRoot","id":null,"request":{}}`, TypeNativeRoot, `nativeRoot: field "id" must be a string`},
		{"nativeRoot no request", `{"type":"nativeRoot","id":"x"}`, TypeNativeRoot, `nativeRoot: missing required field "request"`},
		{"nativeRoot request array", `{"type":"nativeRoot","id":"x","request":[]}`, TypeNativeRoot, `nativeRoot: field "request" must be an object`},
		{"nativeRoot request null", `{"type":"nativeRoot","id":"x","request":null}`, TypeNativeRoot, `nativeRoot: field "request" must be an object`},
		{"nativeRootResult no id", `{"type":"nativeRootResult","result":{"kind":"error"}}`, TypeNativeRootResult, `nativeRootResult: missing required field "id"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Decode([]byte(tt.frame))
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("Decode(%s) = %#v, %v; want *DecodeError", tt.frame, m, err)
			}
			if m != nil {
				t.Errorf("Decode returned a message with an error: %#v", m)
			}
			if de.Type != tt.wantType || de.Msg != tt.wantMsg || de.Error() != tt.wantMsg {
				t.Errorf("Decode(%s) error = {Type:%q Msg:%q}, want {Type:%q Msg:%q}", tt.frame, de.Type, de.Msg, tt.wantType, tt.wantMsg)
			}
		})
	}
}

func TestDecodeAccepts(t *testing.T) {
	tests := []struct {
		frame string
		want  Message
	}{
		// Trailing newline, whitespace, unknown fields, case-folded keys.
		{"{\"type\":\"prompt\",\"text\":\"hi\"}\n", &Prompt{Text: "hi"}},
		{" { \"type\" : \"prompt\" , \"text\" : \"hi\" , \"extra\" : {\"a\":[1,2]} }\r", &Prompt{Text: "hi"}},
		{`{"text":"hi","type":"prompt"}`, &Prompt{Text: "hi"}},
		{`{"type":"prompt","Text":"hi"}`, &Prompt{Text: "hi"}},
		{`{"typ\u0065":"pro\u006dpt","text":"\u003chi\u003e"}`, &Prompt{Text: "<hi>"}},
		// Null for an optional field is "absent".
		{`{"type":"prompt","text":"hi","requestId":null}`, &Prompt{Text: "hi"}},
		// Empty optional arrays and objects decode as nil.
		{`{"type":"status","processing":true,"workers":[]}`, &Status{Processing: true}},
		{`{"type":"toolCall","agent":"a","tool":"t","phase":"start","ts":1,"input":{}}`, &ToolCall{Agent: "a", Tool: "t", Phase: PhaseStart, Ts: 1}},
		{`{"type":"fleetState","ts":1,"coordinator":{"isProcessing":false,"planMode":false,"dispatchPaused":false},"workers":[{"id":"w","name":"w","status":"idle","toolUseCount":0,"tokenCount":0,"topTools":[]}],"workerActive":0,"workerTotal":1,"tasks":{"done":0,"running":0,"pending":0,"blocked":0,"total":0,"items":[]}}`,
			&FleetState{Ts: 1, Workers: []FleetWorkerSummary{{ID: "w", Name: "w", Status: "idle"}}, WorkerTotal: 1}},
		// Required empty arrays stay non-nil.
		{`{"type":"fileChange","ts":2,"changes":[]}`, &FileChange{Ts: 2, Changes: []FileChangeEntry{}}},
		// Unknown enum values pass (forward compatible).
		{`{"type":"transcript","role":"narrator","text":"x"}`, &Transcript{Role: "narrator", Text: "x"}},
		{`{"type":"confirmResolved","id":"c","approved":false,"kind":"poll","reason":"vetoed"}`, &ConfirmResolved{ID: "c", Kind: "poll", Reason: "vetoed"}},
		// Known zeros in optional pointers survive.
		{`{"type":"status","processing":false,"tasksDone":0}`, &Status{TasksDone: Int(0)}},
		// nativeRoot: request compacted, id optional.
		{`{"type":"nativeRoot","request":{ "action" : "list" }}`, &NativeRoot{Request: []byte(`{"action":"list"}`)}},
		{`{"type":"nativeRootResult","id":null,"result":{"kind":"roots"}}`, &NativeRootResult{Result: NativeResult{Kind: NativeKindRoots, Roots: []NativeRootInfo{}}}},
		// Unknown type.
		{"{\"type\":\"futureThing\",\"x\":1}\n", &Unknown{Type: "futureThing", Raw: []byte(`{"type":"futureThing","x":1}`)}},
	}
	for _, tt := range tests {
		got, err := Decode([]byte(tt.frame))
		if err != nil {
			t.Errorf("Decode(%q): %v", tt.frame, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Decode(%q)\n got %#v\nwant %#v", tt.frame, got, tt.want)
		}
	}
}

func TestDecodeUnknownCopiesFrame(t *testing.T) {
	frame := []byte(`{"type":"later","a":1}`)
	m, err := Decode(frame)
	if err != nil {
		t.Fatal(err)
	}
	u := m.(*Unknown)
	frame[2] = 'X'
	if string(u.Raw) != `{"type":"later","a":1}` || u.MessageType() != "later" {
		t.Fatalf("Unknown = %q %q", u.Type, u.Raw)
	}
	out, err := Encode(u)
	if err != nil || string(out) != "{\"type\":\"later\",\"a\":1}\n" {
		t.Fatalf("Encode(Unknown) = %q, %v", out, err)
	}
	// Pretty Raw is compacted to one line; a non-object Raw is refused.
	out, err = Encode(&Unknown{Type: "x", Raw: []byte("{\n \"type\": \"x\"\n}\n")})
	if err != nil || string(out) != "{\"type\":\"x\"}\n" {
		t.Fatalf("Encode(pretty Unknown) = %q, %v", out, err)
	}
	if _, err := Encode(&Unknown{Type: "x", Raw: []byte(`[1]`)}); err == nil {
		t.Fatal("Encode accepted a non-object Raw")
	}
	out, err = Encode(Unknown{Type: "bare"})
	if err != nil || string(out) != "{\"type\":\"bare\"}\n" {
		t.Fatalf("Encode(Unknown without Raw) = %q, %v", out, err)
	}
}

func TestPeekType(t *testing.T) {
	for frame, want := range map[string]string{
		`{"type":"prompt"}`:                         "prompt",
		"{\"type\":\"prompt\"}\n":                   "prompt",
		`{"a":{"type":"inner"},"type":"outer"}`:     "outer",
		`{"a":"}\"type\":","b":[{}],"type":"real"}`: "real",
		`{"type":"x\"y"}`:                           `x"y`,
	} {
		got, err := PeekType([]byte(frame))
		if err != nil || got != want {
			t.Errorf("PeekType(%s) = %q, %v; want %q", frame, got, err, want)
		}
	}
	for _, frame := range []string{``, `[]`, `{}`, `{"type":1}`, `{"type":`, `{"a":1`, `{"type"`} {
		if _, err := PeekType([]byte(frame)); err == nil {
			t.Errorf("PeekType(%s) succeeded", frame)
		} else if _, ok := err.(*DecodeError); !ok {
			t.Errorf("PeekType(%s) error %T, want *DecodeError", frame, err)
		}
	}
}

func TestEncodeTooLarge(t *testing.T) {
	// {"type":"error","message":"…"} is 29 bytes plus the text.
	const overhead = len(`{"type":"error","message":""}`)
	fits := &Error{Message: strings.Repeat("a", MaxFrameSize-overhead)}
	b, err := Encode(fits)
	if err != nil || len(b) != MaxFrameSize+1 {
		t.Fatalf("frame of exactly MaxFrameSize: len %d, %v", len(b), err)
	}
	dst := []byte("keep")
	big := &Error{Message: strings.Repeat("a", MaxFrameSize-overhead+1)}
	out, err := AppendEncode(dst, big)
	if !errors.Is(err, ErrFrameTooLarge) || string(out) != "keep" {
		t.Fatalf("oversized: %v, dst %q", err, out[:min(len(out), 10)])
	}
	// Escaping counts: 200k quotes become 400k bytes, 600k exceed the cap.
	if _, err := Encode(&Transcript{Text: strings.Repeat(`"`, 600<<10)}); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("escaped oversize: %v", err)
	}
	if _, err := Encode(&Unknown{Type: "x", Raw: []byte(`{"type":"x","a":"` + strings.Repeat("b", MaxFrameSize) + `"}`)}); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("oversized Unknown: %v", err)
	}
}

func TestEncodeNoHTMLEscapingAndNilMessages(t *testing.T) {
	b, err := Encode(&Transcript{Role: RoleTool, Text: "<a> & </a>"})
	if err != nil || !bytes.Contains(b, []byte(`"<a> & </a>"`)) {
		t.Fatalf("Encode = %s, %v", b, err)
	}
	b, err = Encode(&FleetState{Workers: []FleetWorkerSummary{{Name: "<w&1>"}}})
	if err != nil || !bytes.Contains(b, []byte(`"<w&1>"`)) {
		t.Fatalf("nested Encode = %s, %v", b, err)
	}
	for _, m := range []Message{nil, (*Prompt)(nil), (*HubEvent)(nil), (*Unknown)(nil), (*FleetState)(nil)} {
		if _, err := Encode(m); err == nil {
			t.Errorf("Encode(%#v) succeeded", m)
		}
	}
}

func TestCapabilitiesFresh(t *testing.T) {
	a := Capabilities()
	if !reflect.DeepEqual(a, []string{"replayEnd", "confirmResolvedReason", "requestIdEcho"}) {
		t.Fatalf("Capabilities = %v", a)
	}
	a[0] = "changed"
	if Capabilities()[0] != CapReplayEnd {
		t.Fatal("Capabilities shares its slice")
	}
	if Version != 1 || MaxFrameSize != 1<<20 || MaxNativeFrameSize != 16<<10 {
		t.Fatal("constants changed")
	}
	if *Int(0) != 0 || *Float(1.5) != 1.5 || *Bool(false) || *String("x") != "x" {
		t.Fatal("constructors")
	}
}
