package modelmock

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

// openaiResponses answers POST /v1/responses (and /responses) with an
// OpenAI Responses SSE stream. Codex needs response.output_item.done for
// each item and response.completed; the other events are sent too.
func (x *exchange) openaiResponses() {
	req, t, model, ok := begin(x, parseOpenAI, x.openaiError)
	if !ok {
		return
	}
	respID := fmt.Sprintf("resp_mock_%d", x.s.itemSeq.Add(1))
	if t.Malformed {
		e := x.startSSE("x-request-id", "req_mock_malformed")
		e.raw(fmt.Sprintf("event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":%q,\"stat\n\n", respID))
		e.raw("event: response.output_item.done\ndata: {{{garbage\n\n")
		e.raw("garbage without a field name\n\n")
		abort()
	}
	items, err := x.openaiItems(t, req.Tools)
	if err != nil {
		x.openaiError(http.StatusInternalServerError, "modelmock: "+err.Error())
		return
	}

	created := time.Now().Unix()
	response := func(status string, output []map[string]any, usage any) map[string]any {
		return map[string]any{
			"id": respID, "object": "response", "created_at": created, "status": status,
			"model": model, "output": output, "usage": usage,
			"error": nil, "incomplete_details": nil,
		}
	}
	e := x.startSSE("x-request-id", "req_"+respID)
	seq := 0
	ev := func(name string, fields map[string]any) {
		fields["type"] = name
		fields["sequence_number"] = seq
		seq++
		e.event(name, fields)
	}
	ev("response.created", map[string]any{"response": response("in_progress", []map[string]any{}, nil)})
	ev("response.in_progress", map[string]any{"response": response("in_progress", []map[string]any{}, nil)})
	for i, it := range items {
		id := it["id"]
		ev("response.output_item.added", map[string]any{"output_index": i, "item": inProgress(it)})
		switch it["type"] {
		case "reasoning":
			text := it["summary"].([]map[string]any)[0]["text"]
			part := map[string]any{"type": "summary_text", "text": ""}
			ev("response.reasoning_summary_part.added", map[string]any{"item_id": id, "output_index": i, "summary_index": 0, "part": part})
			ev("response.reasoning_summary_text.delta", map[string]any{"item_id": id, "output_index": i, "summary_index": 0, "delta": text})
			ev("response.reasoning_summary_text.done", map[string]any{"item_id": id, "output_index": i, "summary_index": 0, "text": text})
			ev("response.reasoning_summary_part.done", map[string]any{"item_id": id, "output_index": i, "summary_index": 0,
				"part": map[string]any{"type": "summary_text", "text": text}})
		case "message":
			text := it["content"].([]map[string]any)[0]["text"]
			ev("response.content_part.added", map[string]any{"item_id": id, "output_index": i, "content_index": 0,
				"part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}})
			ev("response.output_text.delta", map[string]any{"item_id": id, "output_index": i, "content_index": 0, "delta": text})
			ev("response.output_text.done", map[string]any{"item_id": id, "output_index": i, "content_index": 0, "text": text})
			ev("response.content_part.done", map[string]any{"item_id": id, "output_index": i, "content_index": 0,
				"part": map[string]any{"type": "output_text", "text": text, "annotations": []any{}}})
		case "function_call":
			ev("response.function_call_arguments.delta", map[string]any{"item_id": id, "output_index": i, "delta": it["arguments"]})
			ev("response.function_call_arguments.done", map[string]any{"item_id": id, "output_index": i, "arguments": it["arguments"]})
		case "custom_tool_call":
			ev("response.custom_tool_call_input.delta", map[string]any{"item_id": id, "output_index": i, "delta": it["input"]})
			ev("response.custom_tool_call_input.done", map[string]any{"item_id": id, "output_index": i, "input": it["input"]})
		}
		ev("response.output_item.done", map[string]any{"output_index": i, "item": it})
	}
	u := t.Usage
	ev("response.completed", map[string]any{"response": response("completed", items, map[string]any{
		"input_tokens":          u.Input,
		"input_tokens_details":  map[string]any{"cached_tokens": u.CacheRead},
		"output_tokens":         u.Output,
		"output_tokens_details": map[string]any{"reasoning_tokens": 0},
		"total_tokens":          u.Input + u.Output,
	})})
	e.end()
}

// openaiItems is t's output: a reasoning item, an assistant message and one
// item per tool call, in that order (an empty message when there is
// nothing else). A tool call's item type follows the request's tools: a
// custom tool gets a custom_tool_call with raw input; mcp__SERVER__TOOL,
// when the request declares the namespace mcp__SERVER, gets a function_call
// in that namespace; anything else a plain function_call.
func (x *exchange) openaiItems(t Turn, tools []openaiTool) ([]map[string]any, error) {
	next := func(prefix string) string { return fmt.Sprintf("%s_mock_%d", prefix, x.s.itemSeq.Add(1)) }
	var items []map[string]any
	if t.Reasoning != "" {
		items = append(items, map[string]any{
			"id": next("rs"), "type": "reasoning",
			"summary": []map[string]any{{"type": "summary_text", "text": t.Reasoning}},
		})
	}
	if t.Text != "" || (t.Reasoning == "" && len(t.ToolCalls) == 0) {
		items = append(items, map[string]any{
			"id": next("msg"), "type": "message", "role": "assistant", "status": "completed",
			"content": []map[string]any{{"type": "output_text", "text": t.Text, "annotations": []any{}}},
		})
	}
	for _, c := range t.ToolCalls {
		callID := c.ID
		if callID == "" {
			callID = fmt.Sprintf("call_mock_%d", x.s.callSeq.Add(1))
		}
		if declared(tools, "custom", c.Name) {
			in, ok := c.Input.(string)
			if !ok {
				b, err := marshalInput(c.Input)
				if err != nil {
					return nil, err
				}
				in = string(b)
			}
			items = append(items, map[string]any{
				"id": next("ctc"), "type": "custom_tool_call", "status": "completed",
				"call_id": callID, "name": c.Name, "input": in,
			})
			continue
		}
		args, err := marshalInput(c.Input)
		if err != nil {
			return nil, err
		}
		it := map[string]any{
			"id": next("fc"), "type": "function_call", "status": "completed",
			"call_id": callID, "name": c.Name, "arguments": string(args),
		}
		if ns, tool, ok := namespaced(tools, c.Name); ok {
			it["namespace"], it["name"] = ns, tool
		}
		items = append(items, it)
	}
	return items, nil
}

// inProgress is an output item as response.output_item.added shows it.
func inProgress(it map[string]any) map[string]any {
	c := make(map[string]any, len(it))
	for k, v := range it {
		c[k] = v
	}
	switch it["type"] {
	case "reasoning":
		c["summary"] = []any{}
	case "message":
		c["status"], c["content"] = "in_progress", []any{}
	case "function_call":
		c["status"], c["arguments"] = "in_progress", ""
	case "custom_tool_call":
		c["status"], c["input"] = "in_progress", ""
	}
	return c
}

func declared(tools []openaiTool, typ, name string) bool {
	for _, t := range tools {
		if t.Type == typ && t.Name == name {
			return true
		}
	}
	return false
}

// namespaced splits mcp__SERVER__TOOL into a namespace the request declares
// and the tool's name in it (the longest declared namespace wins).
func namespaced(tools []openaiTool, name string) (ns, tool string, ok bool) {
	if !strings.HasPrefix(name, "mcp__") {
		return "", "", false
	}
	for _, t := range tools {
		if t.Type == "namespace" && strings.HasPrefix(name, t.Name+"__") && len(t.Name) > len(ns) && len(name) > len(t.Name)+2 {
			ns, tool, ok = t.Name, name[len(t.Name)+2:], true
		}
	}
	return ns, tool, ok
}

// openaiError answers with status and an OpenAI error body.
func (x *exchange) openaiError(status int, msg string) {
	typ, code := "invalid_request_error", any(nil)
	switch {
	case status == http.StatusUnauthorized:
		code = "invalid_api_key"
	case status == http.StatusTooManyRequests:
		typ, code = "rate_limit_error", "rate_limit_exceeded"
	case status >= 500:
		typ, code = "server_error", "server_error"
	}
	x.w.Header().Set("x-request-id", "req_mock_error")
	x.writeJSON(status, map[string]any{
		"error": map[string]any{"message": msg, "type": typ, "code": code, "param": nil},
	})
}
