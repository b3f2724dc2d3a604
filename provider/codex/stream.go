package codex

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/agents-fleet/fleet/provider/agentcli"

	"github.com/agents-fleet/fleet/provider"
)

// errLineTooLong is the line reader's error for a line over the cap.
var errLineTooLong = agentcli.ErrLineTooLong

func newLineReader(r io.Reader, max int) *agentcli.LineReader { return agentcli.NewLineReader(r, max) }

// readState is what the reader goroutine keeps between lines.
type readState struct {
	items     map[string]*openItem // tool items started and not completed
	ended     map[string]bool      // tool items a turn end completed; a late item/completed is dropped
	itemSeq   int
	total     *tokenBreakdown // the thread's last cumulative usage
	lastText  string          // the turn's last agent message
	sessionID string          // the thread id last reported

	garbage        int // lines that are not JSON-RPC
	unknown        int // notifications of methods the adapter does not know
	unknownMethods map[string]int
	badItems       int // items that did not decode
}

func (r *readState) init() {
	r.items = map[string]*openItem{}
	r.ended = map[string]bool{}
	r.unknownMethods = map[string]int{}
}

const (
	// maxUnknownMethods bounds the per-method counts kept.
	maxUnknownMethods = 64
	// maxEnded bounds the ids of items completed at a turn's end.
	maxEnded = 1024
)

type openItem struct {
	seq     int
	name    string
	start   time.Time
	changes []fileUpdate
}

// envelope is a JSON-RPC message as the CLI writes it (without "jsonrpc").
type envelope struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *rpcError       `json:"error"`
}

// handleLine decodes one stdout line and acts on it. Reader goroutine only.
//
// The CLI writes "method" first in its notifications and requests, so the
// method is read off the line's start and the line is decoded once, straight
// into what that method's handler needs (encoding/json validates it on the
// way: a broken line is garbage all the same). Other lines go through the
// generic envelope.
func (s *session) handleLine(line []byte) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return
	}
	if method, ok := peekMethod(line); ok {
		if ignored[method] {
			if !json.Valid(line) {
				s.garbageLine(line)
			}
			return
		}
		if s.skippable(method, line) {
			return
		}
		m := message{line: line}
		if isRequest(method) {
			id := peekID(line, method)
			if id == nil {
				var head struct {
					ID json.RawMessage `json:"id"`
				}
				if json.Unmarshal(line, &head) != nil {
					s.garbageLine(line)
					return
				}
				id = head.ID
			}
			if len(id) > 0 {
				s.serverRequest(method, id, m)
				return
			}
		}
		s.notification(method, m)
		return
	}
	if s.unawaitedResponse(line) {
		return
	}
	var env envelope
	if line[0] != '{' || json.Unmarshal(line, &env) != nil {
		s.garbageLine(line)
		return
	}
	m := message{params: env.Params, parsed: true}
	switch {
	case env.Method != "" && len(env.ID) > 0:
		s.serverRequest(env.Method, env.ID, m)
	case env.Method != "":
		s.notification(env.Method, m)
	case len(env.ID) > 0:
		s.response(env)
	default:
		s.garbageLine(line)
	}
}

// peekMethod reads the method of a line that starts {"method":"….
func peekMethod(line []byte) (string, bool) {
	const prefix = `{"method":"`
	if !bytes.HasPrefix(line, []byte(prefix)) {
		return "", false
	}
	rest := line[len(prefix):]
	end := bytes.IndexByte(rest, '"')
	if end <= 0 || bytes.IndexByte(rest[:end], '\\') >= 0 {
		return "", false
	}
	return string(rest[:end]), true
}

// skippable reports lines that would map to nothing, read off their start
// without decoding them: item/started of items that are not tools (text
// and reasoning map at item/completed), a user message's items, and
// thread/started of the thread already reported. These prefixes follow
// the CLI's field order; a line in another order is decoded as usual.
func (s *session) skippable(method string, line []byte) bool {
	switch method {
	case "item/started", "item/completed":
		const prefix = `"params":{"item":{"type":"`
		off := len(`{"method":"`) + len(method) + len(`",`)
		if off > len(line) {
			return false
		}
		rest := line[off:]
		if !bytes.HasPrefix(rest, []byte(prefix)) {
			return false
		}
		rest = rest[len(prefix):]
		end := bytes.IndexByte(rest, '"')
		if end < 0 {
			return false
		}
		switch string(rest[:end]) {
		case "userMessage", "hookPrompt":
			return true
		case "agentMessage", "reasoning", "plan", "contextCompaction":
			return method == "item/started"
		}
	case "thread/started":
		if s.rd.sessionID == "" {
			return false
		}
		prefix := `{"method":"thread/started","params":{"thread":{"id":"` + s.rd.sessionID + `"`
		return bytes.HasPrefix(line, []byte(prefix))
	}
	return false
}

