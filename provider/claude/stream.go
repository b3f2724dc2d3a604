package claude

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agents-fleet/fleet/provider"
)

// stream is the state of the stdout mapping. Only the stdout goroutine
// uses it (and finish, on the same goroutine); others may read it after
// done is closed.
type stream struct {
	tools map[string]*toolCall // tool calls started and not completed

	model     string // from the last system/init
	lastMsgID string // the main thread's latest model response
	ctxTokens int64  // its context size (input + cache read + cache write)
	started   bool   // the CLI answered initialize
	// sent is the input side of the turn's responses already reported as
	// Usage (each response's, when it arrived); the result reports the
	// rest, so that the turn's Usage adds up to its result.usage.
	sent provider.Usage

	lines        int64
	unknown      map[string]int // line and block types ignored, by "type" or "type/subtype"
	garbage      int            // lines that are not JSON objects
	firstGarbage string
	startErr     string // a result's error text before any turn (a failed --resume)
	autoAllowed  int    // can_use_tool requests for the fleet's own tools, allowed unasked
	// limitUntil is when a usage limit a rate_limit_event rejected the
	// account for resets; zero when none holds.
	limitUntil time.Time
}

type toolCall struct {
	name    string
	started time.Time
	path    string // file_path / notebook_path of the input, for FileEdited
}

func newStream() stream {
	return stream{tools: map[string]*toolCall{}, unknown: map[string]int{}}
}

func (st *stream) count(kind string) { st.unknown[kind]++ }

// closeOpenTools completes the tool calls the CLI never completed, so no
// tool call is left running in anyone's view.
func (st *stream) closeOpenTools(h provider.Host, why string) {
	for id, tc := range st.tools {
		h.Event(provider.ToolCompleted{ID: id, Name: tc.name, Result: why, IsError: true, Duration: time.Since(tc.started)})
		delete(st.tools, id)
	}
}

// envelope is the top-level members of a line that the handlers use, raw.
type envelope struct {
	typ, subtype  []byte
	message       []byte
	parent        []byte
	toolUseResult []byte
	sessionID     []byte
	model         []byte
	requestID     []byte
	request       []byte
	response      []byte
}

func parseEnvelope(line []byte) (envelope, error) {
	var e envelope
	err := objectFields(line, func(k, v []byte) bool {
		switch string(k) {
		case "type":
			e.typ = v
		case "subtype":
			e.subtype = v
		case "message":
			e.message = v
		case "parent_tool_use_id":
			e.parent = v
		case "tool_use_result":
			e.toolUseResult = v
		case "session_id":
			e.sessionID = v
		case "model":
			e.model = v
		case "request_id":
			e.requestID = v
		case "request":
			e.request = v
		case "response":
			e.response = v
		}
		return true
	})
	return e, err
}

// inner is a raw JSON string's bytes between its quotes, undecoded (type
// names have no escapes); switch on string(inner(v)) does not allocate.
func inner(v []byte) []byte {
	if len(v) >= 2 && v[0] == '"' {
		return v[1 : len(v)-1]
	}
	return nil
}

// rawStr is inner as a string, for the rare paths that keep it.
func rawStr(v []byte) string { return string(inner(v)) }

// handleLine maps one stdout line.
func (s *session) handleLine(line []byte) {
	s.st.lines++
	e, err := parseEnvelope(line)
	if err != nil || e.typ == nil {
		s.onGarbage(line)
		return
	}
	switch string(inner(e.typ)) {
	case "assistant":
		s.onAssistant(e)
	case "user":
		s.onUser(e)
	case "result":
		s.onResult(line)
	case "system":
		switch string(inner(e.subtype)) {
		case "init":
			s.onInit(e)
		case "api_retry":
			s.onRetry(line)
		case "compact_boundary":
			s.h.Event(provider.Note{Text: "claude compacted the conversation"})
		default:
			s.st.count("system/" + rawStr(e.subtype))
		}
	case "rate_limit_event":
		s.onRateLimit(line)
	case "control_request":
		s.onControlRequest(e)
	case "control_response":
		s.onControlResponse(e)
	case "control_cancel_request":
		s.onControlCancel(e)
	default:
		s.st.count(rawStr(e.typ))
	}
}

