package codex

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agents-fleet/fleet/provider"
	"github.com/agents-fleet/fleet/provider/agentcli/jsonrpc"
)

// readState is what the reader goroutine keeps between lines.
type readState struct {
	items     map[string]*openItem // tool items started and not completed
	ended     map[string]bool      // tool items a turn end completed; a late item/completed is dropped
	itemSeq   int
	total     *tokenBreakdown // the thread's last cumulative usage
	lastText  string          // the turn's last agent message
	sessionID string          // the thread id last reported
	// resetsAt is when the account's limit resets, from the last
	// account/rateLimits/updated that gave one (docs/unattended.md).
	resetsAt time.Time

	garbage        int // lines that are not JSON-RPC
	unknown        int // notifications of methods the adapter does not know
	unknownMethods map[string]int
	badItems       int // items that did not decode
}

func (r *readState) init() {
	r.items = map[string]*openItem{}
	r.ended = map[string]bool{}
	r.unknownMethods = map[string]int{}
}

const (
	// maxUnknownMethods bounds the per-method counts kept.
	maxUnknownMethods = 64
	// maxEnded bounds the ids of items completed at a turn's end.
	maxEnded = 1024
)

type openItem struct {
	seq     int
	name    string
	start   time.Time
	changes []fileUpdate
}

// handleLine decodes one stdout line and acts on it. Reader goroutine only.
func (s *session) handleLine(line []byte) { s.rpc.Dispatch(line) }

// isNotification reports the methods the CLI sends only as notifications,
// whose lines the dispatcher does not search for an id: the ones the
// adapter maps and the ones it ignores. Other methods are checked for an
// id (requests, and notifications the adapter does not know).
func isNotification(method string) bool {
	switch method {
	case "item/started", "item/completed", "thread/tokenUsage/updated", "turn/started", "turn/completed",
		"thread/started", "error", "serverRequest/resolved", "configWarning", "deprecationNotice", "warning",
		"guardianWarning", "model/rerouted", "mcpServer/startupStatus/updated", "thread/compacted",
		"account/rateLimits/updated":
		return true
	}
	return ignored[method]
}

// Request answers a request of the CLI's (jsonrpc.Handler).
func (s *session) Request(id json.RawMessage, method string, p jsonrpc.Params) {
	s.serverRequest(method, id, p)
}

// Notification maps a notification (jsonrpc.Handler). The ones the
// adapter ignores, and the ones skippable shows map to nothing, are not
// decoded.
func (s *session) Notification(method string, p jsonrpc.Params) {
	if ignored[method] {
		if !p.Valid() {
			s.garbageLine(p.Line())
		}
		return
	}
	if s.skippable(method, p.Line()) {
		return
	}
	s.notification(method, p)
}

// Invalid counts a line that is not JSON-RPC (jsonrpc.Handler).
func (s *session) Invalid(line []byte) { s.garbageLine(line) }

// skippable reports lines that would map to nothing, read off their start
// without decoding them: item/started of items that are not tools (text
// and reasoning map at item/completed), a user message's items, and
// thread/started of the thread already reported. These prefixes follow
// the CLI's field order; a line in another order (or already decoded: no
// line) is decoded as usual.
func (s *session) skippable(method string, line []byte) bool {
	switch method {
	case "item/started", "item/completed":
		const prefix = `"params":{"item":{"type":"`
		off := len(`{"method":"`) + len(method) + len(`",`)
		if off > len(line) {
			return false
		}
		rest := line[off:]
		if !bytes.HasPrefix(rest, []byte(prefix)) {
			return false
		}
		rest = rest[len(prefix):]
		end := bytes.IndexByte(rest, '"')
		if end < 0 {
			return false
		}
		switch string(rest[:end]) {
		case "userMessage", "hookPrompt":
			return true
		case "agentMessage", "reasoning", "plan", "contextCompaction":
			return method == "item/started"
		}
	case "thread/started":
		if s.rd.sessionID == "" {
			return false
		}
		prefix := `{"method":"thread/started","params":{"thread":{"id":"` + s.rd.sessionID + `"`
		return bytes.HasPrefix(line, []byte(prefix))
	}
	return false
}

// decode is p.Decode; a line that is not JSON at all counts as garbage.
func (s *session) decode(p jsonrpc.Params, v any) error {
	err := p.Decode(v)
	var syntax *json.SyntaxError
	if errors.As(err, &syntax) && p.Line() != nil {
		s.garbageLine(p.Line())
	}
	return err
}

func (s *session) garbageLine(line []byte) {
	s.rd.garbage++
	if s.rd.garbage == 1 {
		s.emit(provider.Note{Text: fmt.Sprintf("codex app-server printed a line that is not JSON-RPC; ignoring it and any more: %q", lastBytesFromStart(line, 200))})
	}
}

