package copilot

import (
	"bytes"
	"encoding/json"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agents-fleet/fleet/provider"
	"github.com/agents-fleet/fleet/provider/agentcli"
	"github.com/agents-fleet/fleet/provider/agentcli/jsonrpc"
)

// update is one session/update's "update" object: the union of the
// fields of the update kinds the adapter maps (ACP's SessionUpdate).
// ToolCall and ToolCallUpdate share their fields; in an update, a field
// that is absent leaves the call's earlier value as it was.
type update struct {
	SessionUpdate string `json:"sessionUpdate"`

	// agent_message_chunk, agent_thought_chunk, user_message_chunk
	Content json.RawMessage `json:"content,omitempty"`

	// tool_call, tool_call_update
	ToolCallID string          `json:"toolCallId,omitempty"`
	Title      *string         `json:"title,omitempty"`
	Kind       *string         `json:"kind,omitempty"`
	Status     *string         `json:"status,omitempty"`
	RawInput   json.RawMessage `json:"rawInput,omitempty"`
	RawOutput  json.RawMessage `json:"rawOutput,omitempty"`
	Locations  []location      `json:"locations,omitempty"`

	// usage_update
	Used *int64 `json:"used,omitempty"`
	Size *int64 `json:"size,omitempty"`
}

type location struct {
	Path string `json:"path"`
}

// contentBlock is an ACP content block (text; images and resources are
// not mapped).
type contentBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// toolContent is one entry of a tool call's content: {"type":"content",
// "content":{block}} or {"type":"diff","path","oldText","newText"}.
type toolContent struct {
	Type    string       `json:"type"`
	Content contentBlock `json:"content"`
	Path    string       `json:"path"`
	OldText *string      `json:"oldText"`
	NewText *string      `json:"newText"`
}

// updateParams are session/update's params.
type updateParams struct {
	SessionID string `json:"sessionId"`
	Update    update `json:"update"`
}

// updateNotification is a whole session/update line, decoded in one pass.
type updateNotification struct {
	JSONRPC string       `json:"jsonrpc"`
	Method  string       `json:"method"`
	Params  updateParams `json:"params"`
}

// updatePrefix starts every session/update line the CLI prints (its
// serialiser writes the fields in this order).
const updatePrefix = `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"`

// skippedUpdates are the update kinds the adapter does not map, some of
// them kilobytes long (the command palette): recognised from the line's
// start, they are not decoded at all.
var skippedUpdates = []string{"available_commands_update", "config_option_update", "session_info_update", "current_mode_update"}

// updateLine handles a session/update line in one decoding pass instead
// of three (envelope, params, update), which the parse benchmark showed
// to be most of the reader's time; a kind the adapter does not map is
// recognised from the line's start and not decoded. It reports false for
// any other line, which then takes the envelope-first path.
func (s *session) updateLine(line []byte) bool {
	rest, ok := bytes.CutPrefix(line, []byte(updatePrefix))
	if !ok {
		return false
	}
	if i := bytes.IndexByte(rest, '"'); i >= 0 {
		if kind, ok := bytes.CutPrefix(rest[i:], []byte(`","update":{"sessionUpdate":"`)); ok {
			for _, k := range skippedUpdates {
				if bytes.HasPrefix(kind, []byte(k)) && len(kind) > len(k) && kind[len(k)] == '"' {
					return true
				}
			}
		}
	}
	if s.chunkLine(line, rest) {
		return true
	}
	var n updateNotification
	if err := json.Unmarshal(line, &n); err != nil {
		s.garbage("session/update", line)
		return true
	}
	s.handleUpdate(&n.Params.Update)
	return true
}

// toolCall is what the adapter knows of one tool call of the running turn.
type toolCall struct {
	id       string
	name     string // the tool's name, inferred (ACP does not carry it)
	title    string
	kind     string
	rawInput json.RawMessage
	// rawOutput and content are the latest the CLI sent.
	rawOutput json.RawMessage
	content   json.RawMessage
	locations []location
	started   time.Time
	reported  bool // ToolStarted sent
	finished  bool // ToolCompleted sent
}

// textKind says what the text buffer holds.
type textKind uint8

const (
	noText textKind = iota
	messageText
	thoughtText
)

