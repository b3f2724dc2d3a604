package local

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"go.uber.org/goleak"

	"github.com/agents-fleet/fleet/provider"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeHost records a task's events and answers asks from a script.
type fakeHost struct {
	mu      sync.Mutex
	lines   []string
	notes   []string
	results []provider.ToolResult
	answer  string
	confirm bool
}

func (h *fakeHost) Output(s provider.Stream, line string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lines = append(h.lines, string(s)+":"+line)
}
func (h *fakeHost) Note(text string)            { h.mu.Lock(); h.notes = append(h.notes, text); h.mu.Unlock() }
func (h *fakeHost) ToolStart(provider.ToolCall) {}
func (h *fakeHost) ToolComplete(r provider.ToolResult) {
	h.mu.Lock()
	h.results = append(h.results, r)
	h.mu.Unlock()
}
func (h *fakeHost) Ask(ctx context.Context, q provider.Question) (string, error) {
	if h.answer == "" {
		return "", provider.ErrNoAnswer
	}
	return h.answer, nil
}
func (h *fakeHost) Confirm(ctx context.Context, summary string) (bool, error) { return h.confirm, nil }

func run(t *testing.T, cmd string, h *fakeHost) provider.Result {
	t.Helper()
	p := &Provider{}
	return p.Run(context.Background(), provider.Task{ID: "t1", Prompt: cmd, Dir: t.TempDir()}, h)
}

func TestOutputLinesExactlyAsPrinted(t *testing.T) {
	h := &fakeHost{}
	res := run(t, `printf 'a\n\n  b  \nno newline'; printf 'e\n' >&2`, h)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	got := strings.Join(h.lines, "|")
	for _, want := range []string{"stdout:a", "stdout:", "stdout:  b  ", "stdout:no newline", "stderr:e"} {
		if !strings.Contains("|"+got+"|", "|"+want+"|") {
			t.Fatalf("missing %q in %q", want, got)
		}
	}
}

func TestExitCodeAndResultTail(t *testing.T) {
	h := &fakeHost{}
	res := run(t, `seq 1 2000; exit 3`, h)
	if res.ExitCode != 3 || res.Err == nil {
		t.Fatalf("%+v", res)
	}
	r := h.results[0]
	if !r.IsError || utf8.RuneCountInString(r.Result) > ResultChars || !strings.HasSuffix(r.Result, "1999\n2000") {
		t.Fatalf("result %d chars, suffix %q", len(r.Result), r.Result[len(r.Result)-20:])
	}
}

func TestWorkflowLines(t *testing.T) {
	h := &fakeHost{answer: "prod", confirm: true}
	run(t, `echo '::ask::{"question":"env?"}'; read a; echo "a=$a"; echo '::confirm::sure?'; read c; echo "c=$c"`, h)
	got := strings.Join(h.lines, "|")
	if got != "stdout:a=prod|stdout:c=yes" {
		t.Fatalf("%q", got)
	}
}

func TestMalformedAskClosesStdin(t *testing.T) {
	h := &fakeHost{answer: "x"}
	run(t, `echo '::ask::{nope'; if read a; then echo "read"; else echo eof; fi`, h)
	if strings.Join(h.lines, "|") != "stdout:eof" || len(h.notes) != 1 || !strings.Contains(h.notes[0], "malformed") {
		t.Fatalf("lines %q notes %q", h.lines, h.notes)
	}
}

func TestParseAsk(t *testing.T) {
	for _, tc := range []struct {
		in      string
		wantErr string
		kind    string
		nChoice int
	}{
		{`{"question":"q"}`, "", "freeform", 0},
		{`{"question":"q","choices":["a","b"]}`, "", "choice", 2},
		{`{"question":"q","choices":[{"label":"A","value":"a"}],"allowFreeform":true,"kind":"pick"}`, "", "pick", 1},
		{`{"question":""}`, "required", "", 0},
		{`{"question":"q","choices":[{"label":"A"}]}`, "choice 1", "", 0},
		{`{"question":"q","choices":[5]}`, "choice 1", "", 0},
		{`not json`, "invalid JSON", "", 0},
	} {
		q, err := parseAsk(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: err %v, want %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || q.Kind != tc.kind || len(q.Choices) != tc.nChoice {
			t.Errorf("%s: %+v %v", tc.in, q, err)
		}
	}
}

func TestLongLinesAndBinary(t *testing.T) {
	var lines []string
	in := strings.Repeat("é", MaxLine) + "\n" + "\xff\xfe bin\n" + strings.Repeat("z", 100)
	readLines(strings.NewReader(in), func(s string) { lines = append(lines, s) })
	if len(lines) != 3 {
		t.Fatalf("%d lines", len(lines))
	}
	if !utf8.ValidString(strings.Split(lines[0], "…")[0]) || !strings.Contains(lines[0], "line truncated: 16384 more bytes") {
		t.Fatalf("long line cut badly: ...%q", lines[0][len(lines[0])-50:])
	}
	if lines[1] != "\xff\xfe bin" || lines[2] != strings.Repeat("z", 100) {
		t.Fatalf("%q %q", lines[1], lines[2])
	}
}

func TestCancelStopsEverything(t *testing.T) {
	h := &fakeHost{}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	// The background child keeps the stdout pipe open; the group kill ends it.
	res := (&Provider{}).Run(ctx, provider.Task{ID: "t", Prompt: "sleep 30 & sleep 30", Dir: t.TempDir()}, h)
	if res.Err == nil || !strings.Contains(res.Err.Error(), "cancelled") {
		t.Fatalf("%+v", res)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatal("cancel did not stop the task group promptly")
	}
}