func (s *session) onGarbage(line []byte) {
	s.st.garbage++
	if s.st.garbage > 1 {
		return
	}
	shown := line
	if len(shown) > 200 {
		shown = shown[:200]
		for len(shown) > 0 && !utf8.Valid(shown) {
			shown = shown[:len(shown)-1]
		}
	}
	s.st.firstGarbage = string(shown)
	if s.st.started {
		s.h.Event(provider.Note{Text: fmt.Sprintf("claude printed a line that is not JSON; it and any further ones are skipped: %q", s.st.firstGarbage)})
	}
}

func (s *session) onInit(e envelope) {
	id, _ := str(e.sessionID)
	model, _ := str(e.model)
	s.st.model = model
	if id != "" {
		s.mu.Lock()
		s.resumeID = id
		s.mu.Unlock()
	}
	s.h.Event(provider.SessionStarted{ID: id, Model: model})
}

func isNull(v []byte) bool { return len(v) == 0 || string(v) == "null" }

// onAssistant maps one content block of a model response. Lines of a
// subagent (parent_tool_use_id set) give their tool calls, not their text.
func (s *session) onAssistant(e envelope) {
	sub := !isNull(e.parent)
	var id, model, content, usage []byte
	if objectFields(e.message, func(k, v []byte) bool {
		switch string(k) {
		case "id":
			id = v
		case "model":
			model = v
		case "content":
			content = v
		case "usage":
			usage = v
		}
		return true
	}) != nil {
		s.st.count("assistant/bad-message")
		return
	}
	if string(inner(model)) == "<synthetic>" {
		return // the CLI's own error text; the result line carries it
	}
	if !sub && usage != nil && string(id) != s.st.lastMsgID {
		// Each line of a response repeats its message_start usage: the
		// request's input side is exact there (its output is not).
		s.st.lastMsgID = string(id)
		var in, cr, cw int64
		_ = objectFields(usage, func(k, v []byte) bool {
			switch string(k) {
			case "input_tokens":
				in = number(v)
			case "cache_read_input_tokens":
				cr = number(v)
			case "cache_creation_input_tokens":
				cw = number(v)
			}
			return true
		})
		s.st.ctxTokens = in + cr + cw
		// The input side is reported as the response arrives, so that a
		// budget sees a long turn grow; its output comes with the result.
		if in+cr+cw > 0 {
			s.st.sent.InputTokens += in
			s.st.sent.CacheReadTokens += cr
			s.st.sent.CacheWriteTokens += cw
			s.h.Event(provider.Usage{InputTokens: in, CacheReadTokens: cr, CacheWriteTokens: cw, ContextTokens: in + cr + cw})
		}
	}
	_ = arrayElems(content, func(b []byte) bool {
		s.onAssistantBlock(b, sub)
		return true
	})
}

func (s *session) onAssistantBlock(b []byte, sub bool) {
	var typ, text, thinking, id, name, input []byte
	if objectFields(b, func(k, v []byte) bool {
		switch string(k) {
		case "type":
			typ = v
		case "text":
			text = v
		case "thinking":
			thinking = v
		case "id":
			id = v
		case "name":
			name = v
		case "input":
			input = v
		}
		return true
	}) != nil {
		s.st.count("assistant/bad-block")
		return
	}
	switch string(inner(typ)) {
	case "text":
		if !sub {
			if txt, _ := str(text); txt != "" {
				s.h.Event(provider.Text{Text: txt})
			}
		}
	case "thinking":
		if !sub {
			if txt, _ := str(thinking); txt != "" {
				s.h.Event(provider.Text{Text: txt, Reasoning: true})
			}
		}
	case "redacted_thinking":
	case "tool_use":
		callID, _ := str(id)
		toolName, _ := str(name)
		var in map[string]any
		if len(input) > 0 {
			_ = json.Unmarshal(input, &in)
		}
		tc := &toolCall{name: toolName, started: time.Now()}
		if p, ok := in["file_path"].(string); ok {
			tc.path = p
		} else if p, ok := in["notebook_path"].(string); ok {
			tc.path = p
		}
		s.st.tools[callID] = tc
		s.h.Event(provider.ToolStarted{ID: callID, Name: toolName, Detail: detail(in), Input: in})
	default:
		s.st.count("assistant/" + rawStr(typ))
	}
}

// detailKeys are the input members that say, in order of preference, what
// a tool call does.
var detailKeys = []string{"command", "file_path", "notebook_path", "pattern", "path", "url", "query", "description", "prompt", "skill"}

