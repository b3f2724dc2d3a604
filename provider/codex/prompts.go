package codex

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agents-fleet/fleet/provider"
	"github.com/agents-fleet/fleet/provider/agentcli/jsonrpc"
)

// serverRequest answers a request of the CLI. Prompts for the operator run
// on a goroutine of their own (the reader keeps reading); everything else
// is answered at once. An unknown request gets a JSON-RPC error, so the CLI
// never waits on it.
func (s *session) serverRequest(method string, id json.RawMessage, m jsonrpc.Params) {
	switch method {
	case "item/commandExecution/requestApproval":
		s.commandApproval(id, m)
	case "item/fileChange/requestApproval":
		s.fileChangeApproval(id, m)
	case "mcpServer/elicitation/request":
		s.elicitation(id, m)
	case "item/permissions/requestApproval":
		s.permissionsApproval(id, m)
	case "item/tool/requestUserInput":
		s.userInput(id, m)
	case "execCommandApproval", "applyPatchApproval":
		s.legacyApproval(id, method, m)
	default:
		_ = s.rpc.RespondError(id, jsonrpc.CodeMethodNotFound, "agents-fleet does not handle "+method)
	}
}

// prompt asks the operator (ask) on a goroutine of its own, with a context
// that ends with the turn (or the session, between turns) or when the CLI
// resolves the request itself, and answers the request unless it was
// resolved meanwhile.
func (s *session) prompt(id json.RawMessage, ask func(ctx context.Context) any) {
	s.mu.Lock()
	parent := s.ctx
	if s.turn != nil {
		parent = s.turn.ctx
	}
	s.mu.Unlock()
	s.rpc.Prompt(id, parent, ask)
}

// respond answers request id at once.
func (s *session) respond(id json.RawMessage, result any) { _ = s.rpc.Respond(id, result) }

// decisionOption is a permission option and the decision value it sends.
type decisionOption struct {
	opt   provider.PermissionOption
	value json.RawMessage
}

var defaultDecisions = []json.RawMessage{
	json.RawMessage(`"accept"`), json.RawMessage(`"acceptForSession"`),
	json.RawMessage(`"decline"`), json.RawMessage(`"cancel"`),
}

// decisionOptions maps the CLI's availableDecisions (strings, or objects
// with one key such as acceptWithExecpolicyAmendment) to options.
func decisionOptions(available []json.RawMessage) []decisionOption {
	if len(available) == 0 {
		available = defaultDecisions
	}
	var out []decisionOption
	seen := map[string]int{}
	for _, raw := range available {
		var id string
		var body json.RawMessage
		if len(raw) > 1 && raw[0] == '"' && bytes.IndexByte(raw[1:len(raw)-1], '\\') < 0 {
			id = string(raw[1 : len(raw)-1]) // a plain string: most decisions
		} else if json.Unmarshal(raw, &id) != nil {
			var obj map[string]json.RawMessage
			if json.Unmarshal(raw, &obj) != nil || len(obj) != 1 {
				continue
			}
			for k, v := range obj {
				id, body = k, v
			}
		}
		opt := provider.PermissionOption{ID: id}
		switch id {
		case "accept":
			opt.Label, opt.Kind = "Allow once", provider.AllowOnce
		case "acceptForSession":
			opt.Label, opt.Kind = "Allow for this session", provider.AllowAlways
		case "acceptWithExecpolicyAmendment":
			var a struct {
				Amendment []string `json:"execpolicy_amendment"`
			}
			_ = json.Unmarshal(body, &a)
			opt.Label, opt.Kind = "Always allow commands starting with: "+strings.Join(a.Amendment, " "), provider.AllowAlways
		case "applyNetworkPolicyAmendment":
			var a struct {
				Amendment struct {
					Host   string `json:"host"`
					Action string `json:"action"`
				} `json:"network_policy_amendment"`
			}
			_ = json.Unmarshal(body, &a)
			if a.Amendment.Action == "deny" {
				opt.Label, opt.Kind = "Always deny network access to "+a.Amendment.Host, provider.Reject
			} else {
				opt.Label, opt.Kind = "Always allow network access to "+a.Amendment.Host, provider.AllowAlways
			}
		case "decline":
			opt.Label, opt.Kind = "Deny", provider.Reject
		case "cancel":
			opt.Label, opt.Kind = "Deny and stop the turn", provider.Reject
		default:
			opt.Label, opt.Kind = id, provider.Reject
			if strings.HasPrefix(id, "accept") {
				opt.Kind = provider.AllowOnce
			}
		}
		if n := seen[id]; n > 0 {
			opt.ID = fmt.Sprintf("%s#%d", id, n+1)
		}
		seen[id]++
		out = append(out, decisionOption{opt: opt, value: raw})
	}
	return out
}

