package agentcli

import (
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
)

func TestLineReader(t *testing.T) {
	long := strings.Repeat("x", 200<<10)
	in := "a\r\n\n" + long + "\r\nlast"
	lr := NewLineReader(strings.NewReader(in), 1<<20)
	var got []string
	for {
		l, err := lr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(l))
	}
	want := []string{"a", "", long, "last"} // a CR before the newline goes too
	if !slices.Equal(got, want) {
		t.Fatalf("lines = %d %q…, want %d", len(got), got[0], len(want))
	}

	lr = NewLineReader(strings.NewReader(strings.Repeat("y", 300<<10)+"\nafter\n"), 256<<10)
	if _, err := lr.Next(); !errors.Is(err, ErrLineTooLong) || !strings.Contains(err.Error(), "longer than 262144 bytes") {
		t.Fatalf("over-long line: err = %v", err)
	}
	// Exactly the cap is fine.
	lr = NewLineReader(strings.NewReader(strings.Repeat("z", 256<<10)+"\n"), 256<<10)
	if l, err := lr.Next(); err != nil || len(l) != 256<<10 {
		t.Fatalf("line at the cap: %d bytes, %v", len(l), err)
	}
}