// detail is one line for humans about a tool call.
func detail(in map[string]any) string {
	for _, k := range detailKeys {
		if v, ok := in[k].(string); ok && v != "" {
			return oneLine(v)
		}
	}
	if len(in) == 0 {
		return ""
	}
	b, err := json.Marshal(in)
	if err != nil {
		return ""
	}
	return oneLine(string(b))
}

// oneLine is s's first line, at most 200 runes, marked when cut.
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	cut := false
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s, cut = strings.TrimSpace(s[:i]), true
	}
	if utf8.RuneCountInString(s) > 200 {
		r := []rune(s)
		s, cut = string(r[:200]), true
	}
	if cut {
		s += " …"
	}
	return s
}

// onUser maps tool results. Other user lines (a replayed prompt, the
// CLI's "[Request interrupted …]" note) carry nothing new.
func (s *session) onUser(e envelope) {
	content := field(e.message, "content")
	if len(content) == 0 || content[0] != '[' {
		return
	}
	var results [][]byte
	_ = arrayElems(content, func(b []byte) bool {
		if string(inner(field(b, "type"))) == "tool_result" {
			results = append(results, b)
		}
		return true
	})
	for _, b := range results {
		var tur []byte
		if len(results) == 1 {
			tur = e.toolUseResult
		}
		s.onToolResult(b, tur)
	}
}

func (s *session) onToolResult(b, toolUseResult []byte) {
	var idRaw, contentRaw []byte
	isErr := false
	_ = objectFields(b, func(k, v []byte) bool {
		switch string(k) {
		case "tool_use_id":
			idRaw = v
		case "content":
			contentRaw = v
		case "is_error":
			isErr = boolean(v)
		}
		return true
	})
	id, _ := str(idRaw)
	tc := s.st.tools[id]
	delete(s.st.tools, id)
	ev := provider.ToolCompleted{ID: id, Result: resultText(contentRaw), IsError: isErr}
	if tc != nil {
		ev.Name = tc.name
		ev.Duration = time.Since(tc.started)
	}
	s.h.Event(ev)
	if tc == nil || isErr {
		return
	}
	if path, change, ok := fileEdit(tc, toolUseResult); ok {
		s.h.Event(provider.FileEdited{Path: path, Change: change, Tool: tc.name})
	}
}

// resultText is a tool_result's content: a string, or the text of its
// blocks (MCP tools), one per line.
func resultText(raw []byte) string {
	if s, ok := str(raw); ok {
		return s
	}
	if len(raw) == 0 || raw[0] != '[' {
		return ""
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &blocks) != nil {
		return ""
	}
	var sb strings.Builder
	for i, bl := range blocks {
		if i > 0 {
			sb.WriteByte('\n')
		}
		if bl.Type == "text" {
			sb.WriteString(bl.Text)
		} else {
			sb.WriteString("[" + bl.Type + "]")
		}
	}
	return sb.String()
}

// fileEdit says which file an edit tool changed and how, from the tool's
// structured result (tool_use_result) and, without one, from its input.
func fileEdit(tc *toolCall, toolUseResult []byte) (string, provider.Change, bool) {
	var typ, filePath string
	if len(toolUseResult) > 0 && toolUseResult[0] == '{' {
		_ = objectFields(toolUseResult, func(k, v []byte) bool {
			switch string(k) {
			case "type":
				typ, _ = str(v)
			case "filePath", "notebook_path":
				filePath, _ = str(v)
			}
			return true
		})
	}
	path := filePath
	if path == "" {
		path = tc.path
	}
	switch tc.name {
	case "Write":
		if typ == "create" {
			return path, provider.Created, path != ""
		}
		return path, provider.Edited, path != ""
	case "Edit", "MultiEdit", "NotebookEdit":
		return path, provider.Edited, path != ""
	}
	return "", "", false
}

// resultLine is the part of a result line the adapter uses.
type resultLine struct {
	Subtype        string
	IsError        bool
	APIErrorStatus *int
	Result         string
	Errors         []string
	InputTokens    int64
	OutputTokens   int64
	CacheRead      int64
	CacheWrite     int64
	// ContextWindows is modelUsage's contextWindow by model.
	ContextWindows map[string]int64
}