// cliNotices are the prefixes of the lines the CLI itself puts in
// agent_message_chunk updates: retries ("Info: Request failed due to a
// transient API error. Retrying..."), its own notes, and the error that
// ends a failed turn ("Error: Failed to get response from the AI model;
// retried 5 times … Last error: 500 …"). ACP has no other channel for them,
// and the prompt's response still says end_turn.
var cliNotices = []string{"Error: ", "Warning: ", "Info: "}

// knownNotices are notices recognised even in the middle of a message
// (the CLI does not separate its notice from model text before it).
var knownNotices = []string{
	"Error: Failed to get response from the AI model",
	"Error: Authentication failed",
	"Error: Could not connect to",
}

// notice reports whether a message chunk is one of the CLI's own notices.
// A notice arrives whole: as the first chunk of a message, or as one of
// knownNotices or a retry ("… Retrying...") anywhere. Model text that
// starts a message with "Error: " would be taken for one (see
// docs/providers/copilot.md).
func (r *readState) notice(chunk string) (prefix string, ok bool) {
	if r.kind == messageText && r.text.Len() > 0 && !strings.HasSuffix(chunk, "Retrying...") && !hasAnyPrefix(chunk, knownNotices) {
		return "", false
	}
	for _, p := range cliNotices {
		if strings.HasPrefix(chunk, p) {
			return p, true
		}
	}
	return "", false
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// handleUpdateParams decodes session/update's params (from a line that
// did not take updateLine's path) and handles the update.
func (s *session) handleUpdateParams(params jsonrpc.Params) {
	var p updateParams
	if err := params.Decode(&p); err != nil {
		s.garbage("session/update params", params.Raw())
		return
	}
	s.handleUpdate(&p.Update)
}

// handleUpdate maps one session/update to events. It runs on the reader
// goroutine.
func (s *session) handleUpdate(u *update) {
	r := &s.rs
	if s.loading.Load() {
		// session/load replays the conversation as updates; it is history,
		// not this session's doing.
		if u.SessionUpdate == "usage_update" {
			r.setContext(u)
		}
		return
	}
	switch u.SessionUpdate {
	case "agent_message_chunk", "agent_thought_chunk":
		var c contentBlock
		if json.Unmarshal(u.Content, &c) != nil || c.Type != "text" {
			r.unknown++
			return
		}
		s.handleChunk(u.SessionUpdate, c.Text)
	case "tool_call":
		if !s.inTurn() {
			r.ignored++
			return
		}
		s.flushText()
		r.errText = ""
		s.toolCall(u)
	case "tool_call_update":
		if !s.inTurn() {
			r.ignored++
			return
		}
		s.flushText()
		s.toolCallUpdate(u)
	case "usage_update":
		r.setContext(u)
	case "user_message_chunk", "available_commands_update", "config_option_update",
		"current_mode_update", "session_info_update", "plan":
		// Known and not mapped: the prompt echo, the CLI's menus, titles and plans.
	default:
		r.unknown++
	}
}

// handleChunk adds a message or thought chunk to the message being built,
// or handles it as one of the CLI's notices.
func (s *session) handleChunk(kind, text string) {
	r := &s.rs
	if s.loading.Load() {
		return
	}
	if !s.inTurn() {
		r.ignored++
		return
	}
	if kind == "agent_thought_chunk" {
		s.appendText(thoughtText, text)
		return
	}
	if prefix, ok := r.notice(text); ok {
		if strings.HasSuffix(text, "Retrying...") {
			// The retried response sends its text again.
			r.text.Reset()
			r.kind = noText
		} else {
			s.flushText()
		}
		s.cliNotice(prefix, text)
		return
	}
	r.errText = "" // the model went on: an earlier error was not the turn's end
	s.appendText(messageText, text)
}

func (r *readState) setContext(u *update) {
	if u.Used != nil {
		r.ctxUsed = *u.Used
	}
	if u.Size != nil {
		r.ctxSize = *u.Size
	}
}

// appendText adds a chunk to the current message, first sending the
// message of the other kind if one was being built.
func (s *session) appendText(k textKind, text string) {
	r := &s.rs
	if r.kind != k {
		s.flushText()
		r.kind = k
	}
	r.text.WriteString(text)
}

// flushText sends the message being built, if any, as one Text event.
func (s *session) flushText() {
	r := &s.rs
	if r.kind == noText {
		return
	}
	text := r.text.String()
	k := r.kind
	r.text.Reset()
	r.kind = noText
	if text == "" {
		return
	}
	if k == messageText {
		r.lastText = text
	}
	s.h.Event(provider.Text{Text: text, Reasoning: k == thoughtText})
}

// cliNotice handles one of the CLI's own notices: an error is kept as the
// turn's failure (unless the model goes on); every notice is also a Note.
func (s *session) cliNotice(prefix, text string) {
	r := &s.rs
	text = strings.TrimSpace(text)
	if prefix == "Error: " {
		r.errText = strings.TrimPrefix(text, prefix)
	}
	s.h.Event(provider.Note{Text: "copilot: " + text})
}

// toolCall starts a tool call (or, when the CLI repeats one, updates it).
func (s *session) toolCall(u *update) {
	r := &s.rs
	tc := r.tools[u.ToolCallID]
	if tc == nil {
		tc = &toolCall{id: u.ToolCallID, started: time.Now()}
		r.tools[u.ToolCallID] = tc
	}
	tc.merge(u)
	if !tc.reported {
		tc.name = s.toolName(tc)
		tc.reported = true
		s.h.Event(provider.ToolStarted{ID: tc.id, Name: tc.name, Detail: tc.detail(), Input: rawMap(tc.rawInput)})
	}
	s.maybeFinish(tc, u.Status)
}

// toolCallUpdate updates a tool call and ends it when its status is
// final. An update for a call the adapter never saw starts it first.
func (s *session) toolCallUpdate(u *update) {
	tc := s.rs.tools[u.ToolCallID]
	if tc == nil {
		s.toolCall(u)
		return
	}
	tc.merge(u)
	s.maybeFinish(tc, u.Status)
}

func (tc *toolCall) merge(u *update) {
	if u.Title != nil {
		tc.title = *u.Title
	}
	if u.Kind != nil {
		tc.kind = *u.Kind
	}
	if len(u.RawInput) > 0 {
		tc.rawInput = u.RawInput
	}
	if len(u.RawOutput) > 0 {
		tc.rawOutput = u.RawOutput
	}
	if len(u.Content) > 0 {
		tc.content = u.Content
	}
	if len(u.Locations) > 0 {
		tc.locations = u.Locations
	}
}

// maybeFinish sends ToolCompleted (and FileEdited for a completed edit)
// when status is final.
func (s *session) maybeFinish(tc *toolCall, status *string) {
	if status == nil || tc.finished {
		return
	}
	switch *status {
	case "completed", "failed":
	default:
		return
	}
	tc.finished = true
	failed := *status == "failed"
	contents := tc.contents()
	s.h.Event(provider.ToolCompleted{
		ID:       tc.id,
		Name:     tc.name,
		Result:   tc.result(contents, failed),
		IsError:  failed,
		Duration: time.Since(tc.started),
	})
	if !failed && tc.kind == "edit" {
		for _, fe := range tc.fileEdits(contents) {
			s.h.Event(fe)
		}
	}
}

// endOpenTools ends the tool calls the CLI did not end before the turn
// did (a cancelled turn leaves its running call without an update).
func (s *session) endOpenTools(why string) {
	for _, tc := range s.rs.tools {
		if tc.reported && !tc.finished {
			tc.finished = true
			s.h.Event(provider.ToolCompleted{ID: tc.id, Name: tc.name, Result: why, IsError: true, Duration: time.Since(tc.started)})
		}
	}
}

func (tc *toolCall) contents() []toolContent {
	if len(tc.content) == 0 {
		return nil
	}
	var cs []toolContent
	if json.Unmarshal(tc.content, &cs) != nil {
		return nil
	}
	return cs
}

// rawOutput is the part of Copilot's rawOutput the adapter reads: the
// result text, the diff, or the failure.
type rawOutput struct {
	Content         string `json:"content"`
	DetailedContent string `json:"detailedContent"`
	Message         string `json:"message"`
	Code            string `json:"code"`
}

func (tc *toolCall) output() rawOutput {
	var o rawOutput
	if len(tc.rawOutput) > 0 {
		_ = json.Unmarshal(tc.rawOutput, &o)
	}
	return o
}

// result is the call's result text: its text content, else rawOutput's
// content, else the failure's message.
func (tc *toolCall) result(cs []toolContent, failed bool) string {
	var b strings.Builder
	for _, c := range cs {
		if c.Type == "content" && c.Content.Type == "text" {
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(c.Content.Text)
		}
	}
	if b.Len() > 0 {
		return b.String()
	}
	o := tc.output()
	switch {
	case o.Content != "":
		return o.Content
	case o.Message != "" && o.Code != "" && failed:
		return o.Message + " (" + o.Code + ")"
	case o.Message != "":
		return o.Message
	}
	return ""
}

// fileEdits are the files a completed edit call wrote: one per diff in
// its content, else one per location. Whether a file was created or
// deleted comes from the git diff in rawOutput.detailedContent when it
// has the file ("create file mode", "deleted file mode"), else from the
// tool (create) and the diff (no old text: created).
func (tc *toolCall) fileEdits(cs []toolContent) []provider.FileEdited {
	modes := diffModes(tc.output().DetailedContent)
	var out []provider.FileEdited
	seen := map[string]bool{}
	add := func(path string, ch provider.Change) {
		if path == "" || seen[path] {
			return
		}
		seen[path] = true
		out = append(out, provider.FileEdited{Path: path, Change: ch, Tool: tc.name})
	}
	for _, c := range cs {
		if c.Type != "diff" {
			continue
		}
		ch, ok := modes[strings.TrimPrefix(c.Path, "/")]
		switch {
		case ok:
		case tc.name == "create" || c.OldText == nil:
			ch = provider.Created
		default:
			ch = provider.Edited
		}
		add(c.Path, ch)
	}
	if len(out) > 0 {
		return out
	}
	for _, l := range tc.locations {
		ch, ok := modes[strings.TrimPrefix(l.Path, "/")]
		switch {
		case ok:
		case tc.name == "create":
			ch = provider.Created
		default:
			ch = provider.Edited
		}
		add(l.Path, ch)
	}
	return out
}

// diffModes reads a git diff's per-file headers: the files it creates
// ("--- a/dev/null", "new file mode" or Copilot's "create file mode"),
// deletes ("+++ b/dev/null", "deleted file mode") or edits, keyed by the
// path as the diff writes it (an absolute path loses its "/").
func diffModes(diff string) map[string]provider.Change {
	if !strings.Contains(diff, "diff --git ") {
		return nil
	}
	modes := map[string]provider.Change{}
	for _, sec := range strings.Split(diff, "diff --git ")[1:] {
		if j := strings.Index(sec, "\n@@"); j >= 0 {
			sec = sec[:j]
		}
		var oldPath, newPath string
		for _, l := range strings.Split(sec, "\n") {
			if p, ok := strings.CutPrefix(l, "--- "); ok {
				oldPath = diffPath(p, "a/")
			} else if p, ok := strings.CutPrefix(l, "+++ "); ok {
				newPath = diffPath(p, "b/")
			}
		}
		switch {
		case newPath == "" && oldPath == "":
		case oldPath == "dev/null" || strings.Contains(sec, "\nnew file mode") || strings.Contains(sec, "\ncreate file mode"):
			modes[newPath] = provider.Created
		case newPath == "dev/null" || strings.Contains(sec, "\ndeleted file mode"):
			modes[oldPath] = provider.Deleted
		default:
			modes[newPath] = provider.Edited
		}
	}
	return modes
}

// diffPath is the path of a ---/+++ line: without the side's prefix (a/
// or b/) and a tab-separated timestamp; /dev/null becomes "dev/null".
func diffPath(p, side string) string {
	p, _, _ = strings.Cut(p, "\t")
	p = strings.TrimPrefix(p, side)
	return strings.TrimPrefix(p, "/")
}

// toolTitles map the fixed titles Copilot gives its tools to the tools'
// names (ACP's tool_call carries a title and a kind, not the name).
var toolTitles = []struct{ prefix, name string }{
	{"Viewing ", "view"},
	{"Creating ", "create"},
	{"Editing ", "edit"},
	{"Searching for ", "grep"},
	{"Finding files matching ", "glob"},
	{"Reading shell output", "read_bash"},
	{"Sending input to shell", "write_bash"},
	{"Stopping shell session", "stop_bash"},
	{"Running subtask", "task"},
	{"Using skill", "skill"},
	{"Fetching URL", "web_fetch"},
	{"Web search", "web_search"},
}

// toolName infers the tool's name from what ACP gives: an MCP tool's
// title is "<server>-<tool>", a tool the CLI does not know is titled with
// its bare name, the shell's kind is execute, and the other built-ins have
// fixed titles; failing all that, the kind.
func (s *session) toolName(tc *toolCall) string {
	if tc.title != "" && s.isMCPTool(tc.title) {
		return tc.title
	}
	in := rawMap(tc.rawInput)
	switch tc.kind {
	case "execute":
		if _, ok := in["command"]; ok {
			return "bash"
		}
	case "edit":
		if _, ok := in["file_text"]; ok {
			return "create"
		}
		if _, ok := in["old_str"]; ok {
			return "edit"
		}
	}
	for _, t := range toolTitles {
		if strings.HasPrefix(tc.title, t.prefix) {
			return t.name
		}
	}
	if tc.title != "" && !strings.ContainsAny(tc.title, " \t\n/") {
		return tc.title
	}
	if tc.kind != "" {
		return tc.kind
	}
	return "tool"
}

// isMCPTool reports whether name ("<server>-<tool>") is a tool of one of
// the fleet's MCP servers (Spec.MCP): those are pre-allowed.
func (s *session) isMCPTool(name string) bool {
	return agentcli.IsFleetTool(s.cfg.spec.MCP, name, "", "-")
}

// detail is the one line for humans: the command, the path, or the title.
func (tc *toolCall) detail() string {
	in := rawMap(tc.rawInput)
	if patch, ok := in["input"].(string); ok {
		for _, l := range strings.Split(patch, "\n") {
			for _, p := range []string{"*** Add File: ", "*** Update File: ", "*** Delete File: "} {
				if f, ok := strings.CutPrefix(l, p); ok {
					return firstLine(f)
				}
			}
		}
	}
	for _, k := range []string{"command", "path", "pattern", "url", "query"} {
		if v, ok := in[k].(string); ok && v != "" {
			return firstLine(v)
		}
	}
	if len(tc.locations) > 0 && tc.locations[0].Path != "" {
		return tc.locations[0].Path
	}
	return firstLine(tc.title)
}

// firstLine is s's first line, at most 200 runes.
func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if utf8.RuneCountInString(s) > 200 {
		r := []rune(s)
		s = string(r[:200]) + "…"
	}
	return s
}

