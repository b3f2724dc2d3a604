package protocol

import (
	"bufio"
	"io"
)

// ReaderBufferSize is the size of a Reader's read buffer. It is small so
// that idle connections cost little; longer frames are assembled in a
// scratch slice that grows only as far as the frame needs (never past the
// cap).
const ReaderBufferSize = 4 << 10

// keepScratch is the scratch capacity a Reader keeps between frames; a
// larger scratch (left by one big frame) is dropped so that a connection
// does not hold on to it while idle.
const keepScratch = 64 << 10

// Reader reads newline-delimited frames from a stream with a hard per-frame
// cap. It never holds more than ReaderBufferSize bytes plus one frame of at
// most max bytes, even when no newline ever comes. A Reader is not safe for
// concurrent use.
type Reader struct {
	br  *bufio.Reader
	max int
	// scratch assembles a frame that spans more than one buffer fill.
	scratch []byte
	// returned is true when the last frame was handed out from scratch,
	// which the next call must reset first.
	returned bool
	// err is sticky once the stream can't be resynchronised.
	err error
}

// NewReader returns a Reader of r whose frames are at most max bytes,
// newline excluded; max <= 0 means MaxFrameSize.
func NewReader(r io.Reader, max int) *Reader {
	return newReaderSize(r, max, ReaderBufferSize)
}

// newReaderSize is NewReader with another read buffer size (at least 16),
// so that tests can cross buffer boundaries with small inputs.
func newReaderSize(r io.Reader, max, size int) *Reader {
	if max <= 0 {
		max = MaxFrameSize
	}
	return &Reader{br: bufio.NewReaderSize(r, size), max: max}
}

// ReadFrame returns the next frame without its '\n' (a '\r' before it is
// kept: JSON treats it as whitespace). The slice is valid until the next
// call. Empty lines are skipped.
//
// Errors: ErrFrameTooLarge as soon as a line exceeds the cap (the Reader is
// unusable afterwards); io.EOF at a clean end of stream; io.ErrUnexpectedEOF
// when the stream ends inside a frame; otherwise the underlying reader's
// error, after which ReadFrame may be called again (a partial frame is kept,
// so a read deadline can be retried).
func (r *Reader) ReadFrame() ([]byte, error) {
	if r.err != nil {
		return nil, r.err
	}
	if r.returned {
		r.returned = false
		if cap(r.scratch) > keepScratch {
			r.scratch = nil
		} else {
			r.scratch = r.scratch[:0]
		}
	}
	for {
		line, err := r.br.ReadSlice('\n')
		if err == nil {
			line = line[:len(line)-1]
			if len(r.scratch)+len(line) > r.max {
				return nil, r.tooLarge()
			}
			if len(r.scratch) == 0 {
				if len(line) == 0 {
					continue
				}
				return line, nil // straight from the read buffer, no copy
			}
			r.appendScratch(line)
			r.returned = true
			return r.scratch, nil
		}
		if len(line) > 0 {
			// No newline in this piece: the frame is at least this long.
			if len(r.scratch)+len(line) > r.max {
				return nil, r.tooLarge()
			}
			r.appendScratch(line)
		}
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err == io.EOF && len(r.scratch) > 0:
			return nil, io.ErrUnexpectedEOF
		default:
			return nil, err
		}
	}
}

func (r *Reader) tooLarge() error {
	r.err = ErrFrameTooLarge
	r.scratch = nil
	return r.err
}

// appendScratch appends b to scratch, growing it at most to r.max; the
// caller has checked that len(scratch)+len(b) <= r.max.
func (r *Reader) appendScratch(b []byte) {
	need := len(r.scratch) + len(b)
	if need > cap(r.scratch) {
		c := max(2*cap(r.scratch), need, 512)
		c = min(c, r.max)
		s := make([]byte, len(r.scratch), c)
		copy(s, r.scratch)
		r.scratch = s
	}
	r.scratch = append(r.scratch, b...)
}