// parseResult reads a result line member by member (it is one of the
// longest lines, and most of it is not needed).
func parseResult(line []byte) (resultLine, error) {
	var r resultLine
	err := objectFields(line, func(k, v []byte) bool {
		switch string(k) {
		case "subtype":
			r.Subtype, _ = str(v)
		case "is_error":
			r.IsError = boolean(v)
		case "api_error_status":
			if !isNull(v) {
				n := int(number(v))
				r.APIErrorStatus = &n
			}
		case "result":
			r.Result, _ = str(v)
		case "errors":
			_ = json.Unmarshal(v, &r.Errors)
		case "usage":
			_ = objectFields(v, func(k, v []byte) bool {
				switch string(k) {
				case "input_tokens":
					r.InputTokens = number(v)
				case "output_tokens":
					r.OutputTokens = number(v)
				case "cache_read_input_tokens":
					r.CacheRead = number(v)
				case "cache_creation_input_tokens":
					r.CacheWrite = number(v)
				}
				return true
			})
		case "modelUsage":
			_ = objectFields(v, func(model, mu []byte) bool {
				if w := number(field(mu, "contextWindow")); w > 0 {
					if r.ContextWindows == nil {
						r.ContextWindows = map[string]int64{}
					}
					name, _ := str(append(append([]byte{'"'}, model...), '"'))
					r.ContextWindows[name] = w
				}
				return true
			})
		}
		return true
	})
	return r, err
}

// onResult ends the turn. result.usage is the turn's own total (the sum of
// its requests, each once): what of it was not reported yet (the output,
// and any input the responses did not show) is the turn's last Usage.
// modelUsage accumulates over the session and only gives the context
// window.
func (s *session) onResult(line []byte) {
	r, err := parseResult(line)
	if err != nil {
		s.onGarbage(line)
		return
	}
	s.mu.Lock()
	t := s.turn
	s.turn = nil
	s.disarmWatchdogLocked()
	s.mu.Unlock()
	sent := s.st.sent
	s.st.sent = provider.Usage{}
	if t == nil {
		if s.st.startErr == "" {
			s.st.startErr = resultError(r).Error()
		}
		s.st.count("result/outside-turn")
		return
	}
	u := provider.Usage{
		InputTokens:      max(r.InputTokens-sent.InputTokens, 0),
		OutputTokens:     r.OutputTokens,
		CacheReadTokens:  max(r.CacheRead-sent.CacheReadTokens, 0),
		CacheWriteTokens: max(r.CacheWrite-sent.CacheWriteTokens, 0),
		ContextTokens:    s.st.ctxTokens,
		ContextWindow:    contextWindow(r, s.st.model),
	}
	if u.InputTokens+u.OutputTokens+u.CacheReadTokens+u.CacheWriteTokens > 0 {
		s.h.Event(u)
	}
	s.st.closeOpenTools(s.h, "the turn ended before the tool finished")
	s.mu.Lock()
	interrupted := t.interrupted
	s.mu.Unlock()
	ev := provider.TurnEnded{Result: r.Result}
	switch {
	case !r.IsError:
	case interrupted:
		ev.Interrupted = true
	case r.APIErrorStatus != nil && *r.APIErrorStatus == 429:
		// A limit: the fleet waits it out and resumes the session.
		until := s.st.limitUntil
		if until.IsZero() {
			until, _ = provider.ResetFromText(r.Result, time.Now())
		}
		ev.Err = &provider.RateLimitError{Until: until, Reason: resultError(r).Error()}
	case r.APIErrorStatus != nil && *r.APIErrorStatus >= 500, r.APIErrorStatus == nil && connectionFailed(r.Result):
		ev.Err = &provider.TransportError{Reason: resultError(r).Error()}
	default:
		ev.Err = resultError(r)
	}
	s.h.Event(ev)
	t.cancel()
	close(t.ended)
}

// contextWindow is the session model's window, or the largest one when
// the model is not listed (subagents may use others).
func contextWindow(r resultLine, model string) int64 {
	if w, ok := r.ContextWindows[model]; ok {
		return w
	}
	var w int64
	for _, cw := range r.ContextWindows {
		w = max(w, cw)
	}
	return w
}

// turnError is a failed turn in the CLI's own words.
type turnError struct {
	msg string
}

func (e *turnError) Error() string { return e.msg }

// connectionFailed reports whether a failed result says the model API
// could not be reached ("API Error: Unable to connect to API
// (ConnectionRefused)", "API Error: Connection error.").
func connectionFailed(result string) bool {
	return strings.Contains(result, "Unable to connect to API") || strings.Contains(result, "Connection error")
}

