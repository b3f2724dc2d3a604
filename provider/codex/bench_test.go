package codex

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/internal/modelmock"
	"github.com/agents-fleet/fleet/provider"
	"github.com/agents-fleet/fleet/provider/agentcli"
	"github.com/agents-fleet/fleet/provider/agentcli/agentclitest"
)

// recorded is a stream the real CLI printed (TestRecordStream writes it):
// three turns — a command and a patch with approvals and reasoning, a
// failing command, an endpoint error with its retries.
const recorded = "testdata/app-server.jsonl"

// TestRecordStream re-records testdata/app-server.jsonl from the real CLI
// when CODEX_RECORD=1; temp paths are replaced by /work/repo.
func TestRecordStream(t *testing.T) {
	if os.Getenv("CODEX_RECORD") != "1" {
		t.Skip("set CODEX_RECORD=1 to re-record " + recorded)
	}
	r := newRig(t, modelmock.Script{Rules: []modelmock.Rule{
		shellAndPatch("do the work"),
		{Name: "fail", Match: "list the missing", Turns: []modelmock.Turn{
			{ToolCalls: []modelmock.ToolCall{{Name: "exec_command", Input: map[string]any{"cmd": "ls /nonexistent-dir"}}}, Usage: modelmock.Usage{Input: 300, Output: 12, CacheRead: 200}},
			{Text: "It does not exist.", Usage: modelmock.Usage{Input: 340, Output: 8, CacheRead: 300}},
		}},
		{Name: "500", Match: "now fail", Turns: []modelmock.Turn{{Status: 500}}},
	}})
	newP := func(path string) provider.Provider { return New(provider.Options{Path: path}) }
	r.Record(t, recorded, newP, r.Spec(), agentclitest.NewHost(allow), "do the work", "list the missing", "now fail")
}

// parseSession is a session without a process, fed lines directly; its
// answers go nowhere.
func parseSession(tb testing.TB, h provider.Host) *session {
	tb.Helper()
	return parseSessionTo(tb, h, agentclitest.NullInput{})
}

// parseSessionTo is a parseSession whose answers go to w.
func parseSessionTo(tb testing.TB, h provider.Host, w agentcli.Input) *session {
	s := newSession(New(provider.Options{}), provider.Spec{}, h, agentcli.NewWriter(w))
	tb.Cleanup(func() {
		s.cancel()
		s.rpc.WaitPrompts()
	})
	return s
}

// feed hands lines to s as the reader would, opening a turn where the
// stream starts one (as Send would have).
func feed(s *session, lines [][]byte) {
	for _, line := range lines {
		if bytes.HasPrefix(line, []byte(`{"method":"turn/started"`)) {
			s.mu.Lock()
			if s.turn == nil {
				ctx, cancel := context.WithCancel(s.ctx)
				s.turn = &turn{ended: make(chan struct{}), ctx: ctx, cancel: cancel}
			}
			s.mu.Unlock()
		}
		s.handleLine(line)
	}
}

func recordedLines(tb testing.TB) ([][]byte, int) {
	tb.Helper()
	b, err := os.ReadFile(recorded)
	if err != nil {
		tb.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	return lines, len(b)
}

// The recorded stream maps to the events of its three turns, with the
// usage the endpoint reported.
func TestParseRecorded(t *testing.T) {
	lines, _ := recordedLines(t)
	h := agentclitest.NewHost(allow)
	s := parseSession(t, h)
	feed(s, lines)
	s.rpc.WaitPrompts() // the prompts run on goroutines of their own
	evs, perms := h.Snapshot()
	ends := agentclitest.All[provider.TurnEnded](evs)
	if len(ends) != 3 || ends[0].Err != nil || ends[0].Result != "done" || ends[1].Err != nil || ends[2].Err == nil ||
		!strings.Contains(ends[2].Err.Error(), "internalServerError") {
		t.Fatalf("turns = %+v", ends)
	}
	if len(perms) != 3 {
		t.Errorf("%d permission prompts, want 3", len(perms))
	}
	want := provider.Usage{InputTokens: 340 + 640, OutputTokens: 35 + 20, CacheReadTokens: 30 + 500}
	if got := agentclitest.SumUsage(evs); got != want {
		t.Errorf("usage = %+v, want %+v", got, want)
	}
	var failed bool
	for _, c := range agentclitest.All[provider.ToolCompleted](evs) {
		if c.IsError && strings.Contains(c.Result, "No such file") {
			failed = true
		}
	}
	if !failed {
		t.Error("the failing command is not an error result")
	}
	if fe := agentclitest.All[provider.FileEdited](evs); len(fe) != 1 || fe[0].Path != "/work/repo/work/notes.md" || fe[0].Change != provider.Created {
		t.Errorf("FileEdited = %+v", fe)
	}
	if s.rd.garbage != 0 || s.rd.badItems != 0 || s.rd.unknown != 0 {
		t.Errorf("garbage %d, bad items %d, unknown %d %v", s.rd.garbage, s.rd.badItems, s.rd.unknown, s.rd.unknownMethods)
	}
}

// BenchmarkParse is the adapter's throughput on the recorded stream:
// decoding, mapping to events and answering the approvals in it.
func BenchmarkParse(b *testing.B) {
	lines, size := recordedLines(b)
	s := parseSession(b, agentclitest.Discard{})
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		feed(s, lines)
	}
	b.ReportMetric(float64(len(lines))*float64(b.N)/time.Since(start).Seconds(), "lines/s")
}
