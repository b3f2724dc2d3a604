package protocol

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// wantGoType maps every wire type to the Go type Decode must return. It is
// written out by hand so that it checks the registry rather than mirrors it.
var wantGoType = map[string]Message{
	TypeHello:            (*Hello)(nil),
	TypePrompt:           (*Prompt)(nil),
	TypeConfirmResponse:  (*ConfirmResponse)(nil),
	TypeAskResponse:      (*AskResponse)(nil),
	TypePing:             (*Ping)(nil),
	TypeNativeRoot:       (*NativeRoot)(nil),
	TypeNativeRootResult: (*NativeRootResult)(nil),
	TypeWelcome:          (*Welcome)(nil),
	TypeUserMessage:      (*UserMessage)(nil),
	TypeReply:            (*Reply)(nil),
	TypeStatus:           (*Status)(nil),
	TypeConfirmRequest:   (*ConfirmRequest)(nil),
	TypeAskRequest:       (*AskRequest)(nil),
	TypeConfirmResolved:  (*ConfirmResolved)(nil),
	TypeReplayEnd:        (*ReplayEnd)(nil),
	TypeError:            (*Error)(nil),
	TypePong:             (*Pong)(nil),
	TypeTranscript:       (*Transcript)(nil),
	TypeFleetState:       (*FleetState)(nil),
	TypeFleetAnalytics:   (*FleetAnalytics)(nil),
	TypeFileChange:       (*FileChange)(nil),
	TypeToolCall:         (*ToolCall)(nil),
	TypeHubEvent:         (*HubEvent)(nil),
	TypeHydrate:          (*Hydrate)(nil),
	TypeCommandCatalog:   (*CommandCatalog)(nil),
	TypeFleetIntel:       (*FleetIntel)(nil),
	TypeFleetEvolution:   (*FleetEvolution)(nil),
	TypeFleetStore:       (*FleetStore)(nil),
	TypeFleetExperiment:  (*FleetExperiment)(nil),
}

// goldenFrames returns the golden frames by file name (without .json).
func goldenFrames(tb testing.TB) map[string][]byte {
	tb.Helper()
	files, err := filepath.Glob("testdata/golden/*.json")
	if err != nil || len(files) == 0 {
		tb.Fatalf("no golden files: %v", err)
	}
	out := make(map[string][]byte, len(files))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		out[strings.TrimSuffix(filepath.Base(f), ".json")] = b
	}
	return out
}

func TestRegistryMatchesTypes(t *testing.T) {
	if got := len(Types()); got != 29 || len(wantGoType) != 29 {
		t.Fatalf("Types() has %d types, table %d; want 29", got, len(wantGoType))
	}
	for _, typ := range Types() {
		want, ok := wantGoType[typ]
		if !ok {
			t.Errorf("registry type %q missing from test table", typ)
			continue
		}
		if got := reflect.TypeOf(want).Elem(); reflect.New(got).Interface().(Message).MessageType() != typ {
			t.Errorf("%s.MessageType() != %q", got, typ)
		}
	}
	for _, typ := range []string{TypeHello, TypePrompt, TypeConfirmResponse, TypeAskResponse, TypePing, TypeNativeRoot} {
		if !FromClient(typ) {
			t.Errorf("FromClient(%q) = false", typ)
		}
	}
	if FromClient(TypeWelcome) || FromClient("nope") {
		t.Error("FromClient true for a server type or an unknown type")
	}
}

// TestGoldenRoundTrip decodes every golden frame, checks the Go type, and
// re-encodes it: the bytes must be identical.
func TestGoldenRoundTrip(t *testing.T) {
	covered := map[string]bool{}
	for name, frame := range goldenFrames(t) {
		t.Run(name, func(t *testing.T) {
			typ, _, _ := strings.Cut(name, "_")
			if bytes.Count(frame, []byte("\n")) != 1 || frame[len(frame)-1] != '\n' {
				t.Fatalf("golden file must be exactly one line ending in a newline")
			}
			want, ok := wantGoType[typ]
			if !ok {
				t.Fatalf("file name %q does not start with a known type", name)
			}
			covered[typ] = true
			if pt, err := PeekType(frame); err != nil || pt != typ {
				t.Fatalf("PeekType = %q, %v; want %q", pt, err, typ)
			}
			m, err := Decode(frame)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if reflect.TypeOf(m) != reflect.TypeOf(want) {
				t.Fatalf("Decode returned %T, want %T", m, want)
			}
			got, err := Encode(m)
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			if !bytes.Equal(got, frame) {
				t.Fatalf("re-encoding differs\n got: %s\nwant: %s", got, frame)
			}
			// The value form encodes the same as the pointer form.
			got2, err := Encode(reflect.ValueOf(m).Elem().Interface().(Message))
			if err != nil || !bytes.Equal(got2, frame) {
				t.Fatalf("value encoding differs: %v\n got: %s", err, got2)
			}
			// AppendEncode appends after existing bytes.
			prefix := []byte("xyz")
			got3, err := AppendEncode(prefix, m)
			if err != nil || string(got3[:3]) != "xyz" || !bytes.Equal(got3[3:], frame) {
				t.Fatalf("AppendEncode: %v %q", err, got3)
			}
		})
	}
	for typ := range wantGoType {
		if !covered[typ] {
			t.Errorf("no golden frame for type %q", typ)
		}
	}
}

