package copilot

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/agents-fleet/fleet/internal/modelmock"
	"github.com/agents-fleet/fleet/provider"
	"github.com/agents-fleet/fleet/provider/agentcli"
	"github.com/agents-fleet/fleet/provider/agentcli/agentclitest"
	"github.com/agents-fleet/fleet/provider/agentcli/jsonrpc"
)

// recorded is a stream the real CLI printed on stdout (TestRecordStream
// writes it): three turns — a create and a shell command with prompts and
// reasoning, a failing view, an endpoint answering 401 with the CLI's
// retries.
const recorded = "testdata/acp.jsonl"

// TestRecordStream re-records testdata/acp.jsonl from the real CLI when
// COPILOT_RECORD=1; temporary paths become /work/repo.
func TestRecordStream(t *testing.T) {
	if os.Getenv("COPILOT_RECORD") != "1" {
		t.Skip("set COPILOT_RECORD=1 to re-record " + recorded)
	}
	r := newRig(t, modelmock.Script{})
	r.Srv.SetScript(modelmock.Script{Rules: []modelmock.Rule{
		writeAndRun("do the work", r.Dir),
		{Name: "fail", Match: "look at the missing", Turns: []modelmock.Turn{
			{Text: "Let me look.", ToolCalls: []modelmock.ToolCall{{Name: "view", Input: map[string]any{"path": filepath.Join(r.Dir, "missing.txt")}}}, Usage: modelmock.Usage{Input: 300, Output: 12, CacheRead: 200}},
			{Text: "It does not exist.", Usage: modelmock.Usage{Input: 340, Output: 8, CacheRead: 300}},
		}},
		{Name: "401", Match: "now fail", Turns: []modelmock.Turn{{Status: 401, ErrorMessage: "invalid x-api-key"}}},
	}})
	newP := func(path string) provider.Provider { return New(provider.Options{Path: path}) }
	r.Record(t, recorded, newP, r.Spec(), agentclitest.NewHost(allow), "do the work", "look at the missing", "now fail")
}

// parseSession is a session without a process, fed lines directly.
func parseSession(tb testing.TB, h provider.Host) *session {
	tb.Helper()
	s := newParseSession(h)
	tb.Cleanup(func() {
		s.cancel()
		s.rpc.WaitPrompts()
	})
	return s
}

func newParseSession(h provider.Host) *session {
	return newSession(sessionConfig{host: h, model: "claude-sonnet-4.5"}, agentcli.NewWriter(agentclitest.NullInput{}))
}

// recordedLines are the recording's lines and, for each response, its
// id and whether it answers a prompt (it has a stopReason).
type recordedLine struct {
	line   []byte
	id     int64
	prompt bool
}

func loadRecorded(tb testing.TB) ([]recordedLine, int) {
	tb.Helper()
	b, err := os.ReadFile(recorded)
	if err != nil {
		tb.Fatal(err)
	}
	var out []recordedLine
	for _, l := range bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n")) {
		rl := recordedLine{line: l}
		var m jsonrpc.Message
		if json.Unmarshal(l, &m) == nil && m.Method == "" && len(m.ID) > 0 {
			rl.id, _ = strconv.ParseInt(string(m.ID), 10, 64)
			rl.prompt = bytes.Contains(m.Result, []byte(`"stopReason"`))
		}
		out = append(out, rl)
	}
	return out, len(b)
}

