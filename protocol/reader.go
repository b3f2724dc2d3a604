package protocol

import (
	"bufio"
	"io"
	"sync"
)

// ReaderBufferSize is the size of a Reader's read buffer. It is small so
// that idle connections cost little; longer frames are assembled in a
// scratch slice that grows only as far as the frame needs (never past the
// cap).
const ReaderBufferSize = 4 << 10

// largeBufferSize is the read buffer a Reader switches to while it
// assembles a frame longer than its small one: a hydrate is up to ~1 MiB,
// which 4 KiB reads would take 250 system calls to bring in, waking the
// sender's writer each time it drained a little. The Reader goes back to
// the small buffer at the first ReadFrame that finds the large one empty,
// so an idle connection holds only the small one.
const largeBufferSize = 64 << 10

// largeReaders recycles large read buffers between Readers (a console
// needs one for its hydrate and then rarely again).
var largeReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, largeBufferSize) }}

// bigScratch recycles the MaxFrameSize scratch slices (*[]byte) that the
// longest frames are assembled in (a console's hydrate is one), so that a
// process that attaches again and again does not allocate, zero and grow a
// megabyte each time. A frame handed out from one is, as always, only valid
// until the next ReadFrame, which gives the slice back. Only slices that
// grew to the cap are kept, so a short frame never makes one.
var bigScratch sync.Pool

// keepScratch is the scratch capacity a Reader keeps between frames; a
// larger scratch (left by one big frame) is dropped so that a connection
// does not hold on to it while idle.
const keepScratch = 64 << 10

// Reader reads newline-delimited frames from a stream with a hard per-frame
// cap. It never holds more than largeBufferSize bytes plus one frame of at
// most max bytes, even when no newline ever comes; idle, it holds its
// ReaderBufferSize buffer (and at most keepScratch of scratch). A Reader is
// not safe for concurrent use.
type Reader struct {
	br  *bufio.Reader // small, or large while long frames come in
	src io.Reader
	max int
	// small is the Reader's own buffer; large, when set, is br, from
	// largeReaders (or of largeSize, in tests).
	small     *bufio.Reader
	large     bool
	largeSize int
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

// newReaderSize is NewReader with other read buffer sizes (at least 16;
// large 0 means largeBufferSize), so that tests can cross buffer boundaries
// and switch buffers with small inputs.
func newReaderSize(r io.Reader, max, size int, large ...int) *Reader {
	if max <= 0 {
		max = MaxFrameSize
	}
	br := bufio.NewReaderSize(r, size)
	rd := &Reader{br: br, small: br, src: r, max: max, largeSize: largeBufferSize}
	if len(large) > 0 && large[0] > 0 {
		rd.largeSize = large[0]
	}
	return rd
}

// growBuffer moves to the large read buffer. Only call it when br holds no
// unread bytes (right after bufio.ErrBufferFull, which hands out the whole
// buffer).
func (r *Reader) growBuffer() {
	if r.large || r.small.Size() >= r.largeSize {
		return
	}
	var br *bufio.Reader
	if r.largeSize == largeBufferSize {
		br = largeReaders.Get().(*bufio.Reader)
		br.Reset(r.src)
	} else {
		br = bufio.NewReaderSize(r.src, r.largeSize)
	}
	r.br, r.large = br, true
}

// shrinkBuffer goes back to the small read buffer once the large one holds
// no unread bytes.
func (r *Reader) shrinkBuffer() {
	if r.large && r.br.Buffered() == 0 {
		r.releaseLarge()
	}
}

// releaseLarge gives the large buffer back (to the pool if it came from
// there) and reads with the small one again.
func (r *Reader) releaseLarge() {
	r.br.Reset(nil) // drop the reference to src
	if r.br.Size() == largeBufferSize {
		largeReaders.Put(r.br)
	}
	r.br, r.large = r.small, false
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
			r.dropScratch()
		} else {
			r.scratch = r.scratch[:0]
		}
	}
	r.shrinkBuffer()
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
			r.growBuffer() // a long frame: read it in large pieces
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
	r.dropScratch()
	if r.large { // unusable from now on: give the large buffer back
		r.releaseLarge()
	}
	return r.err
}

// appendScratch appends b to scratch, growing it at most to r.max; the
// caller has checked that len(scratch)+len(b) <= r.max.
func (r *Reader) appendScratch(b []byte) {
	need := len(r.scratch) + len(b)
	if need > cap(r.scratch) {
		var s []byte
		if need > keepScratch && r.max == MaxFrameSize {
			if p, _ := bigScratch.Get().(*[]byte); p != nil {
				s = (*p)[:len(r.scratch)] // a long frame: no growing
			}
		}
		if s == nil {
			c := max(2*cap(r.scratch), need, 512)
			s = make([]byte, len(r.scratch), min(c, r.max))
		}
		copy(s, r.scratch)
		r.scratch = s
	}
	r.scratch = append(r.scratch, b...)
}

// dropScratch lets go of scratch, recycling it if it grew to the cap.
func (r *Reader) dropScratch() {
	if cap(r.scratch) == MaxFrameSize {
		b := r.scratch[:0]
		bigScratch.Put(&b)
	}
	r.scratch = nil
}
