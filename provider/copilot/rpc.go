package copilot

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// maxLine is the longest line the adapter reads from the CLI. A longer
// one is a protocol error that ends the session; reading it never
// allocates more than this.
const maxLine = 8 << 20

// errLineTooLong is the protocol error for a line over maxLine.
var errLineTooLong = fmt.Errorf("the CLI printed a line longer than %d MiB", maxLine>>20)

// lineReader reads newline-terminated lines of at most max bytes: short
// lines straight from bufio's buffer, long ones assembled in a scratch
// buffer that is dropped after use when it grew large.
type lineReader struct {
	r   *bufio.Reader
	max int
	big []byte
}

// bigKeep is the scratch capacity kept between long lines.
const bigKeep = 1 << 20

func newLineReader(r io.Reader, max int) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, 64<<10), max: max}
}

// next returns the next line without its newline (and a trailing CR); the
// slice is valid until the following call. A final line without a newline
// is returned too; then io.EOF.
func (l *lineReader) next() ([]byte, error) {
	if cap(l.big) > bigKeep {
		l.big = nil
	}
	b, err := l.r.ReadSlice('\n')
	switch {
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
			return nil, errLineTooLong
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

func trimEOL(b []byte) []byte {
	b = b[:len(b)-1]
	if len(b) > 0 && b[len(b)-1] == '\r' {
		b = b[:len(b)-1]
	}
	return b
}

// message is a JSON-RPC 2.0 envelope: a request (ID and Method), a
// notification (Method only) or a response (ID and Result or Error).
// Params and Result stay raw until the handler that owns them decodes
// them.
type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

func (m *message) isRequest() bool      { return m.Method != "" && len(m.ID) > 0 && !isNull(m.ID) }
func (m *message) isNotification() bool { return m.Method != "" && (len(m.ID) == 0 || isNull(m.ID)) }
func (m *message) isResponse() bool     { return m.Method == "" && len(m.ID) > 0 }

func isNull(b json.RawMessage) bool { return string(b) == "null" }

// rpcError is a JSON-RPC error object.
type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *rpcError) Error() string {
	s := e.Message
	if s == "" {
		s = "error " + strconv.Itoa(e.Code)
	}
	var d string // data adds to the message only when it is text
	if len(e.Data) > 0 && json.Unmarshal(e.Data, &d) == nil && d != "" && d != s {
		s += ": " + lastBytes(d, 2000)
	}
	return s
}

// JSON-RPC error codes the adapter answers with.
const (
	codeMethodNotFound = -32601
)

// parseID reads a response id the adapter sent (always a number).
func parseID(raw json.RawMessage) (int64, bool) {
	n, err := strconv.ParseInt(string(bytes.TrimSpace(raw)), 10, 64)
	return n, err == nil
}

// writer writes JSON-RPC lines to the CLI's stdin. Each line goes out in
// one Write, under mu, so concurrent writers never interleave. close does
// not take mu: closing the pipe ends a Write that blocks because the CLI
// stopped reading, as does the write deadline.
type writer struct {
	mu     sync.Mutex
	w      io.WriteCloser
	closed atomic.Bool
}

// errStdinClosed is returned by writes after the adapter closed stdin.
var errStdinClosed = errors.New("the CLI's stdin is closed")

func (w *writer) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed.Load() {
		return errStdinClosed
	}
	if d, ok := w.w.(interface{ SetWriteDeadline(time.Time) error }); ok {
		_ = d.SetWriteDeadline(time.Now().Add(writeTimeout))
	}
	_, err = w.w.Write(b)
	return err
}

// writeTimeout bounds one write to the CLI: a CLI that stopped reading
// its stdin fails the write instead of blocking its writer (Close among
// them) for ever.
const writeTimeout = 10 * time.Second

// close closes stdin once; later sends fail with errStdinClosed.
func (w *writer) close() {
	if w.closed.CompareAndSwap(false, true) {
		_ = w.w.Close()
	}
}

type request struct {
	JSONRPC string `json:"jsonrpc"`
	ID      int64  `json:"id"`
	Method  string `json:"method"`
	Params  any    `json:"params"`
}

type notification struct {
	JSONRPC string `json:"jsonrpc"`
	Method  string `json:"method"`
	Params  any    `json:"params"`
}

type response struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}
