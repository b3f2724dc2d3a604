package claude

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
)

const (
	// MaxLine is the longest stdout line the adapter accepts. Claude prints
	// a whole content block or tool result per line, so a large file read
	// makes a line of megabytes; a line past the cap fails the session.
	MaxLine = 8 << 20
	// readBufSize is the read buffer: most lines fit, longer ones are
	// assembled in a scratch slice that grows only as far as the line.
	readBufSize = 64 << 10
	// keepScratch is the scratch capacity kept between lines; one large
	// line's scratch is dropped once that line has been handled.
	keepScratch = 256 << 10
	// stderrTail is how much of the end of stderr is kept for errors.
	stderrTail = 8 << 10
)

// errLineTooLong is the line reader's error for a line over its cap.
var errLineTooLong = fmt.Errorf("claude printed a stdout line longer than %d MiB", MaxLine>>20)

// lineReader reads newline-terminated lines with a hard cap. It never holds
// more than its read buffer plus one line of at most max bytes, newline or
// not. Not safe for concurrent use.
type lineReader struct {
	br       *bufio.Reader
	max      int
	scratch  []byte
	returned bool // the last line came from scratch
}

func newLineReader(r io.Reader, max int) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(r, readBufSize), max: max}
}

// next returns the next line without its newline (and without a '\r'
// before it), valid until the next call; empty lines are skipped. A last
// line without a newline is returned before io.EOF. Over the cap it returns
// errLineTooLong and the reader is done.
func (r *lineReader) next() ([]byte, error) {
	if r.returned {
		r.returned = false
		if cap(r.scratch) > keepScratch {
			r.scratch = nil
		} else {
			r.scratch = r.scratch[:0]
		}
	}
	for {
		piece, err := r.br.ReadSlice('\n')
		if err == nil {
			piece = piece[:len(piece)-1]
			if len(r.scratch)+len(piece) > r.max {
				r.scratch = nil
				return nil, errLineTooLong
			}
			var line []byte
			if len(r.scratch) == 0 {
				line = piece // straight from the read buffer
			} else {
				r.scratch = append(r.scratch, piece...)
				r.returned = true
				line = r.scratch
			}
			if n := len(line); n > 0 && line[n-1] == '\r' {
				line = line[:n-1]
			}
			if len(line) == 0 {
				continue
			}
			return line, nil
		}
		if len(r.scratch)+len(piece) > r.max {
			r.scratch = nil
			return nil, errLineTooLong
		}
		r.scratch = append(r.scratch, piece...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if len(r.scratch) > 0 {
			r.returned = true
			return r.scratch, nil // the error comes again on the next call
		}
		return nil, err
	}
}

// tail keeps the last stderrTail bytes written to it.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(p)
	if len(p) >= stderrTail {
		p = p[len(p)-stderrTail:]
		t.buf = append(t.buf[:0], p...)
		return n, nil
	}
	if over := len(t.buf) + len(p) - stderrTail; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	t.buf = append(t.buf, p...)
	return n, nil
}

// String is the kept tail, trimmed, starting at a line boundary when it
// was cut.
func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := string(t.buf)
	if len(t.buf) == stderrTail {
		if i := strings.IndexByte(s, '\n'); i >= 0 && i < len(s)-1 {
			s = s[i+1:]
		}
	}
	return strings.TrimSpace(s)
}
