package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
)

// Message is a JSON-RPC 2.0 envelope as read: a request (ID and Method), a
// notification (Method only) or a response (ID and Result or Error).
// Params and Result stay raw until the handler that owns them decodes
// them.
type Message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`
}

func (m *Message) hasID() bool { return len(m.ID) > 0 && string(m.ID) != "null" }

// outgoing is a message as written; JSONRPC is left out in the dialect
// that has none (Codex's).
type outgoing struct {
	JSONRPC string          `json:"jsonrpc,omitempty"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  any             `json:"params,omitempty"`
	Result  any             `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`
}

// Error is a JSON-RPC error object, as answered by either side.
type Error struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// Error codes the clients answer with.
const (
	CodeMethodNotFound = -32601
	// CodeBusy answers a request while MaxPrompts prompts are open.
	CodeBusy = -32000
)

// Error is the message, the data when it is text, and the code.
func (e *Error) Error() string {
	s := e.Message
	var d string
	if len(e.Data) > 0 && json.Unmarshal(e.Data, &d) == nil && d != "" && d != s {
		if len(d) > maxData {
			d = "…" + d[len(d)-maxData:]
		}
		if s != "" {
			s += ": "
		}
		s += d
	}
	if s == "" {
		return "JSON-RPC error " + strconv.Itoa(e.Code)
	}
	return s + " (JSON-RPC error " + strconv.Itoa(e.Code) + ")"
}

// maxData is how much of an error's data its text quotes.
const maxData = 2000

// Params are a request's or notification's params. They are decoded only
// by the handler that owns them, straight from the whole line when the
// dispatcher read the method off the line's start (one decoding pass for
// the common messages), else from the params the envelope split off.
type Params struct {
	line  []byte          // the whole line, when the params were not split off
	raw   json.RawMessage // the params, when they were
	split bool
}

var errNoParams = errors.New("no params")

// Decode decodes the params into v, a pointer. A line that is not JSON
// fails with a *json.SyntaxError.
func (p Params) Decode(v any) error {
	if p.split {
		if len(p.raw) == 0 {
			return errNoParams
		}
		return json.Unmarshal(p.raw, v)
	}
	wrap := struct {
		Params any `json:"params"`
	}{v}
	return json.Unmarshal(p.line, &wrap)
}

// Raw is the params as raw JSON (nil when the line does not decode).
func (p Params) Raw() json.RawMessage {
	if p.split {
		return p.raw
	}
	var wrap struct {
		Params json.RawMessage `json:"params"`
	}
	_ = json.Unmarshal(p.line, &wrap)
	return wrap.Params
}

// Line is the whole line the params are in; nil once the envelope was
// decoded (the line was valid JSON then). Valid until the handler returns.
func (p Params) Line() []byte { return p.line }

// Valid reports whether the message is JSON.
func (p Params) Valid() bool { return p.split || json.Valid(p.line) }

// The fast path reads what the CLIs write first: "method" (after
// "jsonrpc" in the 2.0 dialect) in requests and notifications, with a
// numeric "id" next in requests; "id" then "result" or "error" in
// responses. A line in another order is decoded whole.

// peekMethod reads the method of a line that starts with prefix (`{"method":"`
// or `{"jsonrpc":"2.0","method":"`) and returns what follows it.
func peekMethod(line []byte, prefix string) (method string, rest []byte, ok bool) {
	if !bytes.HasPrefix(line, []byte(prefix)) {
		return "", nil, false
	}
	rest = line[len(prefix):]
	end := bytes.IndexByte(rest, '"')
	if end <= 0 || bytes.IndexByte(rest[:end], '\\') >= 0 {
		return "", nil, false
	}
	return string(rest[:end]), rest[end:], true
}

// peekID reads a numeric id right after the method (rest starts at the
// method's closing quote); nil when the line does not go on that way. The
// id is copied: the line's buffer is reused.
func peekID(rest []byte) json.RawMessage {
	const key = `","id":`
	if !bytes.HasPrefix(rest, []byte(key)) {
		return nil
	}
	rest = rest[len(key):]
	end := bytes.IndexByte(rest, ',')
	if end <= 0 {
		return nil
	}
	if _, err := strconv.ParseInt(string(rest[:end]), 10, 64); err != nil {
		return nil // a string id: the decoder reads it
	}
	return bytes.Clone(rest[:end])
}

// peekResponse reads the id of a response line that starts with prefix
// (`{"id":` or `{"jsonrpc":"2.0","id":`) and goes on with a result or an
// error.
func peekResponse(line []byte, prefix string) (int64, bool) {
	if !bytes.HasPrefix(line, []byte(prefix)) {
		return 0, false
	}
	rest := line[len(prefix):]
	end := bytes.IndexByte(rest, ',')
	if end <= 0 {
		return 0, false
	}
	if after := rest[end:]; !bytes.HasPrefix(after, []byte(`,"result":`)) && !bytes.HasPrefix(after, []byte(`,"error":`)) {
		return 0, false // a request written id first
	}
	id, err := strconv.ParseInt(string(rest[:end]), 10, 64)
	return id, err == nil
}
