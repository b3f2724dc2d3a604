package codex

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agents-fleet/fleet/provider"
	"github.com/agents-fleet/fleet/provider/agentcli/jsonrpc"
)

// threadItem is the union of the ThreadItem fields the adapter reads.
// Fields whose JSON type differs between item types are kept raw.
type threadItem struct {
	Type string `json:"type"`
	ID   string `json:"id"`

	Text    string          `json:"text"`    // agentMessage
	Summary []string        `json:"summary"` // reasoning
	Content json.RawMessage `json:"content"` // reasoning: []string

	Command          string          `json:"command"` // commandExecution
	Cwd              string          `json:"cwd"`
	CommandActions   []commandAction `json:"commandActions"`
	AggregatedOutput *string         `json:"aggregatedOutput"`
	ExitCode         *int            `json:"exitCode"`
	Status           string          `json:"status"`

	Changes []fileUpdate `json:"changes"` // fileChange

	Server       string          `json:"server"` // mcpToolCall, dynamicToolCall
	Tool         string          `json:"tool"`
	Namespace    *string         `json:"namespace"`
	Arguments    json.RawMessage `json:"arguments"`
	Result       json.RawMessage `json:"result"`
	Error        json.RawMessage `json:"error"`
	Success      *bool           `json:"success"`
	ContentItems json.RawMessage `json:"contentItems"`

	Query string `json:"query"` // webSearch
	Path  string `json:"path"`  // imageView

	DurationMs    *int64 `json:"durationMs"`
	StartedAtMs   *int64 `json:"startedAtMs"`
	CompletedAtMs *int64 `json:"completedAtMs"`
}

type commandAction struct {
	Type    string `json:"type"`
	Command string `json:"command"`
}

type fileUpdate struct {
	Path string          `json:"path"`
	Kind json.RawMessage `json:"kind"` // {"type":"add"} (or "add" in older servers)
	Diff string          `json:"diff"`
}

// kind returns the change kind ("add", "update", "delete") and, for a
// move, the new path.
func (f fileUpdate) kind() (kind, movePath string) {
	var k struct {
		Type     string  `json:"type"`
		MovePath *string `json:"move_path"`
	}
	if json.Unmarshal(f.Kind, &k) == nil && k.Type != "" {
		if k.MovePath != nil {
			movePath = *k.MovePath
		}
		return k.Type, movePath
	}
	var str string
	_ = json.Unmarshal(f.Kind, &str)
	return str, ""
}

// toolName is the tool a tool item is, in the CLI's own terms; "" for
// items that are not tool calls.
func (it *threadItem) toolName() string {
	switch it.Type {
	case "commandExecution":
		return "exec_command"
	case "fileChange":
		return "apply_patch"
	case "mcpToolCall":
		return "mcp__" + it.Server + "__" + it.Tool
	case "dynamicToolCall":
		if it.Namespace != nil && *it.Namespace != "" {
			return *it.Namespace + "__" + it.Tool
		}
		return it.Tool
	case "collabAgentToolCall":
		return it.Tool
	case "webSearch":
		return "web_search"
	case "imageView":
		return "view_image"
	}
	return ""
}

// detail is one line for humans: the command, the paths, the query.
func (it *threadItem) detail() string {
	switch it.Type {
	case "commandExecution":
		if len(it.CommandActions) == 1 && it.CommandActions[0].Command != "" {
			return it.CommandActions[0].Command
		}
		return it.Command
	case "fileChange":
		paths := make([]string, 0, len(it.Changes))
		for _, c := range it.Changes {
			paths = append(paths, c.Path)
		}
		return strings.Join(paths, ", ")
	case "mcpToolCall":
		return it.Server + "/" + it.Tool
	case "webSearch":
		return it.Query
	case "imageView":
		return it.Path
	}
	return it.Tool
}

