package copilot

import (
	"context"
	"encoding/json"

	"github.com/agents-fleet/fleet/provider"
)

// permissionParams are session/request_permission's params.
type permissionParams struct {
	SessionID string `json:"sessionId"`
	ToolCall  struct {
		ToolCallID string          `json:"toolCallId"`
		Title      string          `json:"title"`
		Kind       string          `json:"kind"`
		RawInput   json.RawMessage `json:"rawInput"`
		Locations  []location      `json:"locations"`
	} `json:"toolCall"`
	Options []permissionOption `json:"options"`
}

type permissionOption struct {
	OptionID string `json:"optionId"`
	Name     string `json:"name"`
	Kind     string `json:"kind"` // allow_once, allow_always, reject_once, reject_always
}

// outcome is the answer to session/request_permission.
type outcome struct {
	Outcome  string `json:"outcome"` // "selected" or "cancelled"
	OptionID string `json:"optionId,omitempty"`
}

// permission relays a permission prompt (on the reader). A prompt for one
// of the fleet's own MCP tools is allowed at once; any other goes to
// Host.Permission on a goroutine of its own (a prompt of the client's),
// so the reader keeps reading, and is answered the moment the host
// decides.
func (s *session) permission(id json.RawMessage, raw json.RawMessage) {
	var p permissionParams
	if err := json.Unmarshal(raw, &p); err != nil {
		// Never leave the CLI waiting: a prompt the adapter cannot read is
		// answered "cancelled" (the CLI denies the call).
		s.garbage("permission request", raw)
		s.answerPermission(id, outcome{Outcome: "cancelled"})
		return
	}
	tc := s.rs.tools[p.ToolCall.ToolCallID]
	var name, title string
	if tc != nil {
		name, title = tc.name, tc.title
	} else {
		probe := &toolCall{title: p.ToolCall.Title, kind: p.ToolCall.Kind, rawInput: p.ToolCall.RawInput}
		name, title = s.toolName(probe), p.ToolCall.Title
	}
	if s.isMCPTool(name) || s.isMCPTool(title) {
		if o, ok := pick(p.Options, true); ok {
			s.answerPermission(id, o)
			return
		}
	}
	req := provider.PermissionRequest{
		ToolCallID:  p.ToolCall.ToolCallID,
		Tool:        name,
		Input:       rawMap(p.ToolCall.RawInput),
		Description: p.ToolCall.Title,
	}
	for _, o := range p.Options {
		req.Options = append(req.Options, provider.PermissionOption{ID: o.OptionID, Label: o.Name, Kind: optionKind(o.Kind)})
	}
	parent := s.ctx
	s.mu.Lock()
	if s.turn != nil {
		parent = s.turn.ctx
	}
	s.mu.Unlock()
	s.rpc.Prompt(id, parent, func(ctx context.Context) any {
		d, err := s.h.Permission(ctx, req)
		return map[string]any{"outcome": decide(ctx, p.Options, d, err)}
	})
}

func (s *session) answerPermission(id json.RawMessage, o outcome) {
	_ = s.rpc.Respond(id, map[string]any{"outcome": o})
}

// decide turns the host's decision into the CLI's outcome. The option the
// host named wins, unless it would allow what the host denied. An error
// from the host denies (reject_once) — or, when the turn was cancelled,
// answers "cancelled", which ACP requires after session/cancel.
func decide(ctx context.Context, opts []permissionOption, d provider.Decision, err error) outcome {
	if err != nil {
		if ctx.Err() != nil {
			return outcome{Outcome: "cancelled"}
		}
		if o, ok := pick(opts, false); ok {
			return o
		}
		return outcome{Outcome: "cancelled"}
	}
	if d.OptionID != "" {
		for _, o := range opts {
			if o.OptionID == d.OptionID && (d.Allow || !isAllow(o.Kind)) {
				return outcome{Outcome: "selected", OptionID: o.OptionID}
			}
		}
	}
	if o, ok := pick(opts, d.Allow); ok {
		return o
	}
	return outcome{Outcome: "cancelled"} // a denial with no reject option
}

// pick chooses an option of one side: its "once" option, else any.
func pick(opts []permissionOption, allow bool) (outcome, bool) {
	once := "reject_once"
	if allow {
		once = "allow_once"
	}
	for _, o := range opts {
		if o.Kind == once {
			return outcome{Outcome: "selected", OptionID: o.OptionID}, true
		}
	}
	for _, o := range opts {
		if isAllow(o.Kind) == allow {
			return outcome{Outcome: "selected", OptionID: o.OptionID}, true
		}
	}
	return outcome{}, false
}

func isAllow(kind string) bool { return kind == "allow_once" || kind == "allow_always" }

func optionKind(k string) provider.OptionKind {
	switch k {
	case "allow_once":
		return provider.AllowOnce
	case "allow_always":
		return provider.AllowAlways
	}
	return provider.Reject
}