// resultError builds a failed turn's error from its result line: the
// result text (the API error message), the errors list, the HTTP status
// and the subtype, each once.
func resultError(r resultLine) error {
	var parts []string
	if t := strings.TrimSpace(r.Result); t != "" {
		parts = append(parts, t)
	}
	for _, e := range r.Errors {
		if e = strings.TrimSpace(e); e != "" {
			parts = append(parts, e)
		}
	}
	msg := strings.Join(parts, "; ")
	if r.APIErrorStatus != nil {
		if st := strconv.Itoa(*r.APIErrorStatus); !strings.Contains(msg, st) {
			msg = strings.TrimPrefix(msg+" (HTTP status "+st+")", " ")
		}
	}
	if msg == "" {
		msg = "claude ended the turn with an error"
	}
	if r.Subtype != "" && r.Subtype != "success" && !strings.Contains(msg, r.Subtype) {
		msg += " [" + r.Subtype + "]"
	}
	return &turnError{msg: msg}
}

type retryLine struct {
	Attempt      int     `json:"attempt"`
	MaxRetries   int     `json:"max_retries"`
	RetryDelayMS float64 `json:"retry_delay_ms"`
	ErrorStatus  *int    `json:"error_status"`
	Error        string  `json:"error"`
}

func (s *session) onRetry(line []byte) {
	var r retryLine
	if json.Unmarshal(line, &r) != nil {
		s.st.count("system/api_retry")
		return
	}
	what := "failed"
	if r.ErrorStatus != nil {
		what = "answered " + strconv.Itoa(*r.ErrorStatus)
	}
	if r.Error != "" {
		what += " (" + r.Error + ")"
	}
	delay := time.Duration(r.RetryDelayMS * float64(time.Millisecond)).Round(100 * time.Millisecond)
	s.h.Event(provider.Note{Text: fmt.Sprintf("the model API %s; claude retries (%d of %d) in %v", what, r.Attempt, r.MaxRetries, delay)})
	if (r.ErrorStatus != nil && *r.ErrorStatus == 429) || r.Error == "rate_limit" {
		// Claude waits a retry-after itself: the account is limited until then.
		s.h.Event(provider.RateLimited{Until: time.Now().Add(delay), Retrying: true,
			Reason: fmt.Sprintf("the model API answered 429; claude waits %v and retries", delay)})
	}
}

// onRateLimit reads a rate_limit_event (a subscription credential's
// limits): a rejected status says the account is limited until resetsAt
// (epoch seconds), exactly; the turn then ends with a 429 result.
func (s *session) onRateLimit(line []byte) {
	var ev struct {
		Info struct {
			Status   string  `json:"status"`
			ResetsAt float64 `json:"resetsAt"`
			Type     string  `json:"rateLimitType"`
		} `json:"rate_limit_info"`
	}
	if json.Unmarshal(line, &ev) != nil {
		s.st.count("rate_limit_event")
		return
	}
	if ev.Info.Status != "rejected" {
		s.st.limitUntil = time.Time{}
		return
	}
	until := time.Time{}
	if ev.Info.ResetsAt > 0 && ev.Info.ResetsAt < 1e11 { // seconds, and sane
		until = time.Unix(int64(ev.Info.ResetsAt), 0)
	}
	s.st.limitUntil = until
	what := "usage limit"
	if ev.Info.Type != "" {
		what += " (" + ev.Info.Type + ")"
	}
	s.h.Event(provider.RateLimited{Until: until, Reason: "claude: " + what + " reached"})
}

func (s *session) onControlResponse(e envelope) {
	var sub, id, resp, errText []byte
	_ = objectFields(e.response, func(k, v []byte) bool {
		switch string(k) {
		case "subtype":
			sub = v
		case "request_id":
			id = v
		case "response":
			resp = v
		case "error":
			errText = v
		}
		return true
	})
	rid, _ := str(id)
	s.mu.Lock()
	ch := s.pending[rid]
	delete(s.pending, rid)
	s.mu.Unlock()
	if ch == nil {
		return // an interrupt's answer: the result line is what counts
	}
	if rid == initID {
		s.st.started = true
	}
	if string(inner(sub)) == "success" {
		ch <- controlReply{raw: resp}
		return
	}
	msg, _ := str(errText)
	if msg == "" {
		msg = "claude refused the " + rid + " control request"
	}
	ch <- controlReply{err: &turnError{msg: msg}}
}

func (s *session) onControlCancel(e envelope) {
	id, _ := str(e.requestID)
	s.prompts.Withdraw(id)
}