func (it *threadItem) input() map[string]any {
	switch it.Type {
	case "commandExecution":
		return map[string]any{"command": it.Command, "cwd": it.Cwd}
	case "fileChange":
		return map[string]any{"changes": changesInput(it.Changes)}
	case "webSearch":
		return map[string]any{"query": it.Query}
	case "imageView":
		return map[string]any{"path": it.Path}
	}
	return rawInput(it.Arguments)
}

func changesInput(changes []fileUpdate) []any {
	out := make([]any, 0, len(changes))
	for _, c := range changes {
		kind, move := c.kind()
		m := map[string]any{"path": c.Path, "kind": kind, "diff": c.Diff}
		if move != "" {
			m["movePath"] = move
		}
		out = append(out, m)
	}
	return out
}

// rawInput is a JSON object as a map, anything else under "arguments".
func rawInput(raw json.RawMessage) map[string]any {
	if len(raw) == 0 || string(raw) == "null" {
		return map[string]any{}
	}
	var m map[string]any
	if json.Unmarshal(raw, &m) == nil && m != nil {
		return m
	}
	var v any
	_ = json.Unmarshal(raw, &v)
	return map[string]any{"arguments": v}
}

func (s *session) itemStarted(it *threadItem) {
	name := it.toolName()
	if name == "" || it.ID == "" {
		return
	}
	if _, open := s.rd.items[it.ID]; open || s.rd.ended[it.ID] {
		return
	}
	s.rd.itemSeq++
	s.rd.items[it.ID] = &openItem{seq: s.rd.itemSeq, name: name, start: time.Now(), changes: it.Changes}
	s.emit(provider.ToolStarted{ID: it.ID, Name: name, Detail: it.detail(), Input: it.input()})
}

func (s *session) itemCompleted(it *threadItem) {
	switch it.Type {
	case "agentMessage":
		if it.Text != "" {
			s.rd.lastText = it.Text
			s.emit(provider.Text{Text: it.Text})
		}
		return
	case "reasoning":
		parts := it.Summary
		if len(parts) == 0 {
			_ = json.Unmarshal(it.Content, &parts)
		}
		if text := strings.TrimSpace(strings.Join(parts, "\n\n")); text != "" {
			s.emit(provider.Text{Text: text, Reasoning: true})
		}
		return
	}
	name := it.toolName()
	if name == "" || it.ID == "" {
		return
	}
	if s.rd.ended[it.ID] {
		// The turn ended without it (an interrupt) and completed it then;
		// Codex reports the command's end later, when it was killed.
		delete(s.rd.ended, it.ID)
		return
	}
	open := s.rd.items[it.ID]
	if open == nil {
		// Completed without a start (the CLI reports some items only
		// once): start it here so the pair is whole.
		s.itemStarted(it)
		open = s.rd.items[it.ID]
	}
	delete(s.rd.items, it.ID)
	result, isErr := it.outcome()
	s.emit(provider.ToolCompleted{ID: it.ID, Name: name, Result: result, IsError: isErr, Duration: it.duration(open.start)})
	if it.Type == "fileChange" && it.Status == "completed" {
		changes := it.Changes
		if len(changes) == 0 {
			changes = open.changes
		}
		for _, c := range changes {
			kind, move := c.kind()
			switch kind {
			case "add":
				s.emit(provider.FileEdited{Path: c.Path, Change: provider.Created, Tool: name})
			case "delete":
				s.emit(provider.FileEdited{Path: c.Path, Change: provider.Deleted, Tool: name})
			default:
				if move != "" && move != c.Path {
					s.emit(provider.FileEdited{Path: c.Path, Change: provider.Deleted, Tool: name})
					s.emit(provider.FileEdited{Path: move, Change: provider.Created, Tool: name})
				} else {
					s.emit(provider.FileEdited{Path: c.Path, Change: provider.Edited, Tool: name})
				}
			}
		}
	}
}

