package modelmock

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"
)

// Script says what the server answers. It is matched against each request
// afresh (the server keeps no conversation state), so one script can serve
// several concurrent sessions, of several CLIs, at once.
type Script struct {
	Rules []Rule `json:"rules,omitempty"`
	// Default answers requests no rule matches; nil means a text reply "ok"
	// with usage {Input: 10, Output: 2}.
	Default *Turn `json:"default,omitempty"`
}

// Rule answers conversations whose latest user prompt contains Match.
type Rule struct {
	Name  string `json:"name,omitempty"`
	Match string `json:"match"` // substring of the prompt text; "" matches every prompt
	// Turns[i] answers the i-th model request after the prompt; past the
	// end the last Turn repeats. A rule without Turns answers with the
	// script's default turn.
	Turns []Turn `json:"turns,omitempty"`
}

// Turn is one model response.
type Turn struct {
	Text      string     `json:"text,omitempty"`      // assistant text (may be empty when ToolCalls are given)
	Reasoning string     `json:"reasoning,omitempty"` // Anthropic "thinking" block / OpenAI reasoning item with a summary
	ToolCalls []ToolCall `json:"toolCalls,omitempty"` // tool calls, in order, all in this one response
	// Usage is the usage reported for this response; the zero value means
	// {Input: 100, Output: 20}.
	Usage Usage `json:"usage,omitzero"`
	// Status, when non-zero, answers with this HTTP status and an error body.
	Status       int    `json:"status,omitempty"`
	ErrorMessage string `json:"errorMessage,omitempty"` // default "modelmock forced status N"
	// Malformed sends a broken SSE stream (truncated JSON, garbage, no
	// terminal event) and then drops the connection.
	Malformed bool `json:"malformed,omitempty"`
	// Delay waits this long before answering (ends early on Close or when
	// the client goes away). In JSON: a Go duration string such as "1.5s".
	Delay time.Duration `json:"delay,omitempty"`
	// Hang never answers, until Close or the client goes away.
	Hang bool `json:"hang,omitempty"`
	// Headers are set on the response: retry-after, the
	// anthropic-ratelimit-* and x-ratelimit-reset-* headers of a 429.
	Headers map[string]string `json:"headers,omitempty"`
	// Times, when non-zero, makes this turn answer only the first Times
	// requests routed to it (a CLI retrying the same request is routed to
	// the same turn); later ones get the rule's next turn. With Status
	// 429 and a retry-after, that is a limit that passes.
	Times int `json:"times,omitempty"`
}

// ToolCall is one tool call in a model response.
type ToolCall struct {
	// ID is the call's id; when empty one is generated (toolu_mock_N for
	// Anthropic, call_mock_N for OpenAI).
	ID string `json:"id,omitempty"`
	// Name is the tool's name as the model calls it: Bash, exec_command,
	// apply_patch, mcp__SERVER__TOOL…
	Name string `json:"name"`
	// Input is the call's JSON-marshalable input (map, struct,
	// json.RawMessage). For an OpenAI custom (freeform) tool such as Codex's
	// apply_patch a string is sent as the raw input.
	Input any `json:"input,omitempty"`
}

// Usage is the token usage reported for a response. For OpenAI, Input is
// input_tokens and CacheRead its cached_tokens part (CacheWrite has no
// OpenAI field and is not sent there).
type Usage struct {
	Input      int64 `json:"input,omitempty"`
	Output     int64 `json:"output,omitempty"`
	CacheRead  int64 `json:"cacheRead,omitempty"`
	CacheWrite int64 `json:"cacheWrite,omitempty"`
}

var (
	defaultTurn  = Turn{Text: "ok", Usage: Usage{Input: 10, Output: 2}}
	defaultUsage = Usage{Input: 100, Output: 20}
)

// pick finds the answer for a conversation whose prompt is prompt and which
// has had turn model requests answered since it: the rule's name ("" for the
// default) and the Turn, with its Usage defaulted.
func (sc Script) pick(prompt string, turn int) (string, Turn) {
	for _, r := range sc.Rules {
		if !strings.Contains(prompt, r.Match) {
			continue
		}
		if len(r.Turns) == 0 {
			return r.Name, sc.defaultTurn()
		}
		i := min(max(turn, 0), len(r.Turns)-1)
		return r.Name, withUsage(r.Turns[i])
	}
	return "", sc.defaultTurn()
}

