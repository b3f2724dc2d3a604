package agentcli

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
)

func TestLineReader(t *testing.T) {
	long := strings.Repeat("x", 200<<10)
	in := "a\r\n\n" + long + "\r\nlast"
	got := allLines(t, NewLineReader(strings.NewReader(in), 1<<20))
	want := []string{"a", "", long, "last"} // a CR before the newline goes too
	if !slices.Equal(got, want) {
		t.Fatalf("lines = %d %q…, want %d", len(got), got[0], len(want))
	}

	lr := NewLineReader(strings.NewReader(strings.Repeat("y", 300<<10)+"\nafter\n"), 256<<10)
	if _, err := lr.Next(); !errors.Is(err, ErrLineTooLong) || !strings.Contains(err.Error(), "longer than 262144 bytes") {
		t.Fatalf("over-long line: err = %v", err)
	}
	// Exactly the cap is fine.
	lr = NewLineReader(strings.NewReader(strings.Repeat("z", 256<<10)+"\n"), 256<<10)
	if l, err := lr.Next(); err != nil || len(l) != 256<<10 {
		t.Fatalf("line at the cap: %d bytes, %v", len(l), err)
	}
}

// allLines reads lr to its end.
func allLines(t *testing.T, lr *LineReader) []string {
	t.Helper()
	var got []string
	for {
		l, err := lr.Next()
		if err == io.EOF {
			return got
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(l))
	}
}

// Lines come whole however the reader splits them, long ones assembled
// across the buffer; a line over the cap is an error whether it fits the
// buffer or never ends.
func TestLineReaderPieces(t *testing.T) {
	long := strings.Repeat("x", 3*(64<<10)+17)
	in := "one\r\n\n" + long + "\ntwo\nlast-without-newline"
	for name, r := range map[string]io.Reader{
		"whole":       strings.NewReader(in),
		"byte a time": iotest.OneByteReader(strings.NewReader(in)),
	} {
		got := allLines(t, NewLineReader(r, 1<<20))
		want := []string{"one", "", long, "two", "last-without-newline"}
		if !slices.Equal(got, want) {
			t.Fatalf("%s: got %d lines, want %d", name, len(got), len(want))
		}
	}

	lr := NewLineReader(strings.NewReader("ok\n"+strings.Repeat("y", 100)+"\nnext\n"), 64)
	if l, err := lr.Next(); err != nil || string(l) != "ok" {
		t.Fatalf("first line: %q %v", l, err)
	}
	if _, err := lr.Next(); !errors.Is(err, ErrLineTooLong) {
		t.Fatalf("over the cap, within the buffer: %v", err)
	}
	lr = NewLineReader(strings.NewReader(strings.Repeat("y", 100)), 64)
	if _, err := lr.Next(); !errors.Is(err, ErrLineTooLong) {
		t.Fatalf("a last line over the cap: %v", err)
	}
	// No newline at all: still bounded.
	lr = NewLineReader(io.MultiReader(strings.NewReader(strings.Repeat("z", 200)), neverEnding{}), 64)
	if _, err := lr.Next(); !errors.Is(err, ErrLineTooLong) {
		t.Fatalf("endless line: %v", err)
	}
}

type neverEnding struct{}

func (neverEnding) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'z'
	}
	return len(p), nil
}

func TestTail(t *testing.T) {
	var tl Tail
	for i := 0; i < 5000; i++ {
		tl.Write([]byte("line of stderr\n"))
	}
	tl.Write([]byte("the end\n"))
	s := tl.String()
	if len(s) > TailSize || !strings.HasSuffix(s, "the end") || !strings.HasPrefix(s, "line of stderr") {
		t.Fatalf("tail = %d bytes, %q…%q", len(s), s[:20], s[len(s)-20:])
	}
	var small Tail
	small.Write(bytes.Repeat([]byte("a"), 3*TailSize))
	if len(small.String()) != TailSize {
		t.Fatalf("a large write kept %d bytes", len(small.String()))
	}
}