// outcome is a completed tool item's result text and whether it failed.
func (it *threadItem) outcome() (string, bool) {
	failed := it.Status != "" && it.Status != "completed"
	var result string
	switch it.Type {
	case "commandExecution":
		if it.AggregatedOutput != nil {
			result = *it.AggregatedOutput
		}
		if it.ExitCode != nil && *it.ExitCode != 0 {
			failed = true
			if result == "" {
				result = fmt.Sprintf("exit code %d", *it.ExitCode)
			}
		}
	case "fileChange":
		lines := make([]string, 0, len(it.Changes))
		for _, c := range it.Changes {
			kind, move := c.kind()
			if move != "" {
				lines = append(lines, kind+" "+c.Path+" -> "+move)
			} else {
				lines = append(lines, kind+" "+c.Path)
			}
		}
		result = strings.Join(lines, "\n")
	case "mcpToolCall":
		result = contentText(it.Result, "content")
		if msg := errorMessage(it.Error); msg != "" {
			failed, result = true, msg
		}
	case "dynamicToolCall":
		result = contentText(it.ContentItems, "")
		if it.Success != nil && !*it.Success {
			failed = true
		}
	}
	if failed && result == "" {
		result = it.Status
	}
	if it.Status == "declined" {
		result = strings.TrimSpace("declined by the operator\n" + result)
	}
	return result, failed
}

// contentText joins the text parts of MCP-style content: raw is the
// content array, or an object holding it under field.
func contentText(raw json.RawMessage, field string) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	if field != "" {
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil {
			return string(raw)
		}
		raw = obj[field]
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return string(raw)
	}
	var texts []string
	for _, p := range parts {
		if p.Text != "" {
			texts = append(texts, p.Text)
		}
	}
	if len(texts) == 0 && len(parts) > 0 {
		return string(raw)
	}
	return strings.Join(texts, "\n")
}

func errorMessage(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var e struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &e) == nil && e.Message != "" {
		return e.Message
	}
	var str string
	if json.Unmarshal(raw, &str) == nil {
		return str
	}
	return string(raw)
}

// duration is what the CLI measured, else the span of its timestamps, else
// the time since the adapter saw the item start.
func (it *threadItem) duration(start time.Time) time.Duration {
	if it.DurationMs != nil && *it.DurationMs > 0 {
		return time.Duration(*it.DurationMs) * time.Millisecond
	}
	if it.StartedAtMs != nil && it.CompletedAtMs != nil && *it.CompletedAtMs >= *it.StartedAtMs {
		return time.Duration(*it.CompletedAtMs-*it.StartedAtMs) * time.Millisecond
	}
	return time.Since(start)
}

// closeOpenItems completes the tool items a turn ended without completing
// (Codex reports no item/completed for a command an interrupt abandoned).
func (s *session) closeOpenItems(interrupted bool) {
	if len(s.rd.items) == 0 {
		return
	}
	ids := make([]string, 0, len(s.rd.items))
	for id := range s.rd.items {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b string) int { return s.rd.items[a].seq - s.rd.items[b].seq })
	why := "the turn ended before the tool finished"
	if interrupted {
		why = "interrupted"
	}
	if len(s.rd.ended)+len(ids) > maxEnded {
		clear(s.rd.ended)
	}
	for _, id := range ids {
		it := s.rd.items[id]
		delete(s.rd.items, id)
		s.rd.ended[id] = true
		s.emit(provider.ToolCompleted{ID: id, Name: it.name, Result: why, IsError: true, Duration: time.Since(it.start)})
	}
}

// --- usage ---

type tokenBreakdown struct {
	TotalTokens           int64 `json:"totalTokens"`
	InputTokens           int64 `json:"inputTokens"`
	CachedInputTokens     int64 `json:"cachedInputTokens"`
	CacheWriteInputTokens int64 `json:"cacheWriteInputTokens"`
	OutputTokens          int64 `json:"outputTokens"`
}