// rawMap decodes a JSON object; anything else (or nothing) is nil, and a
// non-object value is kept under "value".
func rawMap(raw json.RawMessage) map[string]any {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var m map[string]any
	if json.Unmarshal(raw, &m) == nil {
		return m
	}
	var v any
	if json.Unmarshal(raw, &v) == nil {
		return map[string]any{"input": v} // a freeform tool's raw input (apply_patch)
	}
	return nil
}

// promptUsage is session/prompt's result usage: the session's totals so
// far in this process.
type promptUsage struct {
	InputTokens       int64 `json:"inputTokens"`
	OutputTokens      int64 `json:"outputTokens"`
	CachedReadTokens  int64 `json:"cachedReadTokens"`
	CachedWriteTokens int64 `json:"cachedWriteTokens"`
}

// usageDelta turns the session's cumulative usage into what is new since
// the last turn. Copilot's inputTokens include the cached tokens; the
// Usage's InputTokens do not (as the Anthropic API and the claude adapter
// count), so the cached parts are taken out.
func (r *readState) usageDelta(u promptUsage) (provider.Usage, bool) {
	d := promptUsage{
		InputTokens:       delta(u.InputTokens, r.total.InputTokens),
		OutputTokens:      delta(u.OutputTokens, r.total.OutputTokens),
		CachedReadTokens:  delta(u.CachedReadTokens, r.total.CachedReadTokens),
		CachedWriteTokens: delta(u.CachedWriteTokens, r.total.CachedWriteTokens),
	}
	r.total = u
	if d == (promptUsage{}) {
		return provider.Usage{}, false
	}
	return provider.Usage{
		InputTokens:      max(d.InputTokens-d.CachedReadTokens-d.CachedWriteTokens, 0),
		OutputTokens:     d.OutputTokens,
		CacheReadTokens:  d.CachedReadTokens,
		CacheWriteTokens: d.CachedWriteTokens,
		ContextTokens:    r.ctxUsed,
		ContextWindow:    r.ctxSize,
	}, true
}

