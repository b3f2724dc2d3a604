package protocol

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"
)

func readAll(t *testing.T, r *Reader) ([]string, error) {
	t.Helper()
	var out []string
	for {
		f, err := r.ReadFrame()
		if err != nil {
			return out, err
		}
		out = append(out, string(f)) // copy: f is only valid until the next call
	}
}

func TestReaderSplitsAcrossReadBoundaries(t *testing.T) {
	long := strings.Repeat("x", 3*ReaderBufferSize+17) // spans several buffer fills
	input := "{\"a\":1}\n\n\n" + long + "\n{\"b\":2}\r\n\n" + strings.Repeat("y", ReaderBufferSize-1) + "\nlast\n"
	want := []string{`{"a":1}`, long, "{\"b\":2}\r", strings.Repeat("y", ReaderBufferSize-1), "last"}
	wrappers := map[string]func(io.Reader) io.Reader{
		"plain":    func(r io.Reader) io.Reader { return r },
		"onebyte":  iotest.OneByteReader,
		"half":     iotest.HalfReader,
		"dataerr":  iotest.DataErrReader,
		"onebyte+": func(r io.Reader) io.Reader { return iotest.DataErrReader(iotest.OneByteReader(r)) },
	}
	for name, wrap := range wrappers {
		t.Run(name, func(t *testing.T) {
			got, err := readAll(t, NewReader(wrap(strings.NewReader(input)), 0))
			if err != io.EOF {
				t.Fatalf("end error = %v, want io.EOF", err)
			}
			if len(got) != len(want) {
				t.Fatalf("got %d frames, want %d", len(got), len(want))
			}
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("frame %d = %.40q (len %d), want %.40q (len %d)", i, got[i], len(got[i]), want[i], len(want[i]))
				}
			}
		})
	}
}

func TestReaderExactlyMaxAndOneMore(t *testing.T) {
	const max = 10000
	exact := strings.Repeat("a", max)
	got, err := readAll(t, NewReader(iotest.HalfReader(strings.NewReader(exact+"\n"+exact+"\n")), max))
	if err != io.EOF || len(got) != 2 || got[0] != exact || got[1] != exact {
		t.Fatalf("exact-max frames: %d frames, %v", len(got), err)
	}

	r := NewReader(strings.NewReader("ok\n"+exact+"a\nnext\n"), max)
	if f, err := r.ReadFrame(); err != nil || string(f) != "ok" {
		t.Fatalf("first frame %q, %v", f, err)
	}
	if _, err := r.ReadFrame(); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("max+1 frame: %v, want ErrFrameTooLarge", err)
	}
	if _, err := r.ReadFrame(); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("Reader usable after ErrFrameTooLarge: %v", err)
	}
	if cap(r.scratch) > max {
		t.Fatalf("scratch capacity %d exceeds max %d", cap(r.scratch), max)
	}

	// The default cap is MaxFrameSize.
	r = NewReader(strings.NewReader(strings.Repeat("b", MaxFrameSize+1)+"\n"), 0)
	if _, err := r.ReadFrame(); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("MaxFrameSize+1: %v", err)
	}
	r = NewReader(strings.NewReader(strings.Repeat("b", MaxFrameSize)+"\n"), -1)
	if f, err := r.ReadFrame(); err != nil || len(f) != MaxFrameSize {
		t.Fatalf("MaxFrameSize frame: len %d, %v", len(f), err)
	}
}

// endless yields 'a' bytes lazily, up to limit, counting what was read.
type endless struct {
	limit, read int
}

func (e *endless) Read(p []byte) (int, error) {
	if e.read >= e.limit {
		return 0, io.EOF
	}
	n := min(len(p), e.limit-e.read)
	for i := range p[:n] {
		p[i] = 'a'
	}
	e.read += n
	return n, nil
}