func options(opts []decisionOption) []provider.PermissionOption {
	out := make([]provider.PermissionOption, len(opts))
	for i, o := range opts {
		out[i] = o.opt
	}
	return out
}

// choose is the decision value for the operator's answer: the option they
// picked, else accept or decline; any error denies.
func choose(opts []decisionOption, d provider.Decision, err error) json.RawMessage {
	if err != nil {
		return json.RawMessage(`"decline"`)
	}
	if d.OptionID != "" {
		for _, o := range opts {
			if o.opt.ID == d.OptionID {
				return o.value
			}
		}
	}
	if d.Allow {
		return json.RawMessage(`"accept"`)
	}
	return json.RawMessage(`"decline"`)
}

func (s *session) commandApproval(id json.RawMessage, m jsonrpc.Params) {
	var p struct {
		ItemID                 string            `json:"itemId"`
		Kind                   string            `json:"kind"`
		Command                *string           `json:"command"`
		Cwd                    *string           `json:"cwd"`
		Reason                 *string           `json:"reason"`
		NetworkApprovalContext json.RawMessage   `json:"networkApprovalContext"`
		AvailableDecisions     []json.RawMessage `json:"availableDecisions"`
	}
	if err := s.decode(m, &p); err != nil {
		s.respond(id, map[string]any{"decision": "decline"})
		s.emit(provider.Note{Text: "codex: declined a command approval request that did not decode: " + err.Error()})
		return
	}
	input := map[string]any{}
	if p.Command != nil {
		input["command"] = *p.Command
	}
	if p.Cwd != nil {
		input["cwd"] = *p.Cwd
	}
	if p.Kind != "" && p.Kind != "command" {
		input["kind"] = p.Kind
	}
	if len(p.NetworkApprovalContext) > 0 && string(p.NetworkApprovalContext) != "null" {
		input["network"] = rawInput(p.NetworkApprovalContext)
	}
	req := provider.PermissionRequest{ToolCallID: p.ItemID, Tool: "exec_command", Input: input, Description: deref(p.Reason)}
	opts := decisionOptions(p.AvailableDecisions)
	req.Options = options(opts)
	s.prompt(id, func(ctx context.Context) any {
		d, err := s.h.Permission(ctx, req)
		return map[string]any{"decision": choose(opts, d, err)}
	})
}

func (s *session) fileChangeApproval(id json.RawMessage, m jsonrpc.Params) {
	var p struct {
		ItemID    string  `json:"itemId"`
		Reason    *string `json:"reason"`
		GrantRoot *string `json:"grantRoot"`
	}
	if err := s.decode(m, &p); err != nil {
		s.respond(id, map[string]any{"decision": "decline"})
		s.emit(provider.Note{Text: "codex: declined a file change approval request that did not decode: " + err.Error()})
		return
	}
	// The request names the item; its changes came with item/started.
	input := map[string]any{}
	if it := s.rd.items[p.ItemID]; it != nil {
		input["changes"] = changesInput(it.changes)
	}
	if p.GrantRoot != nil && *p.GrantRoot != "" {
		input["grantRoot"] = *p.GrantRoot
	}
	opts := decisionOptions(nil)
	req := provider.PermissionRequest{ToolCallID: p.ItemID, Tool: "apply_patch", Input: input, Description: deref(p.Reason), Options: options(opts)}
	s.prompt(id, func(ctx context.Context) any {
		d, err := s.h.Permission(ctx, req)
		return map[string]any{"decision": choose(opts, d, err)}
	})
}

// elicitation answers an MCP server's elicitation. Codex asks this way
// before calling an MCP tool (codex_approval_kind mcp_tool_call): the
// fleet's own servers are accepted without asking (they are configured to
// approve their tools, so this is a fallback), other servers' tool calls go
// to the operator, and other elicitations (forms) are declined.
func (s *session) elicitation(id json.RawMessage, m jsonrpc.Params) {
	var p struct {
		ServerName string `json:"serverName"`
		Message    string `json:"message"`
		Meta       struct {
			Kind       string          `json:"codex_approval_kind"`
			ToolName   string          `json:"tool_name"`
			ToolParams json.RawMessage `json:"tool_params"`
		} `json:"_meta"`
	}
	if err := s.decode(m, &p); err != nil {
		s.respond(id, map[string]any{"action": "decline"})
		return
	}
	if p.Meta.Kind != "mcp_tool_call" {
		s.respond(id, map[string]any{"action": "decline"})
		s.emit(provider.Note{Text: fmt.Sprintf("codex: declined a request for input from MCP server %s (not supported yet): %s", p.ServerName, p.Message)})
		return
	}
	if s.mcp[p.ServerName] {
		s.respond(id, map[string]any{"action": "accept"})
		return
	}
	opts := []decisionOption{
		{provider.PermissionOption{ID: "accept", Label: "Allow", Kind: provider.AllowOnce}, json.RawMessage(`"accept"`)},
		{provider.PermissionOption{ID: "decline", Label: "Deny", Kind: provider.Reject}, json.RawMessage(`"decline"`)},
		{provider.PermissionOption{ID: "cancel", Label: "Deny and stop the turn", Kind: provider.Reject}, json.RawMessage(`"cancel"`)},
	}
	req := provider.PermissionRequest{
		Tool:        "mcp__" + p.ServerName + "__" + p.Meta.ToolName,
		Input:       rawInput(p.Meta.ToolParams),
		Description: p.Message,
		Options:     options(opts),
	}
	s.prompt(id, func(ctx context.Context) any {
		d, err := s.h.Permission(ctx, req)
		return map[string]any{"action": choose(opts, d, err)}
	})
}