// delta is cur − prev for a cumulative counter; a counter that went down
// was reset, and then cur is all new.
func delta(cur, prev int64) int64 {
	if cur < prev {
		return cur
	}
	return cur - prev
}

// chunkLine handles the commonest lines of a streaming model, message and
// thought chunks and usage updates, without the reflection decoder, when
// the line has exactly the shape the CLI prints:
//
//	…"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"…"}}}}
//	…"update":{"sessionUpdate":"usage_update","used":9754,"size":168000}}}
//
// Anything else (other field orders, more fields) is left to the decoder.
// rest is the line after updatePrefix.
func (s *session) chunkLine(line, rest []byte) bool {
	i := bytes.IndexByte(rest, '"')
	if i < 0 {
		return false
	}
	body, ok := bytes.CutPrefix(rest[i:], []byte(`","update":{"sessionUpdate":"`))
	if !ok {
		return false
	}
	if u, ok := bytes.CutPrefix(body, []byte(`usage_update","used":`)); ok {
		used, u, ok1 := cutInt(u)
		u, ok2 := bytes.CutPrefix(u, []byte(`,"size":`))
		size, u, ok3 := cutInt(u)
		if !ok1 || !ok2 || !ok3 || string(u) != "}}}" {
			return false
		}
		s.handleUpdate(&update{SessionUpdate: "usage_update", Used: &used, Size: &size})
		return true
	}
	var kind string
	switch {
	case bytes.HasPrefix(body, []byte(`agent_message_chunk"`)):
		kind, body = "agent_message_chunk", body[len(`agent_message_chunk"`):]
	case bytes.HasPrefix(body, []byte(`agent_thought_chunk"`)):
		kind, body = "agent_thought_chunk", body[len(`agent_thought_chunk"`):]
	default:
		return false
	}
	body, ok = bytes.CutPrefix(body, []byte(`,"content":{"type":"text","text":`))
	if !ok {
		return false
	}
	str, ok := bytes.CutSuffix(body, []byte(`}}}}`))
	if !ok || len(str) < 2 || str[0] != '"' || str[len(str)-1] != '"' {
		return false
	}
	text, ok := jsonString(str)
	if !ok {
		return false
	}
	s.handleChunk(kind, text)
	return true
}