// unawaitedResponse reports a response ({"id":N,…) to no request of ours
// that waits — an answer already given up on — without decoding it.
func (s *session) unawaitedResponse(line []byte) bool {
	const prefix = `{"id":`
	if !bytes.HasPrefix(line, []byte(prefix)) {
		return false
	}
	rest := line[len(prefix):]
	end := bytes.IndexByte(rest, ',')
	if end <= 0 {
		return false
	}
	if after := rest[end:]; !bytes.HasPrefix(after, []byte(`,"result":`)) && !bytes.HasPrefix(after, []byte(`,"error":`)) {
		return false // a request written id first
	}
	id, err := strconv.ParseInt(string(rest[:end]), 10, 64)
	if err != nil {
		return false
	}
	s.mu.Lock()
	_, waiting := s.pending[id]
	s.mu.Unlock()
	return !waiting
}

// peekID reads the id of a request line that starts
// {"method":"M","id":N, (the CLI's order); nil when it does not.
func peekID(line []byte, method string) json.RawMessage {
	rest := line[len(`{"method":"`)+len(method):]
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
		return nil // a string id: let the decoder read it
	}
	return json.RawMessage(bytes.Clone(rest[:end])) // the line buffer is reused
}

// isRequest reports whether method is one the CLI sends as a request (it
// needs the line's id); unknown methods are checked for an id too.
func isRequest(method string) bool {
	switch method {
	case "item/started", "item/completed", "thread/tokenUsage/updated", "turn/started", "turn/completed",
		"thread/started", "error", "serverRequest/resolved", "configWarning", "deprecationNotice", "warning",
		"guardianWarning", "model/rerouted", "mcpServer/startupStatus/updated", "thread/compacted":
		return false
	}
	return true
}

// message is a notification's or request's params: either the whole line
// (decoded through its "params" field) or params already split off.
type message struct {
	line   []byte
	params json.RawMessage
	parsed bool // params is set (the line was decoded as an envelope)
}

// decode decodes the params into v, a pointer; false when they do not fit
// (a broken line, or params of another shape).
func (m message) decode(v any) error {
	if m.parsed {
		if len(m.params) == 0 {
			return errNoParams
		}
		return json.Unmarshal(m.params, v)
	}
	wrap := struct {
		Params any `json:"params"`
	}{v}
	return json.Unmarshal(m.line, &wrap)
}

// raw returns the params as raw JSON.
func (m message) raw() json.RawMessage {
	if m.parsed {
		return m.params
	}
	var wrap struct {
		Params json.RawMessage `json:"params"`
	}
	_ = json.Unmarshal(m.line, &wrap)
	return wrap.Params
}

var errNoParams = errors.New("no params")

// decode is m.decode; a line that is not JSON at all counts as garbage.
func (s *session) decode(m message, v any) error {
	err := m.decode(v)
	var syntax *json.SyntaxError
	if errors.As(err, &syntax) && !m.parsed {
		s.garbageLine(m.line)
	}
	return err
}

func (s *session) garbageLine(line []byte) {
	s.rd.garbage++
	if s.rd.garbage == 1 {
		s.emit(provider.Note{Text: fmt.Sprintf("codex app-server printed a line that is not JSON-RPC; ignoring it and any more: %q", lastBytesFromStart(line, 200))})
	}
}