// TestReaderMemoryBound feeds 64 MiB without a newline: the Reader must stop
// after at most max + one (large) buffer, and never hold more than max bytes.
func TestReaderMemoryBound(t *testing.T) {
	src := &endless{limit: 64 << 20}
	r := NewReader(src, MaxFrameSize)
	if _, err := r.ReadFrame(); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("err = %v, want ErrFrameTooLarge", err)
	}
	if limit := MaxFrameSize + largeBufferSize + 64; src.read > limit {
		t.Fatalf("Reader consumed %d bytes, want <= %d", src.read, limit)
	}
	if src.read <= MaxFrameSize {
		t.Fatalf("Reader gave up after %d bytes, before the cap", src.read)
	}
	if r.scratch != nil {
		t.Fatal("scratch kept after ErrFrameTooLarge")
	}
	// Allocation during the read is bounded by the cap, not by the input:
	// the scratch doubles up to max, so about 2*max in all.
	src = &endless{limit: 64 << 20}
	r = NewReader(src, MaxFrameSize)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := r.ReadFrame()
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("err = %v", err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 3*MaxFrameSize {
		t.Fatalf("ReadFrame allocated %d bytes for a %d-byte cap", alloc, MaxFrameSize)
	}
}

func TestReaderScratchGrowth(t *testing.T) {
	const max = 50000
	r := NewReader(strings.NewReader(strings.Repeat("c", max)+"\nsmall\n"), max)
	f, err := r.ReadFrame()
	if err != nil || len(f) != max {
		t.Fatalf("frame len %d, %v", len(f), err)
	}
	if cap(r.scratch) > max {
		t.Fatalf("scratch capacity %d > max %d", cap(r.scratch), max)
	}
	if f, err := r.ReadFrame(); err != nil || string(f) != "small" {
		t.Fatalf("second frame %q, %v", f, err)
	}
	// A big scratch is released once the frame was handed out.
	r = NewReader(strings.NewReader(strings.Repeat("c", 2*keepScratch)+"\n"+strings.Repeat("d", 2*ReaderBufferSize)+"\n"), 0)
	if _, err := r.ReadFrame(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ReadFrame(); err != nil {
		t.Fatal(err)
	}
	if cap(r.scratch) > keepScratch {
		t.Fatalf("scratch of %d bytes kept after a big frame", cap(r.scratch))
	}
}

func TestReaderEOF(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want error
	}{
		{"", io.EOF},
		{"\n\n", io.EOF},
		{"{\"a\":1}\n", io.EOF},
		{"{\"a\":1}\n{\"b\"", io.ErrUnexpectedEOF},
		{"partial", io.ErrUnexpectedEOF},
		{strings.Repeat("p", 3*ReaderBufferSize), io.ErrUnexpectedEOF},
	} {
		_, err := readAll(t, NewReader(iotest.OneByteReader(strings.NewReader(tt.in)), 0))
		if err != tt.want {
			t.Errorf("%.20q: err = %v, want %v", tt.in, err, tt.want)
		}
	}
}

func TestReaderUnderlyingErrorAndRetry(t *testing.T) {
	boom := errors.New("boom")
	r := NewReader(io.MultiReader(strings.NewReader("{\"a\""), iotest.ErrReader(boom)), 0)
	if _, err := r.ReadFrame(); err != boom {
		t.Fatalf("err = %v, want boom", err)
	}

	// A timeout mid-frame keeps the partial frame; the next call completes it.
	fr := &flakyReader{parts: []string{"{\"a\":", "", "1}\n"}}
	r = NewReader(fr, 0)
	if _, err := r.ReadFrame(); err != errTimeout {
		t.Fatalf("err = %v, want timeout", err)
	}
	f, err := r.ReadFrame()
	if err != nil || string(f) != `{"a":1}` {
		t.Fatalf("after retry: %q, %v", f, err)
	}
}

var errTimeout = errors.New("timeout")

// flakyReader returns its parts in order; an empty part is a timeout.
type flakyReader struct{ parts []string }

func (f *flakyReader) Read(p []byte) (int, error) {
	if len(f.parts) == 0 {
		return 0, io.EOF
	}
	part := f.parts[0]
	f.parts = f.parts[1:]
	if part == "" {
		return 0, errTimeout
	}
	return copy(p, part), nil
}