func lastBytesFromStart(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

// ignored are notifications the adapter knows and does not map (most are
// also opted out of at initialize).
var ignored = map[string]bool{}

func init() {
	for _, m := range optOut {
		ignored[m] = true
	}
	for _, m := range []string{
		"thread/readState/changed", "thread/name/updated", "thread/goal/updated", "thread/goal/cleared",
		"thread/settings/updated", "thread/queue/changed", "thread/prediction/updated", "thread/section/changed",
		"thread/attachment/updated", "thread/environment/connected", "thread/environment/disconnected",
		"thread/project/updated", "project/changed", "thread/archived", "thread/unarchived", "thread/closed",
		"skills/changed", "hook/started", "hook/completed", "turn/plan/updated", "turn/moderationMetadata",
		"item/autoApprovalReview/started", "item/autoApprovalReview/completed",
		"item/commandExecution/terminalInteraction", "item/fileChange/patchUpdated", "item/mcpToolCall/progress",
		"process/exited", "mcpServer/oauthLogin/completed", "mcpServer/event/stream/notification",
		"account/updated", "account/gatewayOAuth/changed", "app/list/updated", "fs/changed",
		"model/verification", "model/safetyBuffering/updated",
		"modelProvider/authRecoveryStarted", "modelProvider/authRecoveryCompleted",
	} {
		ignored[m] = true
	}
}

func (s *session) notification(method string, m jsonrpc.Params) {
	switch method {
	case "item/started":
		var p struct {
			Item threadItem `json:"item"`
		}
		if s.decode(m, &p) != nil {
			s.rd.badItems++
			return
		}
		s.itemStarted(&p.Item)
	case "item/completed":
		var p struct {
			Item threadItem `json:"item"`
		}
		if s.decode(m, &p) != nil {
			s.rd.badItems++
			return
		}
		s.itemCompleted(&p.Item)
	case "thread/tokenUsage/updated":
		s.tokenUsage(m)
	case "turn/started":
		var p struct {
			Turn struct {
				ID string `json:"id"`
			} `json:"turn"`
		}
		_ = s.decode(m, &p)
		s.mu.Lock()
		tr := s.turn
		s.mu.Unlock()
		if tr != nil {
			s.setTurnID(tr, p.Turn.ID)
		}
	case "turn/completed":
		s.turnCompleted(m)
	case "thread/started":
		var p struct {
			Thread struct {
				ID    string `json:"id"`
				Model string `json:"model"`
			} `json:"thread"`
		}
		if s.decode(m, &p) == nil && p.Thread.ID != "" && p.Thread.ID != s.rd.sessionID {
			s.rd.sessionID = p.Thread.ID
			s.emit(provider.SessionStarted{ID: p.Thread.ID, Model: p.Thread.Model})
		}
	case "error":
		var p struct {
			Error     turnError `json:"error"`
			WillRetry bool      `json:"willRetry"`
		}
		if s.decode(m, &p) == nil && p.WillRetry {
			// A retry; the final error ends the turn in turn/completed.
			s.emit(provider.Note{Text: "codex: " + p.Error.text()})
			if p.Error.status() == 429 {
				// Codex waits a retry-after itself, without saying how long.
				s.emit(provider.RateLimited{Retrying: true, Until: s.rd.resetsAt, Reason: "codex: " + p.Error.text()})
			}
		}
	case "account/rateLimits/updated":
		s.rateLimits(m)
	case "serverRequest/resolved":
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		if s.decode(m, &p) == nil {
			s.rpc.Withdraw(p.RequestID)
		}
	case "configWarning", "deprecationNotice":
		var p struct {
			Summary string  `json:"summary"`
			Details *string `json:"details"`
		}
		if s.decode(m, &p) == nil && p.Summary != "" {
			text := p.Summary
			if p.Details != nil && *p.Details != "" {
				text += " " + *p.Details
			}
			s.emit(provider.Note{Text: "codex: " + text})
		}
	case "warning", "guardianWarning":
		var p struct {
			Message string `json:"message"`
		}
		if s.decode(m, &p) == nil && p.Message != "" {
			s.emit(provider.Note{Text: "codex: " + p.Message})
		}
	case "model/rerouted":
		var p struct {
			From   string          `json:"fromModel"`
			To     string          `json:"toModel"`
			Reason json.RawMessage `json:"reason"`
		}
		if s.decode(m, &p) == nil {
			s.emit(provider.Note{Text: fmt.Sprintf("codex: model rerouted from %s to %s (%s)", p.From, p.To, bytes.Trim(p.Reason, `"`))})
		}
	case "mcpServer/startupStatus/updated":
		var p struct {
			Name   string  `json:"name"`
			Status string  `json:"status"`
			Error  *string `json:"error"`
		}
		if s.decode(m, &p) == nil && p.Status == "failed" {
			msg := "codex: MCP server " + p.Name + " failed to start"
			if p.Error != nil && *p.Error != "" {
				msg += ": " + *p.Error
			}
			s.emit(provider.Note{Text: msg})
		}
	case "thread/compacted":
		s.emit(provider.Note{Text: "codex: the conversation was compacted to fit the context window"})
	default:
		if ignored[method] {
			return
		}
		if !m.Valid() {
			s.garbageLine(m.Line())
			return
		}
		s.rd.unknown++
		if _, ok := s.rd.unknownMethods[method]; ok || len(s.rd.unknownMethods) < maxUnknownMethods {
			s.rd.unknownMethods[method]++
		}
	}
}
