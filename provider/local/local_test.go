package local

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
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
	results []provider.ToolCompleted
	answer  string
	confirm bool
	ended   chan provider.TurnEnded // set by runIn
}

func (h *fakeHost) Event(ev provider.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch ev := ev.(type) {
	case provider.Output:
		for _, line := range ev.Lines {
			h.lines = append(h.lines, string(ev.Stream)+":"+line)
		}
	case provider.Note:
		h.notes = append(h.notes, ev.Text)
	case provider.ToolCompleted:
		h.results = append(h.results, ev)
	case provider.TurnEnded:
		if h.ended != nil {
			h.ended <- ev
		}
	}
}
func (h *fakeHost) Permission(context.Context, provider.PermissionRequest) (provider.Decision, error) {
	return provider.Decision{}, provider.ErrNoAnswer
}
func (h *fakeHost) Ask(ctx context.Context, q provider.Question) (string, error) {
	if h.answer == "" {
		return "", provider.ErrNoAnswer
	}
	return h.answer, nil
}
func (h *fakeHost) Confirm(ctx context.Context, summary string) (bool, error) { return h.confirm, nil }

func runCmd(t *testing.T, cmd string, h *fakeHost) provider.TurnEnded {
	t.Helper()
	return runIn(t, context.Background(), &Provider{}, cmd, h, h)
}

// runIn runs cmd as one turn of a session reporting to host (which embeds
// or is fh) and returns how it ended; cancelling ctx interrupts it.
func runIn(t *testing.T, ctx context.Context, p *Provider, cmd string, fh *fakeHost, host provider.Host) provider.TurnEnded {
	t.Helper()
	fh.ended = make(chan provider.TurnEnded, 1)
	s, err := p.Start(context.Background(), provider.Spec{Agent: "w1", Dir: taskDir(t)}, host)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Send(context.Background(), provider.Turn{Text: cmd}); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-fh.ended:
		return res
	case <-ctx.Done():
		s.Interrupt(context.Background())
	}
	select {
	case res := <-fh.ended:
		return res
	case <-time.After(time.Minute):
		t.Fatal("the turn did not end a minute after an interrupt")
		return provider.TurnEnded{}
	}
}

// Start refuses a shell it does not know, naming the ones it does.
func TestStartRefusesAnUnknownShell(t *testing.T) {
	_, err := (&Provider{Shell: "bash"}).Start(context.Background(), provider.Spec{Agent: "w1"}, &fakeHost{})
	if err == nil || !strings.Contains(err.Error(), `unknown shell "bash" (known: sh, cmd, powershell)`) {
		t.Fatalf("err %v", err)
	}
	for _, sh := range append([]string{""}, systemShells...) {
		if err := CheckShell(sh); err != nil {
			t.Errorf("CheckShell(%q): %v", sh, err)
		}
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
	readLines(strings.NewReader(in), func(ls []string) { lines = append(lines, ls...) })
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

// chunkReader returns its input in reads of the sizes given, round robin.
type chunkReader struct {
	b     []byte
	sizes []int
	i     int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), len(r.b), r.sizes[r.i%len(r.sizes)])
	r.i++
	copy(p, r.b[:n])
	r.b = r.b[n:]
	return n, nil
}

// TestReadLinesMatchesSplit feeds readLines output cut at every kind of
// place (one byte at a time, across the buffer's end, lines longer than
// MaxLine and than the buffer) and checks it gives exactly the lines a
// plain split gives, cut the same way.
func TestReadLinesMatchesSplit(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	lengths := []int{0, 1, 7, 200, MaxLine - 1, MaxLine, MaxLine + 1, readBuf - 1, readBuf, readBuf + 1, 3*readBuf + 5}
	for round := range 200 {
		var in strings.Builder
		var want []string
		for range 1 + rng.IntN(40) {
			n := lengths[rng.IntN(len(lengths))]
			if rng.IntN(3) > 0 {
				n = rng.IntN(300)
			}
			line := strings.Repeat(string(rune('a'+rng.IntN(26))), n)
			in.WriteString(line + "\n")
			if len(line) > MaxLine {
				line = line[:MaxLine] + fmt.Sprintf("… [line truncated: %d more bytes]", len(line)-MaxLine)
			}
			want = append(want, line)
		}
		if round%2 == 1 { // a last line without its newline
			in.WriteString("tail")
			want = append(want, "tail")
		}
		sizes := [][]int{{1}, {readBuf}, {4096, 1, 70000}, {rng.IntN(readBuf) + 1, rng.IntN(100) + 1}}[round%4]
		var got []string
		calls := 0
		readLines(&chunkReader{b: []byte(in.String()), sizes: sizes}, func(ls []string) {
			calls++
			if len(ls) == 0 {
				t.Fatal("called with no lines")
			}
			got = append(got, ls...)
		})
		if !slices.Equal(got, want) {
			t.Fatalf("round %d (reads %v): %d lines, want %d; first difference at %d", round, sizes, len(got), len(want), firstDiff(got, want))
		}
		if sizes[0] == readBuf && calls > len(want) {
			t.Fatalf("round %d: %d calls for %d lines: lines of one read must come in one call", round, calls, len(want))
		}
	}
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestOutputComesInBatches checks a burst reaches the host in few calls,
// and a workflow line in the middle still splits it in order.
// countingHost counts Output calls.
// BenchmarkReadLines measures reading task output into lines: one op is
// one 200-byte line, read from a pipe-sized chunk as a burst brings them.
func BenchmarkReadLines(b *testing.B) {
	line := strings.Repeat("x", 200) + "\n"
	chunk := []byte(strings.Repeat(line, readBuf/len(line)))
	perChunk := len(chunk) / len(line)
	b.ReportAllocs()
	b.SetBytes(int64(len(line)))
	b.ResetTimer()
	for done := 0; done < b.N; done += perChunk {
		n := 0
		readLines(&chunkReader{b: chunk, sizes: []int{len(chunk)}}, func(ls []string) { n += len(ls) })
		if n != perChunk {
			b.Fatalf("%d lines, want %d", n, perChunk)
		}
	}
}