// permissionsApproval relays a request for extra sandbox permissions
// (network, filesystem); allowing grants what was asked, for the turn or
// the session.
func (s *session) permissionsApproval(id json.RawMessage, m jsonrpc.Params) {
	var p struct {
		ItemID      string          `json:"itemId"`
		Cwd         string          `json:"cwd"`
		Reason      *string         `json:"reason"`
		Permissions json.RawMessage `json:"permissions"`
	}
	if s.decode(m, &p) != nil {
		s.respond(id, map[string]any{"permissions": map[string]any{}})
		return
	}
	opts := []decisionOption{
		{provider.PermissionOption{ID: "turn", Label: "Allow for this turn", Kind: provider.AllowOnce}, json.RawMessage(`"turn"`)},
		{provider.PermissionOption{ID: "session", Label: "Allow for this session", Kind: provider.AllowAlways}, json.RawMessage(`"session"`)},
		{provider.PermissionOption{ID: "decline", Label: "Deny", Kind: provider.Reject}, json.RawMessage(`"decline"`)},
	}
	req := provider.PermissionRequest{
		ToolCallID:  p.ItemID,
		Tool:        "request_permissions",
		Input:       map[string]any{"permissions": rawInput(p.Permissions), "cwd": p.Cwd},
		Description: deref(p.Reason),
		Options:     options(opts),
	}
	s.prompt(id, func(ctx context.Context) any {
		d, err := s.h.Permission(ctx, req)
		scope := "turn"
		switch {
		case err != nil || (!d.Allow && d.OptionID == ""):
			return map[string]any{"permissions": map[string]any{}}
		case d.OptionID == "decline":
			return map[string]any{"permissions": map[string]any{}}
		case d.OptionID == "session":
			scope = "session"
		}
		return map[string]any{"permissions": p.Permissions, "scope": scope}
	})
}

// userInput asks the operator the model's request_user_input questions.
func (s *session) userInput(id json.RawMessage, m jsonrpc.Params) {
	var p struct {
		Questions []struct {
			ID       string `json:"id"`
			Header   string `json:"header"`
			Question string `json:"question"`
			IsOther  bool   `json:"isOther"`
			Options  []struct {
				Label       string `json:"label"`
				Description string `json:"description"`
			} `json:"options"`
		} `json:"questions"`
	}
	if s.decode(m, &p) != nil {
		s.respond(id, map[string]any{"answers": map[string]any{}})
		return
	}
	s.prompt(id, func(ctx context.Context) any {
		answers := map[string]any{}
		for _, q := range p.Questions {
			text := q.Question
			if q.Header != "" {
				text = q.Header + ": " + text
			}
			question := provider.Question{Text: text, Kind: "freeform", AllowFreeform: true}
			if len(q.Options) > 0 {
				question.Kind, question.AllowFreeform = "choice", q.IsOther
				for _, o := range q.Options {
					question.Choices = append(question.Choices, provider.Choice{Label: o.Label, Value: o.Label, Description: o.Description})
				}
			}
			a, err := s.h.Ask(ctx, question)
			if err != nil {
				break
			}
			answers[q.ID] = map[string]any{"answers": []string{a}}
		}
		return map[string]any{"answers": answers}
	})
}

// legacyApproval answers the v1 approval requests (not sent for v2
// threads, handled so they never hang) with a plain allow/deny.
func (s *session) legacyApproval(id json.RawMessage, method string, m jsonrpc.Params) {
	tool := "exec_command"
	if method == "applyPatchApproval" {
		tool = "apply_patch"
	}
	var p struct {
		CallID string  `json:"callId"`
		Reason *string `json:"reason"`
	}
	_ = s.decode(m, &p)
	req := provider.PermissionRequest{ToolCallID: p.CallID, Tool: tool, Input: rawInput(m.Raw()), Description: deref(p.Reason)}
	s.prompt(id, func(ctx context.Context) any {
		d, err := s.h.Permission(ctx, req)
		if err != nil || !d.Allow {
			return map[string]any{"decision": "denied"}
		}
		return map[string]any{"decision": "approved"}
	})
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