// TestZeroValuesEncodeRequiredFields encodes every message with zero values:
// all required fields must be present, arrays as [], and nothing optional.
func TestZeroValuesEncodeRequiredFields(t *testing.T) {
	tests := []struct {
		m    Message
		want string
	}{
		{Hello{}, `{"type":"hello","token":"","clientKind":""}`},
		{Prompt{}, `{"type":"prompt","text":""}`},
		{ConfirmResponse{}, `{"type":"confirmResponse","id":"","approve":false}`},
		{AskResponse{}, `{"type":"askResponse","id":"","text":""}`},
		{Ping{}, `{"type":"ping"}`},
		{NativeRoot{}, `{"type":"nativeRoot","id":"","request":{}}`},
		{NativeRootResult{}, `{"type":"nativeRootResult","id":null,"result":{"kind":""}}`},
		{NativeRootResult{Result: NativeResult{Kind: NativeKindRoots}}, `{"type":"nativeRootResult","id":null,"result":{"kind":"roots","roots":[]}}`},
		{NativeRootResult{Result: NativeResult{Kind: NativeKindStatus, Root: &NativeRootStatus{}}}, `{"type":"nativeRootResult","id":null,"result":{"kind":"status","root":{"id":"","revision":0,"intent":"","phase":"","grant":{"sessionId":"","policyVersion":"","grantedAt":0},"tasks":[],"holds":[],"decisions":[],"effects":[],"pendingReceipts":[]}}}`},
		{Welcome{}, `{"type":"welcome"}`},
		{UserMessage{}, `{"type":"userMessage","source":"","text":""}`},
		{Reply{}, `{"type":"reply","text":""}`},
		{Status{}, `{"type":"status","processing":false}`},
		{ConfirmRequest{}, `{"type":"confirmRequest","id":"","summary":""}`},
		{AskRequest{}, `{"type":"askRequest","id":"","question":"","kind":""}`},
		{ConfirmResolved{}, `{"type":"confirmResolved","id":"","approved":false}`},
		{ReplayEnd{}, `{"type":"replayEnd"}`},
		{Error{}, `{"type":"error","message":""}`},
		{Pong{}, `{"type":"pong"}`},
		{Transcript{}, `{"type":"transcript","role":"","text":""}`},
		{FleetState{}, `{"type":"fleetState","ts":0,"coordinator":{"isProcessing":false,"planMode":false,"dispatchPaused":false},"workers":[],"workerActive":0,"workerTotal":0,"tasks":{"done":0,"running":0,"pending":0,"blocked":0,"total":0}}`},
		{FleetState{WorkerStatusCounts: &FleetWorkerStatusCounts{}, Workers: []FleetWorkerSummary{{}}, Loops: []FleetLoopSummary{{}}}, `{"type":"fleetState","ts":0,"coordinator":{"isProcessing":false,"planMode":false,"dispatchPaused":false},"workers":[{"id":"","name":"","status":"","toolUseCount":0,"tokenCount":0}],"workerActive":0,"workerTotal":0,"tasks":{"done":0,"running":0,"pending":0,"blocked":0,"total":0},"workerStatusCounts":{"running":0,"idle":0,"completed":0,"failed":0},"loops":[{"id":"","goal":"","iteration":0,"max":0,"status":""}]}`},
		{FleetState{Workers: []FleetWorkerSummary{{Git: &WorkerGit{Files: []WorkerGitFile{{}}}}}}, `{"type":"fleetState","ts":0,"coordinator":{"isProcessing":false,"planMode":false,"dispatchPaused":false},"workers":[{"id":"","name":"","status":"","toolUseCount":0,"tokenCount":0,"git":{"branch":"","ahead":0,"behind":0,"uncommitted":0,"filesChanged":0,"linesAdded":0,"linesRemoved":0,"files":[{"path":"","status":"","added":0,"removed":0}],"merged":false}}],"workerActive":0,"workerTotal":0,"tasks":{"done":0,"running":0,"pending":0,"blocked":0,"total":0}}`},
		{FleetAnalytics{}, `{"type":"fleetAnalytics","ts":0,"toolUsage":[],"workerTimeline":[]}`},
		{FileChange{}, `{"type":"fileChange","ts":0,"changes":[]}`},
		{FileChange{Changes: []FileChangeEntry{{}}}, `{"type":"fileChange","ts":0,"changes":[{"path":"","absolutePath":"","agent":"","tool":"","changeType":"","ts":0}]}`},
		{ToolCall{}, `{"type":"toolCall","agent":"","tool":"","phase":"","ts":0}`},
		{HubEvent{}, `{"type":"hubEvent","from":"","kind":"","ts":0}`},
		{Hydrate{}, `{"type":"hydrate","conversation":[],"transcripts":[],"hub":[],"truncated":false}`},
		{Hydrate{Hub: []HubEvent{{}}}, `{"type":"hydrate","conversation":[],"transcripts":[],"hub":[{"type":"hubEvent","from":"","kind":"","ts":0}],"truncated":false}`},
		{CommandCatalog{}, `{"type":"commandCatalog","commands":[]}`},
		{FleetIntel{}, `{"type":"fleetIntel","ts":0,"summary":{"sessionCount":0,"totalAgentRuns":0,"failedRuns":0,"successRate":0,"totalTokens":0,"avgSessionDurationMs":0,"topErrors":[]},"suggestions":[],"skills":[]}`},
		{FleetEvolution{}, `{"type":"fleetEvolution","ts":0,"shadows":[],"timeline":[],"skills":[]}`},
		{FleetStore{}, `{"type":"fleetStore","ts":0,"counts":[],"sessions":[],"steering":[]}`},
		{FleetExperiment{}, `{"type":"fleetExperiment","ts":0,"experiments":[]}`},
		{FleetExperiment{Experiments: []FleetExperimentEntry{{LatestRun: &FleetExperimentRun{}}}}, `{"type":"fleetExperiment","ts":0,"experiments":[{"id":"","name":"","status":"","variants":[],"createdAt":0,"latestRun":{"id":"","startedAt":0,"variants":[]}}]}`},
		// Known zeros in optional pointer fields are sent.
		{Status{RunningFleets: Int(0), TasksDone: Int(0)}, `{"type":"status","processing":false,"runningFleets":0,"tasksDone":0}`},
		{AskRequest{AllowFreeform: Bool(false)}, `{"type":"askRequest","id":"","question":"","kind":"","allowFreeform":false}`},
		{ToolCall{IsError: Bool(false), DurationMs: Int(0)}, `{"type":"toolCall","agent":"","tool":"","phase":"","ts":0,"isError":false,"durationMs":0}`},
		{Reply{IsError: Bool(false)}, `{"type":"reply","text":"","isError":false}`},
	}
	for _, tt := range tests {
		got, err := Encode(tt.m)
		if err != nil {
			t.Errorf("Encode(%T): %v", tt.m, err)
			continue
		}
		if string(got) != tt.want+"\n" {
			t.Errorf("Encode(%T)\n got: %s want: %s", tt.m, got, tt.want)
		}
		// Whatever Encode writes, Decode accepts.
		if _, err := Decode(got); err != nil {
			t.Errorf("Decode(Encode(%T)): %v", tt.m, err)
		}
	}
}

