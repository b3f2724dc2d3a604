package claude

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agents-fleet/fleet/provider"
)

// Permission option ids offered to the Host.
const (
	optAllow        = "allow"
	optAllowSession = "allow_session"
	optDeny         = "deny"
)

// answerBody is our answer to one of the CLI's control requests that the
// adapter does not handle.
type answerBody struct {
	Subtype   string `json:"subtype"`
	RequestID string `json:"request_id"`
	Error     string `json:"error,omitempty"`
}

type controlResponse struct {
	Type     string     `json:"type"`
	Response answerBody `json:"response"`
}

func (s *session) onControlRequest(e envelope) {
	id, _ := str(e.requestID)
	sub := rawStr(field(e.request, "subtype"))
	if sub == "can_use_tool" {
		s.onPermission(id, e.request)
		return
	}
	// Hooks, SDK MCP servers and the like are not configured by the
	// adapter; answer so the CLI does not wait.
	s.st.count("control_request/" + sub)
	b, err := json.Marshal(controlResponse{Type: "control_response", Response: answerBody{Subtype: "error", RequestID: id, Error: "the fleet does not handle " + sub + " requests"}})
	if err == nil {
		s.answer(append(b, '\n'))
	}
}

// answer writes a control_response on a goroutine of its own, so the
// stdout goroutine never waits on stdin (unless MaxPrompts are open).
func (s *session) answer(line []byte) {
	if !s.prompts.Go("", s.ctx, func(context.Context) []byte { return line }, s.writeAnswer) {
		s.writeAnswer(line)
	}
}

func (s *session) writeAnswer(line []byte) {
	_ = s.in.WriteLine(context.Background(), line) // a CLI that is gone needs no answer
}

// onPermission relays can_use_tool to Host.Permission on a goroutine of its
// own; the fleet's own MCP tools are allowed at once.
func (s *session) onPermission(id string, raw []byte) {
	var toolName, displayName, description, toolUseID string
	var input, sugg []byte
	if objectFields(raw, func(k, v []byte) bool {
		switch string(k) {
		case "tool_name":
			toolName, _ = str(v)
		case "display_name":
			displayName, _ = str(v)
		case "description":
			description, _ = str(v)
		case "tool_use_id":
			toolUseID, _ = str(v)
		case "input":
			input = v
		case "permission_suggestions":
			sugg = v
		}
		return true
	}) != nil {
		s.answer(denyLine(id, "The fleet could not read this permission request; the tool was not run."))
		return
	}
	if len(input) == 0 || input[0] != '{' {
		input = []byte("{}")
	}
	input = bytes.Clone(input) // the line's buffer is reused for the next line
	if isFleetTool(s.spec.MCP, toolName) {
		s.st.autoAllowed++
		s.answer(allowLine(id, input, nil))
		return
	}
	var in map[string]any
	_ = json.Unmarshal(input, &in)
	if toolName == askTool {
		s.onAskUser(id, in)
		return
	}
	var rules []suggestion
	if len(sugg) > 0 && sugg[0] == '[' {
		rules = sessionRules(sugg)
	}
	req := provider.PermissionRequest{
		ToolCallID:  toolUseID,
		Tool:        toolName,
		Input:       in,
		Description: description,
		Options:     []provider.PermissionOption{{ID: optAllow, Label: "Allow once", Kind: provider.AllowOnce}},
	}
	if req.Description == "" {
		req.Description = displayName
	}
	if len(rules) > 0 {
		req.Options = append(req.Options, provider.PermissionOption{ID: optAllowSession, Label: "Allow for this session: " + describeRules(rules), Kind: provider.AllowAlways})
	}
	req.Options = append(req.Options, provider.PermissionOption{ID: optDeny, Label: "Deny", Kind: provider.Reject})

	s.relay(id, func(ctx context.Context) []byte {
		d, err := s.h.Permission(ctx, req)
		var line []byte
		switch {
		case err != nil:
			line = denyLine(id, fmt.Sprintf("The fleet got no answer from an operator (%v); the tool was not run.", err))
		case d.Allow && d.OptionID == optAllowSession && len(rules) > 0:
			line = allowLine(id, input, rules)
		case d.Allow && d.OptionID != optDeny:
			line = allowLine(id, input, nil)
		default:
			msg := strings.TrimSpace(d.Message)
			if msg == "" {
				msg = "The operator denied this tool call."
			}
			line = denyLine(id, msg)
		}
		return line
	})
}

// relay runs ask, which asks the operator and returns the answer line, on a
// goroutine of its own, with a ctx that ends with the turn, the session, or
// the CLI's control_cancel_request for id (then nothing is written).
func (s *session) relay(id string, ask func(ctx context.Context) []byte) {
	s.mu.Lock()
	parent := s.ctx
	if s.turn != nil {
		parent = s.turn.ctx
	}
	s.mu.Unlock()
	if !s.prompts.Go(id, parent, ask, s.writeAnswer) {
		s.answer(denyLine(id, "The fleet has too many prompts open; the tool was not run."))
	}
}