func lastBytesFromStart(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

func (s *session) response(env envelope) {
	id, err := strconv.ParseInt(string(env.ID), 10, 64)
	if err != nil {
		s.rd.unknown++
		return
	}
	s.mu.Lock()
	cb := s.pending[id]
	delete(s.pending, id)
	s.mu.Unlock()
	if cb == nil {
		return
	}
	if env.Error != nil {
		cb(reply{err: env.Error})
		return
	}
	cb(reply{result: env.Result})
}

// ignored are notifications the adapter knows and does not map (most are
// also opted out of at initialize).
var ignored = map[string]bool{}

func init() {
	for _, m := range optOut {
		ignored[m] = true
	}
	for _, m := range []string{
		"thread/readState/changed", "thread/name/updated", "thread/goal/updated", "thread/goal/cleared",
		"thread/settings/updated", "thread/queue/changed", "thread/prediction/updated", "thread/section/changed",
		"thread/attachment/updated", "thread/environment/connected", "thread/environment/disconnected",
		"thread/project/updated", "project/changed", "thread/archived", "thread/unarchived", "thread/closed",
		"skills/changed", "hook/started", "hook/completed", "turn/plan/updated", "turn/moderationMetadata",
		"item/autoApprovalReview/started", "item/autoApprovalReview/completed",
		"item/commandExecution/terminalInteraction", "item/fileChange/patchUpdated", "item/mcpToolCall/progress",
		"process/exited", "mcpServer/oauthLogin/completed", "mcpServer/event/stream/notification",
		"account/updated", "account/gatewayOAuth/changed", "app/list/updated", "fs/changed",
		"model/verification", "model/safetyBuffering/updated",
		"modelProvider/authRecoveryStarted", "modelProvider/authRecoveryCompleted",
	} {
		ignored[m] = true
	}
}

func (s *session) notification(method string, m message) {
	switch method {
	case "item/started":
		var p struct {
			Item threadItem `json:"item"`
		}
		if s.decode(m, &p) != nil {
			s.rd.badItems++
			return
		}
		s.itemStarted(&p.Item)
	case "item/completed":
		var p struct {
			Item threadItem `json:"item"`
		}
		if s.decode(m, &p) != nil {
			s.rd.badItems++
			return
		}
		s.itemCompleted(&p.Item)
	case "thread/tokenUsage/updated":
		s.tokenUsage(m)
	case "turn/started":
		var p struct {
			Turn struct {
				ID string `json:"id"`
			} `json:"turn"`
		}
		_ = s.decode(m, &p)
		s.mu.Lock()
		tr := s.turn
		s.mu.Unlock()
		if tr != nil {
			s.setTurnID(tr, p.Turn.ID)
		}
	case "turn/completed":
		s.turnCompleted(m)
	case "thread/started":
		var p struct {
			Thread struct {
				ID    string `json:"id"`
				Model string `json:"model"`
			} `json:"thread"`
		}
		if s.decode(m, &p) == nil && p.Thread.ID != "" && p.Thread.ID != s.rd.sessionID {
			s.rd.sessionID = p.Thread.ID
			s.emit(provider.SessionStarted{ID: p.Thread.ID, Model: p.Thread.Model})
		}
	case "error":
		var p struct {
			Error     turnError `json:"error"`
			WillRetry bool      `json:"willRetry"`
		}
		if s.decode(m, &p) == nil && p.WillRetry {
			// A retry; the final error ends the turn in turn/completed.
			s.emit(provider.Note{Text: "codex: " + p.Error.text()})
		}
	case "serverRequest/resolved":
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		if s.decode(m, &p) == nil {
			s.resolved(p.RequestID)
		}
	case "configWarning", "deprecationNotice":
		var p struct {
			Summary string  `json:"summary"`
			Details *string `json:"details"`
		}
		if s.decode(m, &p) == nil && p.Summary != "" {
			text := p.Summary
			if p.Details != nil && *p.Details != "" {
				text += " " + *p.Details
			}
			s.emit(provider.Note{Text: "codex: " + text})
		}
	case "warning", "guardianWarning":
		var p struct {
			Message string `json:"message"`
		}
		if s.decode(m, &p) == nil && p.Message != "" {
			s.emit(provider.Note{Text: "codex: " + p.Message})
		}
	case "model/rerouted":
		var p struct {
			From   string          `json:"fromModel"`
			To     string          `json:"toModel"`
			Reason json.RawMessage `json:"reason"`
		}
		if s.decode(m, &p) == nil {
			s.emit(provider.Note{Text: fmt.Sprintf("codex: model rerouted from %s to %s (%s)", p.From, p.To, bytes.Trim(p.Reason, `"`))})
		}
	case "mcpServer/startupStatus/updated":
		var p struct {
			Name   string  `json:"name"`
			Status string  `json:"status"`
			Error  *string `json:"error"`
		}
		if s.decode(m, &p) == nil && p.Status == "failed" {
			msg := "codex: MCP server " + p.Name + " failed to start"
			if p.Error != nil && *p.Error != "" {
				msg += ": " + *p.Error
			}
			s.emit(provider.Note{Text: msg})
		}
	case "thread/compacted":
		s.emit(provider.Note{Text: "codex: the conversation was compacted to fit the context window"})
	default:
		if ignored[method] {
			return
		}
		if !m.parsed && !json.Valid(m.line) {
			s.garbageLine(m.line)
			return
		}
		s.rd.unknown++
		if _, ok := s.rd.unknownMethods[method]; ok || len(s.rd.unknownMethods) < maxUnknownMethods {
			s.rd.unknownMethods[method]++
		}
	}
}
