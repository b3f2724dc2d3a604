package modelmock

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// Routing is stateless: each request carries the whole conversation, so its
// prompt and turn index are read from the request alone.
//
// The prompt is the newest user message that holds text and no tool result
// (Claude adds a <system-reminder> block before the prompt, and may add
// reminder text next to tool results; Codex sends environment-context user
// messages before the prompt). A user message whose text blocks are all
// <system-reminder>/<environment_context> wrappers is context, not a prompt.
// One exception: after an interrupt during a tool call, Claude sends the
// rejected call's result, "[Request interrupted by user for tool use]" and
// the next prompt in one message; the text after that marker is a prompt.
//
// The turn index is the number of model requests already answered since the
// prompt, counted as groups of tool results: every model response that
// called tools is followed by its results, so a response with two tool calls
// counts once, not twice.

// anthropicRequest is what routing reads from a Messages request.
type anthropicRequest struct {
	Model    string
	Stream   bool
	Messages []anthropicMessage
}

type anthropicMessage struct {
	Role    string
	Content json.RawMessage // a string or an array of blocks
}

// parseAnthropic reads a Messages body leniently: only a body that is not a
// JSON object is an error; fields of unexpected types are ignored.
func parseAnthropic(body []byte) (anthropicRequest, error) {
	top, err := object(body)
	if err != nil {
		return anthropicRequest{}, err
	}
	var r anthropicRequest
	soft(top["model"], &r.Model)
	soft(top["stream"], &r.Stream)
	var msgs []json.RawMessage
	soft(top["messages"], &msgs)
	for _, m := range msgs {
		var mm map[string]json.RawMessage
		if soft(m, &mm) {
			var am anthropicMessage
			soft(mm["role"], &am.Role)
			am.Content = mm["content"]
			r.Messages = append(r.Messages, am)
		}
	}
	return r, nil
}

// blocks returns a message's content as blocks: a string content is one
// text block.
func contentBlocks(content json.RawMessage) []map[string]json.RawMessage {
	var s string
	if soft(content, &s) {
		return []map[string]json.RawMessage{{"type": json.RawMessage(`"text"`), "text": mustJSON(s)}}
	}
	var raw []json.RawMessage
	soft(content, &raw)
	out := make([]map[string]json.RawMessage, 0, len(raw))
	for _, b := range raw {
		var m map[string]json.RawMessage
		if soft(b, &m) {
			out = append(out, m)
		}
	}
	return out
}

// route returns the prompt text and turn index of an Anthropic request.
func (r anthropicRequest) route() (prompt string, turn int) {
	start := -1
	for i := len(r.Messages) - 1; i >= 0 && start < 0; i-- {
		m := r.Messages[i]
		if m.Role != "user" {
			continue
		}
		texts, results := anthropicParts(m.Content)
		if results == 0 && len(texts) > 0 && !contextOnly(texts) {
			start, prompt = i, strings.Join(texts, "\n")
		} else if p := afterInterrupt(texts); results > 0 && p != "" {
			start, prompt = i, p
		}
	}
	inResults := false
	for _, m := range r.Messages[start+1:] {
		switch m.Role {
		case "assistant":
			inResults = false
		case "user":
			if _, results := anthropicParts(m.Content); results > 0 && !inResults {
				turn++
				inResults = true
			}
		}
	}
	return prompt, turn
}

// interruptMarker starts the text Claude Code adds when a turn was
// interrupted ("[Request interrupted by user for tool use]").
const interruptMarker = "[Request interrupted by user"

// afterInterrupt is the prompt that follows Claude's interrupt marker in
// the same user message, "" when there is none: after an interrupt during
// a tool call, the CLI sends the rejected call's tool_result, the marker
// and the next prompt as one message.
func afterInterrupt(texts []string) string {
	for i, t := range texts {
		if strings.HasPrefix(strings.TrimSpace(t), interruptMarker) {
			var rest []string
			for _, r := range texts[i+1:] {
				if !contextOnly([]string{r}) {
					rest = append(rest, r)
				}
			}
			return strings.Join(rest, "\n")
		}
	}
	return ""
}

// anthropicParts returns a user message's text blocks and its number of
// tool_result blocks.
func anthropicParts(content json.RawMessage) (texts []string, results int) {
	for _, b := range contentBlocks(content) {
		var typ string
		soft(b["type"], &typ)
		switch typ {
		case "text":
			var s string
			soft(b["text"], &s)
			texts = append(texts, s)
		case "tool_result":
			results++
		}
	}
	return texts, results
}

// openaiRequest is what routing and the answer read from a Responses
// request.
type openaiRequest struct {
	Model string
	Input []map[string]json.RawMessage // a string input is one user message
	Tools []openaiTool
}

type openaiTool struct {
	Type, Name string
}

