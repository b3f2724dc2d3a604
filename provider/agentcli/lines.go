package agentcli

import (
	"bufio"
	"errors"
	"fmt"
	"io"
)

// ErrLineTooLong is LineReader's error for a line over its cap: the
// stream cannot be resynchronised, so the session ends.
var ErrLineTooLong = errors.New("line too long")

// LineReader reads a CLI's newline-terminated lines of at most max bytes:
// short lines straight from bufio's buffer, long ones assembled in a
// scratch buffer that is dropped after use when it grew large. It never
// holds more than its buffer and one line. Not safe for concurrent use.
type LineReader struct {
	r   *bufio.Reader
	max int
	big []byte
}

// bigKeep is the scratch capacity kept between long lines.
const bigKeep = 1 << 20

// NewLineReader reads r with lines of at most max bytes.
func NewLineReader(r io.Reader, max int) *LineReader {
	return &LineReader{r: bufio.NewReaderSize(r, 64<<10), max: max}
}

// Next returns the next line without its newline (and a trailing CR); the
// slice is valid until the following call. A final line without a newline
// is returned too; then io.EOF. Over the cap it returns an error wrapping
// ErrLineTooLong that names the cap.
func (l *LineReader) Next() ([]byte, error) {
	if cap(l.big) > bigKeep {
		l.big = nil
	}
	b, err := l.r.ReadSlice('\n')
	switch {
	case err == nil && len(b)-1 > l.max, err == io.EOF && len(b) > l.max:
		return nil, l.tooLong()
	case err == nil:
		return trimEOL(b), nil
	case err == io.EOF && len(b) > 0:
		return b, nil
	case err != bufio.ErrBufferFull:
		return nil, err
	}
	l.big = append(l.big[:0], b...)
	for {
		b, err = l.r.ReadSlice('\n')
		n := len(l.big) + len(b)
		if err == nil {
			n-- // the newline
		}
		if n > l.max {
			l.big = nil
			return nil, l.tooLong()
		}
		l.big = append(l.big, b...)
		switch {
		case err == nil:
			return trimEOL(l.big), nil
		case err == bufio.ErrBufferFull:
		case err == io.EOF:
			return l.big, nil
		default:
			return nil, err
		}
	}
}

func (l *LineReader) tooLong() error {
	return fmt.Errorf("the CLI printed a line longer than %s: %w", size(l.max), ErrLineTooLong)
}

func size(n int) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

func trimEOL(b []byte) []byte {
	b = b[:len(b)-1]
	if len(b) > 0 && b[len(b)-1] == '\r' {
		b = b[:len(b)-1]
	}
	return b
}