func (a tokenBreakdown) minus(b tokenBreakdown) tokenBreakdown {
	return tokenBreakdown{
		TotalTokens:           a.TotalTokens - b.TotalTokens,
		InputTokens:           a.InputTokens - b.InputTokens,
		CachedInputTokens:     a.CachedInputTokens - b.CachedInputTokens,
		CacheWriteInputTokens: a.CacheWriteInputTokens - b.CacheWriteInputTokens,
		OutputTokens:          a.OutputTokens - b.OutputTokens,
	}
}

func (a tokenBreakdown) negative() bool {
	return a.InputTokens < 0 || a.CachedInputTokens < 0 || a.CacheWriteInputTokens < 0 || a.OutputTokens < 0
}

// tokenUsage turns thread/tokenUsage/updated into a Usage delta. The
// notification carries the thread's cumulative total and the last
// request's usage; the delta is the growth of the total since the last
// update this process saw (so a repeated update counts nothing), or `last`
// for the first one. Updates for another turn than the running one — the
// old turn's update that thread/resume replays — only set the baseline.
func (s *session) tokenUsage(m jsonrpc.Params) {
	var p struct {
		TurnID     string `json:"turnId"`
		TokenUsage struct {
			Total         tokenBreakdown `json:"total"`
			Last          tokenBreakdown `json:"last"`
			ContextWindow *int64         `json:"modelContextWindow"`
		} `json:"tokenUsage"`
	}
	if s.decode(m, &p) != nil {
		s.rd.badItems++
		return
	}
	u := p.TokenUsage
	prev := s.rd.total
	total := u.Total
	s.rd.total = &total
	s.mu.Lock()
	current := ""
	if s.turn != nil {
		current = s.turn.id
	}
	s.mu.Unlock()
	if current == "" || p.TurnID != current {
		return
	}
	d := u.Last
	if prev != nil {
		if d = total.minus(*prev); d.negative() {
			d = u.Last // the total was reset: trust the last request
		}
	}
	if d.InputTokens == 0 && d.OutputTokens == 0 && d.CachedInputTokens == 0 && d.CacheWriteInputTokens == 0 {
		return
	}
	ev := provider.Usage{
		InputTokens:      d.InputTokens,
		OutputTokens:     d.OutputTokens,
		CacheReadTokens:  d.CachedInputTokens,
		CacheWriteTokens: d.CacheWriteInputTokens,
		ContextTokens:    u.Last.InputTokens + u.Last.OutputTokens,
	}
	if u.ContextWindow != nil {
		ev.ContextWindow = *u.ContextWindow
	}
	s.emit(ev)
}

// --- turn end ---

type turnError struct {
	Message           string          `json:"message"`
	CodexErrorInfo    json.RawMessage `json:"codexErrorInfo"`
	AdditionalDetails *string         `json:"additionalDetails"`
}

// text is the CLI's message, its details and its error code:
// "unexpected status 401 Unauthorized: … (httpConnectionFailed, HTTP 401)".
func (e turnError) text() string {
	msg := e.Message
	if d := e.AdditionalDetails; d != nil && *d != "" && !strings.Contains(msg, *d) {
		msg += ": " + *d
	}
	if info := errorInfo(e.CodexErrorInfo); info != "" {
		msg += " (" + info + ")"
	}
	return msg
}