// feed hands the lines to s as the reader would, with the calls Start and
// Send would have made pending (the client numbers them 1, 2, … as the
// recording's responses are), and a turn open from each prompt's start
// (Send's part) to its response.
func feed(tb testing.TB, s *session, lines []recordedLine) {
	next := int64(1)
	for _, rl := range lines {
		s.mu.Lock()
		if s.turn == nil && s.id != "" {
			ctx, cancel := context.WithCancel(s.ctx)
			s.turn = &turn{ctx: ctx, cancel: cancel, ended: make(chan struct{})}
		}
		t, id := s.turn, s.id
		s.mu.Unlock()
		if rl.id > 0 {
			if rl.id != next {
				tb.Fatalf("the recording's response %d comes where the client's call %d is pending", rl.id, next)
			}
			next++
			var onReply func(json.RawMessage, error)
			switch {
			case rl.prompt:
				onReply = func(res json.RawMessage, err error) { s.promptDone(t, res, err) }
			case id == "":
				onReply = func(res json.RawMessage, err error) {
					var r struct {
						SessionID string `json:"sessionId"`
					}
					if json.Unmarshal(res, &r) == nil && r.SessionID != "" {
						s.started(r.SessionID)
					}
				}
			}
			_ = s.rpc.Call(context.Background(), "recorded", nil, onReply)
		}
		s.handleLine(rl.line)
	}
}

// The recorded stream maps to the events of its three turns, with the
// usage the endpoint reported.
func TestParseRecorded(t *testing.T) {
	lines, _ := loadRecorded(t)
	h := agentclitest.NewHost(allow)
	s := parseSession(t, h)
	feed(t, s, lines)
	s.rpc.WaitPrompts()
	evs, perms := h.Snapshot()
	tes := agentclitest.All[provider.TurnEnded](evs)
	if len(tes) != 3 {
		t.Fatalf("%d TurnEnded; events:\n%s", len(tes), agentclitest.Dump(evs))
	}
	if tes[0].Err != nil || tes[0].Result != "done" || tes[1].Err != nil || tes[1].Result != "It does not exist." {
		t.Errorf("turns %+v", tes)
	}
	if tes[2].Err == nil || !strings.Contains(tes[2].Err.Error(), "401") {
		t.Errorf("third turn %+v", tes[2])
	}
	us := agentclitest.All[provider.Usage](evs)
	want := []provider.Usage{workUsage, {InputTokens: 640, OutputTokens: 20, CacheReadTokens: 500}}
	if len(us) != 2 {
		t.Fatalf("usage %+v", us)
	}
	for i := range want {
		us[i].ContextTokens, us[i].ContextWindow = 0, 0
		if us[i] != want[i] {
			t.Errorf("usage %d %+v, want %+v", i, us[i], want[i])
		}
	}
	// The prompts are relayed on goroutines of their own: any order.
	tools := []string{}
	for _, p := range perms {
		tools = append(tools, p.Tool)
	}
	slices.Sort(tools)
	if !slices.Equal(tools, []string{"bash", "create"}) {
		t.Errorf("prompts %+v", perms)
	}
	if fe := agentclitest.All[provider.FileEdited](evs); len(fe) != 1 || fe[0].Path != "/work/repo/work/notes.md" || fe[0].Change != provider.Created {
		t.Errorf("FileEdited %+v", fe)
	}
	dones := agentclitest.All[provider.ToolCompleted](evs)
	if len(dones) != 3 || !dones[2].IsError || dones[2].Name != "view" {
		t.Errorf("tool completions %+v", dones)
	}
	if s.rs.garbageLines != 0 || s.rs.unknown != 0 {
		t.Errorf("%d garbage, %d unknown", s.rs.garbageLines, s.rs.unknown)
	}
}

// BenchmarkParse is the reader's work per recorded line: framing aside,
// envelope and payload decoding, mapping, events to a host that drops
// them. b.SetBytes makes MB/s the stream's; lines/s is reported too.
func BenchmarkParse(b *testing.B) {
	lines, size := loadRecorded(b)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	cpu0 := cpuTime()
	for b.Loop() {
		s := newParseSession(agentclitest.Discard{})
		feed(b, s, lines)
		s.cancel()
		s.rpc.WaitPrompts()
	}
	n := float64(len(lines)) * float64(b.N)
	b.ReportMetric(n/b.Elapsed().Seconds(), "lines/s")
	// On a loaded machine wall time understates; CPU time (the process's,
	// GC and the prompts' goroutines included) does not.
	if cpu := (cpuTime() - cpu0).Seconds(); cpu > 0 {
		b.ReportMetric(n/cpu, "lines/cpu-s")
	}
}