// TestHubEventMarshalJSON: json.Marshal of a HubEvent, alone or nested,
// writes the type key exactly once, first.
func TestHubEventMarshalJSON(t *testing.T) {
	ev := HubEvent{From: "w1", Kind: HubCompleted, Ts: 5}
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"type":"hubEvent","from":"w1","kind":"completed","ts":5}`
	if string(b) != want {
		t.Fatalf("json.Marshal = %s, want %s", b, want)
	}
	frame, _ := Encode(&ev)
	if string(frame) != want+"\n" {
		t.Fatalf("Encode = %s", frame)
	}
	var back HubEvent
	if err := json.Unmarshal(b, &back); err != nil || back != ev {
		t.Fatalf("Unmarshal = %+v, %v", back, err)
	}
	if err := json.Unmarshal([]byte(`{"type":"reply","from":"x"}`), &back); err == nil {
		t.Fatal("Unmarshal accepted a hubEvent object with another type")
	}
	if _, err := Decode([]byte(`{"type":"hydrate","conversation":[],"transcripts":[],"hub":[{"type":"reply","from":"a","kind":"k","ts":1}],"truncated":false}`)); err == nil ||
		err.Error() != `hydrate: field "hub[0].type" must be "hubEvent"` {
		t.Fatalf("nested hub event with wrong type: %v", err)
	}
	// A nested hub event without a type key is accepted.
	m, err := Decode([]byte(`{"type":"hydrate","conversation":[],"transcripts":[],"hub":[{"from":"a","kind":"k","ts":1}],"truncated":false}`))
	if err != nil || m.(*Hydrate).Hub[0].From != "a" {
		t.Fatalf("nested hub event without type: %v", err)
	}
}