func parseOpenAI(body []byte) (openaiRequest, error) {
	top, err := object(body)
	if err != nil {
		return openaiRequest{}, err
	}
	var r openaiRequest
	soft(top["model"], &r.Model)
	var s string
	if soft(top["input"], &s) {
		r.Input = []map[string]json.RawMessage{{"type": json.RawMessage(`"message"`), "role": json.RawMessage(`"user"`), "content": mustJSON(s)}}
	} else {
		var items []json.RawMessage
		soft(top["input"], &items)
		for _, it := range items {
			var m map[string]json.RawMessage
			if soft(it, &m) {
				r.Input = append(r.Input, m)
			}
		}
	}
	var tools []map[string]json.RawMessage
	soft(top["tools"], &tools)
	for _, t := range tools {
		var ot openaiTool
		soft(t["type"], &ot.Type)
		soft(t["name"], &ot.Name)
		r.Tools = append(r.Tools, ot)
	}
	return r, nil
}

// route returns the prompt text and turn index of a Responses request.
// Tool outputs are items whose type ends in "_output" (function_call_output,
// custom_tool_call_output, …); items the model produced (function_call,
// reasoning, assistant messages, …) end a group of them.
func (r openaiRequest) route() (prompt string, turn int) {
	start := -1
	for i := len(r.Input) - 1; i >= 0 && start < 0; i-- {
		it := r.Input[i]
		var role string
		soft(it["role"], &role)
		if role != "user" || itemType(it) != "message" {
			continue
		}
		if texts := openaiTexts(it["content"]); len(texts) > 0 && !contextOnly(texts) {
			start, prompt = i, strings.Join(texts, "\n")
		}
	}
	inOutputs := false
	for _, it := range r.Input[start+1:] {
		typ := itemType(it)
		var role string
		soft(it["role"], &role)
		switch {
		case strings.HasSuffix(typ, "_output"):
			if !inOutputs {
				turn++
				inOutputs = true
			}
		case typ == "message" && role != "assistant":
			// user, developer or system context: neither side of a turn
		default:
			inOutputs = false
		}
	}
	return prompt, turn
}

// itemType is an input item's type; items with a role and no type are
// messages.
func itemType(it map[string]json.RawMessage) string {
	var typ string
	soft(it["type"], &typ)
	if typ == "" {
		if _, ok := it["role"]; ok {
			return "message"
		}
	}
	return typ
}

// openaiTexts returns the text parts of a message's content (a string, or
// an array of input_text/text/output_text parts).
func openaiTexts(content json.RawMessage) []string {
	var s string
	if soft(content, &s) {
		return []string{s}
	}
	var parts []map[string]json.RawMessage
	soft(content, &parts)
	var texts []string
	for _, p := range parts {
		var typ, text string
		soft(p["type"], &typ)
		switch typ {
		case "input_text", "text", "output_text":
			soft(p["text"], &text)
			texts = append(texts, text)
		}
	}
	return texts
}

// contextOnly reports whether every text is wholly wrapped in a context tag
// the CLIs add on their own.
func contextOnly(texts []string) bool {
	for _, t := range texts {
		t = strings.TrimSpace(t)
		wrapped := false
		for _, tag := range []string{"system-reminder", "environment_context"} {
			if strings.HasPrefix(t, "<"+tag+">") && strings.HasSuffix(t, "</"+tag+">") {
				wrapped = true
				break
			}
		}
		if !wrapped {
			return false
		}
	}
	return true
}

// object decodes a JSON object into its fields.
func object(body []byte) (map[string]json.RawMessage, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return nil, err
	}
	if top == nil {
		return nil, errNotObject
	}
	return top, nil
}

type jsonError string

func (e jsonError) Error() string { return string(e) }

const errNotObject = jsonError("request body is not a JSON object")

// soft decodes raw into v, reporting whether it could; a missing or
// mistyped field leaves v alone.
func soft(raw json.RawMessage, v any) bool {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return false
	}
	return json.Unmarshal(raw, v) == nil
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only called with strings
	}
	return b
}

// apiRequest is a parsed request of either API.
type apiRequest interface {
	route() (prompt string, turn int)
	model() string
}

func (r anthropicRequest) model() string { return r.Model }
func (r openaiRequest) model() string    { return r.Model }

// begin reads and parses the exchange's request, picks the script's turn
// for it, and waits or fails as the turn says (fail writes the API's error
// form). ok is false when the exchange was answered already; model is the
// request's, or "modelmock".
func begin[R apiRequest](x *exchange, parse func([]byte) (R, error), fail func(status int, msg string)) (req R, t Turn, model string, ok bool) {
	b, err := x.body()
	if err == nil {
		req, err = parse(b)
	}
	if err != nil {
		fail(http.StatusBadRequest, "modelmock: "+err.Error())
		return req, t, "", false
	}
	prompt, turn := req.route()
	var rule string
	sc := x.s.currentScript()
	rule, t = sc.pick(prompt, turn)
	// A turn that answers only its first Times requests passes the rest
	// on to the rule's next turn.
	for t.Times > 0 && x.s.count(fmt.Sprintf("%s#%d", rule, turn)) > t.Times {
		turn++
		rule, t = sc.pick(prompt, turn)
	}
	x.routed(rule, turn, req.model())
	for k, v := range t.Headers {
		x.w.Header().Set(k, v)
	}
	x.wait(t.Delay, t.Hang)
	if t.Status != 0 {
		fail(t.Status, forcedMessage(t))
		return req, t, "", false
	}
	if model = req.model(); model == "" {
		model = "modelmock"
	}
	return req, t, model, true
}
