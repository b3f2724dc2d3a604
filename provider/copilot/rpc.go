package copilot

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agents-fleet/fleet/provider/agentcli"
)

// maxLine is the longest line the adapter reads from the CLI. A longer
// one is a protocol error that ends the session; reading it never
// allocates more than this.
const maxLine = 8 << 20

// errLineTooLong is the line reader's error for a line over the cap.
var errLineTooLong = agentcli.ErrLineTooLong

func newLineReader(r io.Reader, max int) *agentcli.LineReader { return agentcli.NewLineReader(r, max) }

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
