package modelmock

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// anthropicMessages answers POST /v1/messages: SSE when the body asks for
// stream:true, a plain JSON message otherwise (Claude Code falls back to the
// non-streaming form when a stream lacks message_start).
func (x *exchange) anthropicMessages() {
	req, t, model, ok := begin(x, parseAnthropic, x.anthropicError)
	if !ok {
		return
	}
	n := x.s.itemSeq.Add(1)
	msgID, reqID := fmt.Sprintf("msg_mock_%d", n), fmt.Sprintf("req_mock_%d", n)
	if t.Malformed {
		x.anthropicMalformed(req.Stream, msgID)
	}
	blocks, err := x.anthropicBlocks(t)
	if err != nil {
		x.anthropicError(http.StatusInternalServerError, "modelmock: "+err.Error())
		return
	}
	stop := "end_turn"
	for _, bl := range blocks {
		if bl["type"] == "tool_use" {
			stop = "tool_use"
		}
	}
	u := t.Usage
	if !req.Stream {
		x.w.Header().Set("request-id", reqID)
		x.writeJSON(http.StatusOK, map[string]any{
			"id": msgID, "type": "message", "role": "assistant", "model": model,
			"content": blocks, "stop_reason": stop, "stop_sequence": nil,
			"usage": map[string]any{
				"input_tokens": u.Input, "output_tokens": u.Output,
				"cache_read_input_tokens": u.CacheRead, "cache_creation_input_tokens": u.CacheWrite,
			},
		})
		return
	}

	e := x.startSSE("request-id", reqID)
	e.event("message_start", map[string]any{
		"type": "message_start",
		"message": map[string]any{
			"id": msgID, "type": "message", "role": "assistant", "model": model,
			"content": []any{}, "stop_reason": nil, "stop_sequence": nil,
			"usage": map[string]any{
				"input_tokens": u.Input, "output_tokens": 1,
				"cache_read_input_tokens": u.CacheRead, "cache_creation_input_tokens": u.CacheWrite,
			},
		},
	})
	for i, bl := range blocks {
		start := map[string]any{}
		var deltas []map[string]any
		switch bl["type"] {
		case "thinking":
			start = map[string]any{"type": "thinking", "thinking": "", "signature": ""}
			deltas = append(deltas,
				map[string]any{"type": "thinking_delta", "thinking": bl["thinking"]},
				map[string]any{"type": "signature_delta", "signature": bl["signature"]})
		case "text":
			start = map[string]any{"type": "text", "text": ""}
			deltas = append(deltas, map[string]any{"type": "text_delta", "text": bl["text"]})
		case "tool_use":
			start = map[string]any{"type": "tool_use", "id": bl["id"], "name": bl["name"], "input": map[string]any{}}
			deltas = append(deltas, map[string]any{"type": "input_json_delta", "partial_json": string(bl["input"].(json.RawMessage))})
		}
		e.event("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": start})
		for _, d := range deltas {
			e.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": d})
		}
		e.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	e.event("message_delta", map[string]any{
		"type":  "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": u.Output},
	})
	e.event("message_stop", map[string]any{"type": "message_stop"})
	e.end()
}

// anthropicBlocks is the content of t's message: a thinking block, a text
// block and one tool_use block per tool call, in that order (an empty text
// block when there is nothing else).
func (x *exchange) anthropicBlocks(t Turn) ([]map[string]any, error) {
	var blocks []map[string]any
	if t.Reasoning != "" {
		blocks = append(blocks, map[string]any{"type": "thinking", "thinking": t.Reasoning, "signature": "modelmock-signature"})
	}
	if t.Text != "" || (t.Reasoning == "" && len(t.ToolCalls) == 0) {
		blocks = append(blocks, map[string]any{"type": "text", "text": t.Text})
	}
	for _, c := range t.ToolCalls {
		in, err := marshalInput(c.Input)
		if err != nil {
			return nil, err
		}
		id := c.ID
		if id == "" {
			id = fmt.Sprintf("toolu_mock_%d", x.s.toolSeq.Add(1))
		}
		blocks = append(blocks, map[string]any{"type": "tool_use", "id": id, "name": c.Name, "input": in})
	}
	return blocks, nil
}

// anthropicMalformed sends the start of an answer, cut off mid-JSON and
// followed by garbage, and drops the connection.
func (x *exchange) anthropicMalformed(stream bool, msgID string) {
	if !stream {
		x.w.Header().Set("Content-Type", "application/json")
		x.w.WriteHeader(http.StatusOK)
		fmt.Fprintf(x.w, `{"id":%q,"type":"message","role":"assistant","content":[{"type":"te`, msgID)
		http.NewResponseController(x.w).Flush()
		abort()
	}
	e := x.startSSE("request-id", "req_mock_malformed")
	e.raw(fmt.Sprintf("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":%q,\"type\":\"mess\n\n", msgID))
	e.raw("event: content_block_delta\ndata: }}not json{{\n\n")
	e.raw("garbage without a field name\n\n")
	abort()
}

// anthropicError answers with status and an Anthropic error body.
func (x *exchange) anthropicError(status int, msg string) {
	x.w.Header().Set("request-id", "req_mock_error")
	x.writeJSON(status, map[string]any{
		"type":  "error",
		"error": map[string]any{"type": anthropicErrorType(status), "message": msg},
	})
}

func anthropicErrorType(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case 529:
		return "overloaded_error"
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}