func (sc Script) defaultTurn() Turn {
	if sc.Default == nil {
		return defaultTurn
	}
	return withUsage(*sc.Default)
}

func withUsage(t Turn) Turn {
	if t.Usage == (Usage{}) {
		t.Usage = defaultUsage
	}
	return t
}

// LoadScript reads a Script from a JSON file. Field names are those of the
// Go types (matched case-insensitively: "toolCalls", "errorMessage"…),
// durations are Go duration strings ("1.5s"), and unknown fields are an
// error so that a misspelt one does not go unnoticed:
//
//	{"rules": [{"name": "hello", "match": "say hello",
//	  "turns": [{"toolCalls": [{"name": "Bash", "input": {"command": "echo hello"}}]},
//	            {"text": "said hello", "usage": {"input": 120, "output": 8}}]}],
//	 "default": {"text": "no rule for that", "delay": "200ms"}}
func LoadScript(path string) (Script, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Script{}, err
	}
	var sc Script
	if err := decodeStrict(data, &sc); err != nil {
		return Script{}, fmt.Errorf("modelmock: script %s: %w", path, err)
	}
	return sc, nil
}

func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("trailing data after the JSON value")
	}
	return nil
}

// turnJSON is Turn as it is written in JSON: Delay as a duration string.
type turnJSON struct {
	Text         string            `json:"text,omitempty"`
	Reasoning    string            `json:"reasoning,omitempty"`
	ToolCalls    []ToolCall        `json:"toolCalls,omitempty"`
	Usage        Usage             `json:"usage,omitzero"`
	Status       int               `json:"status,omitempty"`
	ErrorMessage string            `json:"errorMessage,omitempty"`
	Malformed    bool              `json:"malformed,omitempty"`
	Delay        string            `json:"delay,omitempty"`
	Hang         bool              `json:"hang,omitempty"`
	Headers      map[string]string `json:"headers,omitempty"`
	Times        int               `json:"times,omitempty"`
}

// MarshalJSON writes Delay as a Go duration string.
func (t Turn) MarshalJSON() ([]byte, error) {
	j := turnJSON{t.Text, t.Reasoning, t.ToolCalls, t.Usage, t.Status, t.ErrorMessage, t.Malformed, "", t.Hang, t.Headers, t.Times}
	if t.Delay != 0 {
		j.Delay = t.Delay.String()
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads Delay from a Go duration string; unknown fields are
// an error.
func (t *Turn) UnmarshalJSON(data []byte) error {
	var j turnJSON
	if err := decodeStrict(data, &j); err != nil {
		return err
	}
	var d time.Duration
	if j.Delay != "" {
		var err error
		if d, err = time.ParseDuration(j.Delay); err != nil {
			return fmt.Errorf("turn delay: %w", err)
		}
		if d < 0 {
			return fmt.Errorf("turn delay %q is negative", j.Delay)
		}
	}
	if j.Times < 0 {
		return fmt.Errorf("turn times %d is negative", j.Times)
	}
	*t = Turn{j.Text, j.Reasoning, j.ToolCalls, j.Usage, j.Status, j.ErrorMessage, j.Malformed, d, j.Hang, j.Headers, j.Times}
	return nil
}

// UnmarshalJSON keeps Input as the raw JSON it was written as (key order and
// number precision kept), except that a JSON string becomes a Go string, the
// raw input of a freeform tool.
func (c *ToolCall) UnmarshalJSON(data []byte) error {
	var j struct {
		ID    string          `json:"id"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	}
	if err := decodeStrict(data, &j); err != nil {
		return err
	}
	*c = ToolCall{ID: j.ID, Name: j.Name}
	in := bytes.TrimSpace(j.Input)
	switch {
	case len(in) == 0 || string(in) == "null":
	case in[0] == '"':
		var s string
		if err := json.Unmarshal(in, &s); err != nil {
			return err
		}
		c.Input = s
	default:
		c.Input = json.RawMessage(in)
	}
	return nil
}