func TestReaderFramesDecode(t *testing.T) {
	var stream bytes.Buffer
	frames := goldenFrames(t)
	for _, b := range frames {
		stream.Write(b)
	}
	r := NewReader(iotest.HalfReader(&stream), 0)
	n := 0
	for {
		f, err := r.ReadFrame()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Decode(f); err != nil {
			t.Fatalf("Decode: %v", err)
		}
		n++
	}
	if n != len(frames) {
		t.Fatalf("read %d frames, want %d", n, len(frames))
	}
}

// countingReader counts Read calls.
type countingReader struct {
	r     io.Reader
	reads int
}

func (c *countingReader) Read(p []byte) (int, error) { c.reads++; return c.r.Read(p) }

// TestReaderLongFramesInLargeReads: a hydrate-sized frame is read in large
// pieces (not 4 KiB ones), and once it is consumed the Reader is back on
// its small buffer, so an idle console holds little.
func TestReaderLongFramesInLargeReads(t *testing.T) {
	long := strings.Repeat("h", 960<<10)
	src := &countingReader{r: strings.NewReader(long + "\n" + `{"type":"replayEnd"}` + "\n")}
	r := NewReader(src, 0)
	if f, err := r.ReadFrame(); err != nil || len(f) != len(long) {
		t.Fatalf("long frame: %d bytes, %v", len(f), err)
	}
	if max := len(long)/largeBufferSize + 3; src.reads > max {
		t.Errorf("%d reads for a %d-byte frame, want at most %d", src.reads, len(long), max)
	}
	if f, err := r.ReadFrame(); err != nil || string(f) != `{"type":"replayEnd"}` {
		t.Fatalf("next frame %q, %v", f, err)
	}
	if _, err := r.ReadFrame(); err != io.EOF {
		t.Fatalf("end: %v", err)
	}
	if r.large || r.br != r.small || r.br.Size() != ReaderBufferSize {
		t.Errorf("after the long frame: large=%v, buffer %d bytes; want the small one", r.large, r.br.Size())
	}
}

// TestReaderSwitchesBuffersMidStream: frames that straddle the switch to
// the large buffer and back come out whole and in order, whatever the
// reads return.
func TestReaderSwitchesBuffersMidStream(t *testing.T) {
	var want []string
	var in strings.Builder
	for i := range 200 {
		f := strings.Repeat(string(rune('a'+i%26)), (i*37)%150)
		if f == "" {
			continue
		}
		want = append(want, f)
		in.WriteString(f + "\n")
	}
	for name, wrap := range map[string]func(io.Reader) io.Reader{
		"plain": func(r io.Reader) io.Reader { return r }, "onebyte": iotest.OneByteReader, "half": iotest.HalfReader,
	} {
		t.Run(name, func(t *testing.T) {
			r := newReaderSize(wrap(strings.NewReader(in.String())), 0, 16, 64)
			got, err := readAll(t, r)
			if err != io.EOF || len(got) != len(want) {
				t.Fatalf("%d frames, %v; want %d", len(got), err, len(want))
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("frame %d = %q, want %q", i, got[i], want[i])
				}
			}
		})
	}
}

// TestReaderRecyclesBigScratch: a process that reads one hydrate-sized
// frame after another (a console that attaches again and again) does not
// allocate a megabyte for each.
func TestReaderRecyclesBigScratch(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	frame := strings.Repeat("h", 900<<10) + "\n"
	read := func() {
		r := NewReader(strings.NewReader(frame), 0)
		if f, err := r.ReadFrame(); err != nil || len(f) != len(frame)-1 {
			t.Fatalf("%d bytes, %v", len(f), err)
		}
		if _, err := r.ReadFrame(); err != io.EOF {
			t.Fatalf("end: %v", err)
		}
	}
	read() // the first one allocates
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 10 {
		read()
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / 10; per > 256<<10 {
		t.Fatalf("%d bytes allocated per %d-byte frame, want the scratch recycled", per, len(frame))
	}
}
