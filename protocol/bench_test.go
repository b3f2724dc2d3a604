package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"testing"
)

// benchTranscript is a typical ~200-byte transcript frame.
var benchTranscript = &Transcript{
	Role:  RoleTool,
	Text:  "=== RUN   TestReaderSplitsAcrossReadBoundaries/onebyte --- PASS: TestReaderSplitsAcrossReadBoundaries/onebyte (0.00s) ok",
	Agent: "w3-build",
	Ts:    1767225600456,
}

func benchFleetState() *FleetState {
	fs := &FleetState{
		Ts:           1767225600000,
		Coordinator:  FleetCoordinatorState{SessionID: "s-20260101-ab12", IsProcessing: true},
		WorkerActive: 6, WorkerTotal: 8,
		Tasks:              FleetTaskSummary{Done: 10, Running: 6, Pending: 4, Total: 20},
		Session:            &FleetSessionInfo{Model: "local", Provider: "local", Uptime: Int(3600000)},
		Tokens:             &FleetTokenState{ContextTokens: Int(0), TotalTokens: Int(0)},
		WorkerStatusCounts: &FleetWorkerStatusCounts{Running: 6, Idle: 0, Completed: 2},
		WorkerMax:          Int(8),
	}
	for i := range 8 {
		fs.Workers = append(fs.Workers, FleetWorkerSummary{
			ID: fmt.Sprintf("w%d", i), Name: fmt.Sprintf("worker-%d", i), Status: WorkerRunning,
			ToolUseCount: int64(i * 3), AgentType: "local", TaskID: fmt.Sprintf("t-%d", i),
			StartedAt: 1767225500000, LastActivityAt: 1767225599000,
			WorktreePath: fmt.Sprintf("/home/op/.fleet/worktrees/s-1/w%d", i),
			TopTools:     []string{"shell"}, RecentActivity: "shell: go test ./...",
			InputTokens: Int(0), OutputTokens: Int(0), DurationMs: Int(100000),
		})
	}
	return fs
}

func BenchmarkEncodeTranscript(b *testing.B) {
	frame, _ := Encode(benchTranscript)
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	var buf []byte
	for b.Loop() {
		var err error
		buf, err = AppendEncode(buf[:0], benchTranscript)
		if err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeFleetState(b *testing.B) {
	fs := benchFleetState()
	frame, _ := Encode(fs)
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	var buf []byte
	for b.Loop() {
		var err error
		buf, err = AppendEncode(buf[:0], fs)
		if err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeTranscript(b *testing.B) {
	frame, _ := Encode(benchTranscript)
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(frame); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeMixed(b *testing.B) {
	golden := goldenFrames(b)
	names := make([]string, 0, len(golden))
	for n := range golden {
		names = append(names, n)
	}
	sort.Strings(names)
	var frames [][]byte
	total := 0
	for _, n := range names {
		frames = append(frames, golden[n])
		total += len(golden[n])
	}
	b.SetBytes(int64(total))
	b.ReportAllocs()
	for b.Loop() {
		for _, f := range frames {
			if _, err := Decode(f); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func BenchmarkReader(b *testing.B) {
	// 1000 transcript frames and one 10 KiB frame that spans buffer fills.
	var stream bytes.Buffer
	frame, _ := Encode(benchTranscript)
	for range 1000 {
		stream.Write(frame)
	}
	big, _ := Encode(&Reply{Text: strings.Repeat("x", 10<<10)})
	stream.Write(big)
	data := stream.Bytes()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	src := bytes.NewReader(data)
	for b.Loop() {
		src.Reset(data)
		r := NewReader(src, 0)
		n := 0
		for {
			_, err := r.ReadFrame()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		if n != 1001 {
			b.Fatalf("read %d frames", n)
		}
	}
}

// BenchmarkDecodeMixedStdlib is the baseline for BenchmarkDecodeMixed:
// encoding/json alone decoding the same corpus into the same typed structs,
// with no type peek, required-field or field-type checks.
func BenchmarkDecodeMixedStdlib(b *testing.B) {
	golden := goldenFrames(b)
	type entry struct {
		frame []byte
		new   func() any
	}
	var corpus []entry
	total := 0
	names := make([]string, 0, len(golden))
	for n := range golden {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		f := golden[n]
		typ, _ := PeekType(f)
		e := registry[typ]
		if e == nil {
			continue
		}
		corpus = append(corpus, entry{f, func() any { return e.new() }})
		total += len(f)
	}
	b.SetBytes(int64(total))
	b.ReportAllocs()
	for b.Loop() {
		for _, c := range corpus {
			if err := json.Unmarshal(c.frame, c.new()); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkEncodeTranscriptFresh is Encode as the fan-out calls it: a new
// frame every time (frames are shared by every client, never reused).
func BenchmarkEncodeTranscriptFresh(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Encode(benchTranscript); err != nil {
			b.Fatal(err)
		}
	}
}