// cutInt reads a non-negative JSON integer at b's start.
func cutInt(b []byte) (int64, []byte, bool) {
	var n int64
	i := 0
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9' && i < 18; i++ {
		n = n*10 + int64(b[i]-'0')
	}
	return n, b[i:], i > 0
}

// jsonString decodes a JSON string literal (quotes included): directly
// when it has no escapes, else through the decoder. A literal with a
// quote inside (two strings and what lies between) is refused.
func jsonString(lit []byte) (string, bool) {
	inner := lit[1 : len(lit)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		if bytes.IndexByte(inner, '"') >= 0 || !utf8.Valid(inner) {
			return "", false
		}
		for _, c := range inner {
			if c < 0x20 {
				return "", false
			}
		}
		return string(inner), true
	}
	var out string
	if json.Unmarshal(lit, &out) != nil {
		return "", false
	}
	return out, true
}

// rateLimitText reports whether the CLI's error notice is a rate or usage
// limit: "Error: Failed to get response from the AI model; retried 5 times
// (…) Last error: 429 …" (../shared/reference/agent-clis.md §6).
func rateLimitText(errText string) bool {
	_, last, ok := strings.Cut(errText, "Last error: ")
	return ok && strings.HasPrefix(strings.TrimSpace(last), "429")
}

// serverErrorText reports whether the CLI's error notice is the model
// API failing after its retries: "… Last error: 503 …".
func serverErrorText(errText string) bool {
	_, last, ok := strings.Cut(errText, "Last error: ")
	last = strings.TrimSpace(last)
	return ok && len(last) >= 3 && last[0] == '5' && last[1] >= '0' && last[1] <= '9' && last[2] >= '0' && last[2] <= '9'
}
