package jsoneval

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/agents-fleet/fleet/protocol"
)

// goldenDir is the protocol package's golden corpus, read in place.
const goldenDir = "../../protocol/testdata/golden"

// newFunc returns a fresh *T for a message type, as the protocol registry
// does (the registry is unexported, so this is a copy of it).
func newFunc[T any, PT interface {
	*T
	protocol.Message
}]() func() protocol.Message {
	return func() protocol.Message { return PT(new(T)) }
}

// messageTypes maps every protocol type name to a constructor of its struct.
var messageTypes = map[string]func() protocol.Message{
	protocol.TypeHello:            newFunc[protocol.Hello](),
	protocol.TypePrompt:           newFunc[protocol.Prompt](),
	protocol.TypeConfirmResponse:  newFunc[protocol.ConfirmResponse](),
	protocol.TypeAskResponse:      newFunc[protocol.AskResponse](),
	protocol.TypePing:             newFunc[protocol.Ping](),
	protocol.TypeNativeRoot:       newFunc[protocol.NativeRoot](),
	protocol.TypeNativeRootResult: newFunc[protocol.NativeRootResult](),
	protocol.TypeWelcome:          newFunc[protocol.Welcome](),
	protocol.TypeUserMessage:      newFunc[protocol.UserMessage](),
	protocol.TypeReply:            newFunc[protocol.Reply](),
	protocol.TypeStatus:           newFunc[protocol.Status](),
	protocol.TypeConfirmRequest:   newFunc[protocol.ConfirmRequest](),
	protocol.TypeAskRequest:       newFunc[protocol.AskRequest](),
	protocol.TypeConfirmResolved:  newFunc[protocol.ConfirmResolved](),
	protocol.TypeReplayEnd:        newFunc[protocol.ReplayEnd](),
	protocol.TypeError:            newFunc[protocol.Error](),
	protocol.TypePong:             newFunc[protocol.Pong](),
	protocol.TypeTranscript:       newFunc[protocol.Transcript](),
	protocol.TypeFleetState:       newFunc[protocol.FleetState](),
	protocol.TypeFleetAnalytics:   newFunc[protocol.FleetAnalytics](),
	protocol.TypeFileChange:       newFunc[protocol.FileChange](),
	protocol.TypeToolCall:         newFunc[protocol.ToolCall](),
	protocol.TypeHubEvent:         newFunc[protocol.HubEvent](),
	protocol.TypeHydrate:          newFunc[protocol.Hydrate](),
	protocol.TypeCommandCatalog:   newFunc[protocol.CommandCatalog](),
	protocol.TypeFleetIntel:       newFunc[protocol.FleetIntel](),
	protocol.TypeFleetEvolution:   newFunc[protocol.FleetEvolution](),
	protocol.TypeFleetStore:       newFunc[protocol.FleetStore](),
	protocol.TypeFleetExperiment:  newFunc[protocol.FleetExperiment](),
}

// frame is one golden frame with the constructor of its message struct.
type frame struct {
	name string
	typ  string
	data []byte
	new  func() protocol.Message
}

// loadCorpus reads the golden frames sorted by file name, the order
// protocol's BenchmarkDecodeMixed uses, and returns them with their total
// size in bytes.
func loadCorpus(tb testing.TB) ([]frame, int) {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join(goldenDir, "*.json"))
	if err != nil || len(files) == 0 {
		tb.Fatalf("no golden files in %s: %v", goldenDir, err)
	}
	sort.Strings(files)
	var out []frame
	total := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		typ, err := protocol.PeekType(b)
		if err != nil {
			tb.Fatalf("%s: %v", f, err)
		}
		nf := messageTypes[typ]
		if nf == nil {
			tb.Fatalf("%s: type %q not in messageTypes", f, typ)
		}
		out = append(out, frame{strings.TrimSuffix(filepath.Base(f), ".json"), typ, b, nf})
		total += len(b)
	}
	return out, total
}

// The encode inputs are copies of protocol/bench_test.go's.

// benchTranscript is a typical ~200-byte transcript frame.
var benchTranscript = &protocol.Transcript{
	Role:  protocol.RoleTool,
	Text:  "=== RUN   TestReaderSplitsAcrossReadBoundaries/onebyte --- PASS: TestReaderSplitsAcrossReadBoundaries/onebyte (0.00s) ok",
	Agent: "w3-build",
	Ts:    1767225600456,
}

func benchFleetState() *protocol.FleetState {
	fs := &protocol.FleetState{
		Ts:           1767225600000,
		Coordinator:  protocol.FleetCoordinatorState{SessionID: "s-20260101-ab12", IsProcessing: true},
		WorkerActive: 6, WorkerTotal: 8,
		Tasks:              protocol.FleetTaskSummary{Done: 10, Running: 6, Pending: 4, Total: 20},
		Session:            &protocol.FleetSessionInfo{Model: "local", Provider: "local", Uptime: protocol.Int(3600000)},
		Tokens:             &protocol.FleetTokenState{ContextTokens: protocol.Int(0), TotalTokens: protocol.Int(0)},
		WorkerStatusCounts: &protocol.FleetWorkerStatusCounts{Running: 6, Idle: 0, Completed: 2},
		WorkerMax:          protocol.Int(8),
	}
	for i := range 8 {
		fs.Workers = append(fs.Workers, protocol.FleetWorkerSummary{
			ID: fmt.Sprintf("w%d", i), Name: fmt.Sprintf("worker-%d", i), Status: protocol.WorkerRunning,
			ToolUseCount: int64(i * 3), AgentType: "local", TaskID: fmt.Sprintf("t-%d", i),
			StartedAt: 1767225500000, LastActivityAt: 1767225599000,
			WorktreePath: fmt.Sprintf("/home/op/.fleet/worktrees/s-1/w%d", i),
			TopTools:     []string{"shell"}, RecentActivity: "shell: go test ./...",
			InputTokens: protocol.Int(0), OutputTokens: protocol.Int(0), DurationMs: protocol.Int(100000),
		})
	}
	return fs
}

// The libraries encode these method-less mirrors: FleetState's MarshalJSON
// (which only turns a nil Workers into []) calls encoding/json, so encoding
// *protocol.FleetState with another library would mostly measure
// encoding/json (see BenchmarkEncodeFleetStateDropIn). The "type" key comes
// first, as protocol.Encode writes it. FleetState's nested types have no
// methods of their own.

// FleetStatePlain is protocol.FleetState without its methods.
type FleetStatePlain protocol.FleetState

// FleetStateFrame is a fleetState frame's object.
type FleetStateFrame struct {
	Type string `json:"type"`
	FleetStatePlain
}

// TranscriptFrame is a transcript frame's object.
type TranscriptFrame struct {
	Type string `json:"type"`
	protocol.Transcript
}

func fleetStateFrame(fs *protocol.FleetState) *FleetStateFrame {
	return &FleetStateFrame{Type: protocol.TypeFleetState, FleetStatePlain: FleetStatePlain(*fs)}
}

func transcriptFrame(t *protocol.Transcript) *TranscriptFrame {
	return &TranscriptFrame{Type: protocol.TypeTranscript, Transcript: *t}
}