// errorInfo renders codexErrorInfo: "internalServerError", or
// "httpConnectionFailed, HTTP 401" for the object forms.
func errorInfo(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var str string
	if json.Unmarshal(raw, &str) == nil {
		return str
	}
	var obj map[string]struct {
		HTTPStatusCode *int `json:"httpStatusCode"`
	}
	if json.Unmarshal(raw, &obj) != nil {
		return string(raw)
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		part := k
		if c := obj[k].HTTPStatusCode; c != nil {
			part += fmt.Sprintf(", HTTP %d", *c)
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, "; ")
}

// TurnError is TurnEnded.Err for a turn the CLI failed: its own message
// and error code.
type TurnError struct {
	Message string // the CLI's message, with its details
	Code    string // codexErrorInfo: "internalServerError", "httpConnectionFailed, HTTP 401", …
}

func (e *TurnError) Error() string {
	if e.Code == "" {
		return e.Message
	}
	return e.Message + " (" + e.Code + ")"
}

func (s *session) turnCompleted(m jsonrpc.Params) {
	var p struct {
		Turn struct {
			ID     string     `json:"id"`
			Status string     `json:"status"`
			Error  *turnError `json:"error"`
		} `json:"turn"`
	}
	if s.decode(m, &p) != nil {
		s.rd.badItems++
		return
	}
	s.mu.Lock()
	tr := s.turn
	mine := tr != nil && (tr.id == "" || tr.id == p.Turn.ID)
	s.mu.Unlock()
	if !mine {
		return // a turn this session did not start
	}
	var ev provider.TurnEnded
	switch p.Turn.Status {
	case "completed":
	case "interrupted":
		ev.Interrupted = true
	case "failed":
		ev.Err = errors.New("the turn failed")
		if e := p.Turn.Error; e != nil {
			msg := e.Message
			if d := e.AdditionalDetails; d != nil && *d != "" && !strings.Contains(msg, *d) {
				msg += ": " + *d
			}
			ev.Err = &TurnError{Message: msg, Code: errorInfo(e.CodexErrorInfo)}
			switch {
			case e.limited():
				// The fleet waits for the reset (when known) and continues.
				until := s.rd.resetsAt
				if until.IsZero() {
					until, _ = provider.ResetFromText(msg, time.Now())
				}
				ev.Err = &provider.RateLimitError{Until: until, Reason: "codex: " + ev.Err.Error()}
			case e.status() >= 500:
				ev.Err = &provider.TransportError{Reason: "codex: " + ev.Err.Error()}
			}
		}
	default:
		ev.Err = fmt.Errorf("the turn ended with status %q", p.Turn.Status)
	}
	s.endTurn(tr, ev)
}

// status is the HTTP status codexErrorInfo names (responseStreamDisconnected,
// responseTooManyFailedAttempts, httpConnectionFailed: {httpStatusCode}),
// or 0.
func (e turnError) status() int {
	var obj map[string]struct {
		HTTPStatusCode *int `json:"httpStatusCode"`
	}
	if json.Unmarshal(e.CodexErrorInfo, &obj) != nil {
		return 0
	}
	for _, v := range obj {
		if v.HTTPStatusCode != nil {
			return *v.HTTPStatusCode
		}
	}
	return 0
}

// limited reports whether the error is the account's rate or usage limit.
func (e turnError) limited() bool {
	return e.status() == 429 || errorInfo(e.CodexErrorInfo) == "usageLimitExceeded"
}

// rateLimits reads account/rateLimits/updated: the primary (or secondary)
// window's resetsAt (epoch seconds) when its limit is reached.
func (s *session) rateLimits(m jsonrpc.Params) {
	type window struct {
		UsedPercent *float64 `json:"usedPercent"`
		ResetsAt    *float64 `json:"resetsAt"`
	}
	var p struct {
		RateLimits struct {
			Primary   *window `json:"primary"`
			Secondary *window `json:"secondary"`
		} `json:"rateLimits"`
	}
	if s.decode(m, &p) != nil {
		s.rd.badItems++
		return
	}
	var reset time.Time
	for _, w := range []*window{p.RateLimits.Primary, p.RateLimits.Secondary} {
		if w == nil || w.ResetsAt == nil || *w.ResetsAt <= 0 || *w.ResetsAt > 1e11 {
			continue
		}
		if at := time.Unix(int64(*w.ResetsAt), 0); w.UsedPercent == nil || *w.UsedPercent >= 100 {
			if at.After(reset) {
				reset = at
			}
		}
	}
	s.rd.resetsAt = reset
}