// askTool is Claude's tool for asking the user questions; with a prompt
// tool configured, its can_use_tool request is where the answers go: the
// allow's updatedInput carries them as answers{question: answer}.
const askTool = "AskUserQuestion"

type askInput struct {
	Questions []struct {
		Question string `json:"question"`
		Header   string `json:"header"`
		Options  []struct {
			Label       string `json:"label"`
			Description string `json:"description"`
		} `json:"options"`
		MultiSelect bool `json:"multiSelect"`
	} `json:"questions"`
}

// onAskUser relays each of AskUserQuestion's questions to Host.Ask and
// answers the CLI with the answers; no answer denies the call.
func (s *session) onAskUser(id string, in map[string]any) {
	var q askInput
	if b, err := json.Marshal(in); err == nil {
		_ = json.Unmarshal(b, &q)
	}
	s.relay(id, func(ctx context.Context) []byte {
		answers := map[string]any{}
		for _, qu := range q.Questions {
			pq := provider.Question{Text: qu.Question, Kind: "choice", AllowFreeform: true}
			if qu.MultiSelect {
				pq.Text += " (one or more, separated by commas)"
			}
			for _, o := range qu.Options {
				pq.Choices = append(pq.Choices, provider.Choice{Label: o.Label, Value: o.Label, Description: o.Description})
			}
			if len(pq.Choices) == 0 {
				pq.Kind = "freeform"
			}
			a, err := s.h.Ask(ctx, pq)
			if err != nil {
				return denyLine(id, fmt.Sprintf("The fleet got no answer from an operator (%v).", err))
			}
			answers[qu.Question] = a
		}
		out := make(map[string]any, len(in)+1)
		for k, v := range in {
			out[k] = v
		}
		out["answers"] = answers
		b, err := json.Marshal(out)
		if err != nil {
			return denyLine(id, "The fleet could not encode the answers.")
		}
		return allowLine(id, b, nil)
	})
}

// allowLine is the control_response allowing can_use_tool request id. An
// allow must carry updatedInput (the CLI rejects one without it): the
// input goes back byte for byte, with the session rules when given.
func allowLine(id string, input []byte, rules []suggestion) []byte {
	b := make([]byte, 0, 128+len(input))
	b = append(b, `{"type":"control_response","response":{"subtype":"success","request_id":`...)
	b = appendString(b, id)
	b = append(b, `,"response":{"behavior":"allow","updatedInput":`...)
	b = append(b, input...)
	if len(rules) > 0 {
		if r, err := json.Marshal(rules); err == nil {
			b = append(b, `,"updatedPermissions":`...)
			b = append(b, r...)
		}
	}
	return append(b, "}}}\n"...)
}

// denyLine is the control_response denying request id; msg is what the
// model is told.
func denyLine(id, msg string) []byte {
	b := make([]byte, 0, 128+len(msg))
	b = append(b, `{"type":"control_response","response":{"subtype":"success","request_id":`...)
	b = appendString(b, id)
	b = append(b, `,"response":{"behavior":"deny","message":`...)
	b = appendString(b, msg)
	return append(b, "}}}\n"...)
}

// appendString appends s as a JSON string.
func appendString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always encodes
	return append(b, q...)
}

// suggestion is a permission update the CLI suggests with can_use_tool.
type suggestion struct {
	Type        string   `json:"type"`
	Rules       []rule   `json:"rules,omitempty"`
	Behavior    string   `json:"behavior,omitempty"`
	Mode        string   `json:"mode,omitempty"`
	Directories []string `json:"directories,omitempty"`
	Destination string   `json:"destination"`
}

type rule struct {
	ToolName    string `json:"toolName"`
	RuleContent string `json:"ruleContent,omitempty"`
}

// sessionRules are the CLI's suggestions for "allow for this session":
// the kinds the adapter understands, each with its destination set to the
// session (the CLI suggests localSettings for rules, which would write
// .claude/settings.local.json into the worker's worktree).
func sessionRules(raw []byte) []suggestion {
	var list []suggestion
	if json.Unmarshal(raw, &list) != nil {
		return nil
	}
	out := list[:0]
	for _, sg := range list {
		switch sg.Type {
		case "addRules":
			if sg.Behavior != "allow" || len(sg.Rules) == 0 {
				continue
			}
		case "addDirectories":
			if len(sg.Directories) == 0 {
				continue
			}
		case "setMode":
			if sg.Mode != "acceptEdits" {
				continue
			}
		default:
			continue
		}
		sg.Destination = "session"
		out = append(out, sg)
	}
	return out
}

// describeRules says what an allow-for-the-session answer allows.
func describeRules(rules []suggestion) string {
	var parts []string
	for _, sg := range rules {
		switch sg.Type {
		case "addRules":
			for _, ru := range sg.Rules {
				if ru.RuleContent != "" {
					parts = append(parts, ru.ToolName+"("+ru.RuleContent+")")
				} else {
					parts = append(parts, ru.ToolName)
				}
			}
		case "addDirectories":
			parts = append(parts, "access to "+strings.Join(sg.Directories, ", "))
		case "setMode":
			parts = append(parts, "all file edits")
		}
	}
	return strings.Join(parts, "; ")
}
