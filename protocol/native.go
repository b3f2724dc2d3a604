package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// This file holds the native-root messages (DESIGN §7): the nativeRoot
// request frame, its strict request body, and the nativeRootResult answer.

// NativeRoot is the client's native control frame: exactly type, id and
// request. Decode checks only that id, when present, is a string and that
// request is present and an object; CheckNativeFrame and ParseNativeRequest
// apply the strict rules.
type NativeRoot struct {
	// ID is the transport correlation id (not the durable operationId). It
	// is always encoded; Decode accepts a frame without it ("").
	ID string `json:"id" protocol:"optional"`
	// Request is the raw request object, compacted by Decode. A nil Request
	// is encoded as {}.
	Request json.RawMessage `json:"request"`
}

// MessageType returns TypeNativeRoot.
func (NativeRoot) MessageType() string { return TypeNativeRoot }

// MarshalJSON encodes a nil Request as {}.
func (m NativeRoot) MarshalJSON() ([]byte, error) {
	type plain NativeRoot
	p := plain(m)
	if len(p.Request) == 0 {
		p.Request = json.RawMessage(`{}`)
	}
	return marshalPlain(p)
}

// afterDecode compacts Request so that equal requests compare equal and
// re-encode to the same bytes.
func (m *NativeRoot) afterDecode() error {
	var b bytes.Buffer
	if err := json.Compact(&b, m.Request); err != nil {
		return err
	}
	m.Request = b.Bytes()
	return nil
}

// Native request actions from the page's action table.
const (
	NativeList        = "list"
	NativeStatus      = "status"
	NativePause       = "pause"
	NativeResume      = "resume"
	NativeStop        = "stop"
	NativeAbort       = "abort"
	NativeRelease     = "release"
	NativeReclassify  = "reclassify"
	NativeApprove     = "approve"
	NativeDeny        = "deny"
	NativeManualStart = "manual-start"
	NativeReconcile   = "reconcile"
	NativeAbandon     = "abandon"
)

// MaxOperationIDLen is the longest operationId a mutation may carry (DESIGN §7).
const MaxOperationIDLen = 128

// NativeRequest is the body of a nativeRoot frame: every field of the
// page's action table. Which fields an action needs is checked by Validate.
type NativeRequest struct {
	Action      string `json:"action"`
	RootID      string `json:"rootId,omitempty"`
	OperationID string `json:"operationId,omitempty"`
	// ExpectedRevision is a JSON number; a string is rejected.
	ExpectedRevision *int64 `json:"expectedRevision,omitempty"`
	TaskID           string `json:"taskId,omitempty"`
	HoldHash         string `json:"holdHash,omitempty"`
	Rationale        string `json:"rationale,omitempty"`
	Supersedes       string `json:"supersedes,omitempty"`
	ProofID          string `json:"proofId,omitempty"`
}

var nativeRequestKeys = []string{
	"action", "rootId", "operationId", "expectedRevision", "taskId",
	"holdHash", "rationale", "supersedes", "proofId",
}

func nativeErr(format string, args ...any) *DecodeError {
	return &DecodeError{Type: TypeNativeRoot, Msg: "nativeRoot: " + fmt.Sprintf(format, args...)}
}

// CheckNativeFrame applies the frame-level native rules to a whole nativeRoot
// frame (with or without its trailing newline): at most MaxNativeFrameSize
// bytes (ErrFrameTooLarge otherwise), a JSON object whose keys are exactly
// type, id and request, each once, with type "nativeRoot". Other problems are
// a *DecodeError.
func CheckNativeFrame(frame []byte) error {
	frame = trimNewline(frame)
	if len(frame) > MaxNativeFrameSize {
		return ErrFrameTooLarge
	}
	if !json.Valid(frame) {
		return &DecodeError{Msg: "invalid JSON"}
	}
	seen := map[string]bool{}
	s := scanner{data: frame}
	err := s.object(func(kb []byte) error {
		key := string(kb)
		switch key {
		case "type", "id", "request":
		default:
			return nativeErr("unexpected key %q", key)
		}
		if seen[key] {
			return nativeErr("duplicate key %q", key)
		}
		seen[key] = true
		if key == "type" {
			v, ok := s.stringValue()
			if !ok || v != TypeNativeRoot {
				return nativeErr(`field "type" must be "nativeRoot"`)
			}
			return nil
		}
		return s.skip()
	})
	if err != nil {
		if de, ok := err.(*DecodeError); ok {
			return de
		}
		return &DecodeError{Msg: "frame is not a JSON object"}
	}
	for _, k := range []string{"type", "id", "request"} {
		if !seen[k] {
			return nativeErr("missing required field %q", k)
		}
	}
	return nil
}

// ParseNativeRequest strictly decodes a nativeRoot request object: at most
// MaxNativeFrameSize bytes, a single JSON object, only the keys of
// NativeRequest spelled exactly and each at most once, no nulls, string
// fields as strings and expectedRevision as an integer number. It does not
// check which fields the action needs; see Validate. Errors are *DecodeError
// (or ErrFrameTooLarge).
func ParseNativeRequest(raw []byte) (*NativeRequest, error) {
	if len(raw) > MaxNativeFrameSize {
		return nil, ErrFrameTooLarge
	}
	if !json.Valid(raw) {
		return nil, nativeErr("request is not valid JSON")
	}
	seen := make(map[string]bool, len(nativeRequestKeys))
	s := scanner{data: raw}
	err := s.object(func(kb []byte) error {
		key := string(kb)
		known := false
		for _, k := range nativeRequestKeys {
			if key == k {
				known = true
				break
			}
		}
		if !known {
			return nativeErr("request: unknown field %q", key)
		}
		if seen[key] {
			return nativeErr("request: duplicate field %q", key)
		}
		seen[key] = true
		s.ws()
		c := s.peek()
		switch {
		case key == "expectedRevision":
			if c != '-' && (c < '0' || c > '9') {
				return nativeErr(`request: field "expectedRevision" must be an integer`)
			}
		case c != '"':
			return nativeErr("request: field %q must be a string", key)
		}
		return s.skip()
	})
	if err != nil {
		if de, ok := err.(*DecodeError); ok {
			return nil, de
		}
		return nil, nativeErr("request must be an object")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var req NativeRequest
	if err := dec.Decode(&req); err != nil {
		if te, ok := err.(*json.UnmarshalTypeError); ok && te.Field == "expectedRevision" {
			return nil, nativeErr(`request: field "expectedRevision" must be an integer`)
		}
		return nil, nativeErr("invalid request")
	}
	return &req, nil
}

// nativeRule lists, per action, the fields it needs and the optional ones it
// allows (action is always needed).
type nativeRule struct {
	required []string
	optional []string
}

var mutation = []string{"rootId", "operationId", "expectedRevision"}

func with(base []string, more ...string) []string {
	return append(append([]string(nil), base...), more...)
}

var nativeRules = map[string]nativeRule{
	NativeList:        {},
	NativeStatus:      {required: []string{"rootId"}},
	NativePause:       {required: mutation, optional: []string{"taskId"}},
	NativeResume:      {required: mutation, optional: []string{"taskId"}},
	NativeStop:        {required: mutation, optional: []string{"taskId"}},
	NativeAbort:       {required: mutation, optional: []string{"taskId"}},
	NativeRelease:     {required: with(mutation, "holdHash")},
	NativeReclassify:  {required: mutation},
	NativeApprove:     {required: with(mutation, "taskId", "rationale"), optional: []string{"supersedes"}},
	NativeDeny:        {required: with(mutation, "taskId", "rationale"), optional: []string{"supersedes"}},
	NativeManualStart: {required: with(mutation, "taskId")},
	NativeReconcile:   {required: with(mutation, "proofId"), optional: []string{"taskId"}},
	NativeAbandon:     {required: mutation, optional: []string{"taskId"}},
}

// fields returns the request's fields by JSON name, present meaning set
// (non-empty string, non-nil revision).
func (r *NativeRequest) fields() map[string]bool {
	return map[string]bool{
		"rootId":           r.RootID != "",
		"operationId":      r.OperationID != "",
		"expectedRevision": r.ExpectedRevision != nil,
		"taskId":           r.TaskID != "",
		"holdHash":         r.HoldHash != "",
		"rationale":        r.Rationale != "",
		"supersedes":       r.Supersedes != "",
		"proofId":          r.ProofID != "",
	}
}

// Validate checks r against the page's action table: a known action, every
// field the action needs (non-empty), no field the action does not take, an
// operationId of 1–MaxOperationIDLen characters, a non-blank rationale for
// approve/deny. Errors are *DecodeError with a message safe to show a client.
func (r *NativeRequest) Validate() error {
	rule, ok := nativeRules[r.Action]
	if !ok {
		return nativeErr("unknown action %q", r.Action)
	}
	set := r.fields()
	allowed := map[string]bool{}
	for _, k := range rule.required {
		if !set[k] {
			return nativeErr("action %q needs field %q", r.Action, k)
		}
		allowed[k] = true
	}
	for _, k := range rule.optional {
		allowed[k] = true
	}
	for _, k := range nativeRequestKeys[1:] {
		if set[k] && !allowed[k] {
			return nativeErr("action %q does not take field %q", r.Action, k)
		}
	}
	if utf8.RuneCountInString(r.OperationID) > MaxOperationIDLen {
		return nativeErr("operationId must be 1-%d characters", MaxOperationIDLen)
	}
	if allowed["rationale"] && strings.TrimSpace(r.Rationale) == "" {
		return nativeErr("action %q needs a non-empty rationale", r.Action)
	}
	return nil
}

// NativeResultKind is the kind of a native result.
type NativeResultKind string

// Native result kinds.
const (
	NativeKindRoots           NativeResultKind = "roots"
	NativeKindStatus          NativeResultKind = "status"
	NativeKindReceipt         NativeResultKind = "receipt"
	NativeKindPolicyAdmission NativeResultKind = "policy-admission"
	NativeKindError           NativeResultKind = "error"
)

// NativeRootResult answers a nativeRoot frame on the requesting connection.
type NativeRootResult struct {
	// ID echoes the request's transport id; nil (encoded as null, never
	// omitted) when the id was missing or invalid.
	ID     *string      `json:"id"`
	Result NativeResult `json:"result"`
}

// MessageType returns TypeNativeRootResult.
func (NativeRootResult) MessageType() string { return TypeNativeRootResult }

// afterDecode gives a roots result without a roots array an empty one, the
// way it is encoded (see NativeResult.MarshalJSON).
func (m *NativeRootResult) afterDecode() error {
	if m.Result.Kind == NativeKindRoots && m.Result.Roots == nil {
		m.Result.Roots = []NativeRootInfo{}
	}
	return nil
}

// NativeResult is the body of a NativeRootResult. Which fields are set
// depends on Kind:
//   - roots: Roots (always encoded, [] when there are none);
//   - status: Root;
//   - receipt: Receipt and AcknowledgmentOnly (true);
//   - policy-admission: RootID, PreviousRootID, PreviousRootUnchanged,
//     Receipt, SessionRebound;
//   - error: Code (stable, e.g. "native_mode_required") and Message (safe).
type NativeResult struct {
	Kind NativeResultKind `json:"kind"`
	// Roots is omitzero, not omitempty, so an empty list is sent as [].
	Roots                 []NativeRootInfo  `json:"roots,omitzero"`
	Root                  *NativeRootStatus `json:"root,omitempty"`
	Receipt               *NativeReceipt    `json:"receipt,omitempty"`
	AcknowledgmentOnly    *bool             `json:"acknowledgmentOnly,omitempty"`
	RootID                string            `json:"rootId,omitempty"`
	PreviousRootID        string            `json:"previousRootId,omitempty"`
	PreviousRootUnchanged *bool             `json:"previousRootUnchanged,omitempty"`
	SessionRebound        *bool             `json:"sessionRebound,omitempty"`
	Code                  string            `json:"code,omitempty"`
	Message               string            `json:"message,omitempty"`
}

// MarshalJSON encodes a roots result's nil Roots as [].
func (m NativeResult) MarshalJSON() ([]byte, error) {
	type plain NativeResult
	p := plain(m)
	if p.Kind == NativeKindRoots {
		p.Roots = nonNil(p.Roots)
	}
	return marshalPlain(p)
}

// NativeReceipt is a projected durable receipt of a mutation. Its Status is
// the receipt's, not the work's: persisted is not executed.
type NativeReceipt struct {
	OperationID string `json:"operationId"`
	// RequestHash is the hash of the full request body; the same
	// operationId with another hash is operation_id_reused.
	RequestHash string `json:"requestHash"`
	RootID      string `json:"rootId"`
	Action      string `json:"action"`
	// Revision is the root's revision after the mutation.
	Revision  int64  `json:"revision"`
	Status    string `json:"status"`
	CreatedAt int64  `json:"createdAt"`
}

// NativeRootInfo is one root in a roots result.
type NativeRootInfo struct {
	ID       string `json:"id"`
	Revision int64  `json:"revision"`
	// Intent is run, pause, stop or abort; Phase is what the engine reached.
	Intent         string `json:"intent"`
	Phase          string `json:"phase"`
	PreviousRootID string `json:"previousRootId,omitempty"`
}

// NativeRootStatus is the full state of one root in a status result.
type NativeRootStatus struct {
	ID              string           `json:"id"`
	Revision        int64            `json:"revision"`
	Intent          string           `json:"intent"`
	Phase           string           `json:"phase"`
	Grant           NativeGrant      `json:"grant"`
	PreviousRootID  string           `json:"previousRootId,omitempty"`
	Tasks           []NativeTask     `json:"tasks"`
	Holds           []NativeHold     `json:"holds"`
	Decisions       []NativeDecision `json:"decisions"`
	Effects         []NativeEffect   `json:"effects"`
	PendingReceipts []NativeReceipt  `json:"pendingReceipts"`
}

// MarshalJSON encodes nil required arrays as [].
func (m NativeRootStatus) MarshalJSON() ([]byte, error) {
	type plain NativeRootStatus
	p := plain(m)
	p.Tasks = nonNil(p.Tasks)
	p.Holds = nonNil(p.Holds)
	p.Decisions = nonNil(p.Decisions)
	p.Effects = nonNil(p.Effects)
	p.PendingReceipts = nonNil(p.PendingReceipts)
	return marshalPlain(p)
}

// NativeGrant is the authority a root was opened under: which session it is
// bound to and its policy version. A reclassified (previous) root keeps its
// grant.
type NativeGrant struct {
	SessionID     string `json:"sessionId"`
	PolicyVersion string `json:"policyVersion"`
	GrantedAt     int64  `json:"grantedAt"`
}

// NativeTask is one task reserved in a root.
type NativeTask struct {
	ID      string `json:"id"`
	Subject string `json:"subject"`
	// State is an open string: reserved, running, settled, failed, held.
	State    string `json:"state"`
	Attempts int64  `json:"attempts"`
	// EvidenceHash is the hash an approve/deny must pin, when the task waits
	// for a decision.
	EvidenceHash string `json:"evidenceHash,omitempty"`
}

// NativeHold is a hold on work; release needs its current HoldHash.
type NativeHold struct {
	HoldHash  string `json:"holdHash"`
	Reason    string `json:"reason"`
	CreatedAt int64  `json:"createdAt"`
	TaskID    string `json:"taskId,omitempty"`
}

// NativeDecision is an evidence-pinned approve or deny.
type NativeDecision struct {
	ID           string `json:"id"`
	TaskID       string `json:"taskId"`
	Verdict      string `json:"verdict"`
	Rationale    string `json:"rationale"`
	EvidenceHash string `json:"evidenceHash"`
	// Consumed is true once the approval was used; it can't be rewritten.
	Consumed   bool   `json:"consumed"`
	CreatedAt  int64  `json:"createdAt"`
	Supersedes string `json:"supersedes,omitempty"`
}

// NativeEffect is an effect the root's work had on the world (a worker run,
// a settlement), as far as the engine knows.
type NativeEffect struct {
	ID     string `json:"id"`
	TaskID string `json:"taskId"`
	Kind   string `json:"kind"`
	// State is an open string: started, settled, uncertain.
	State     string `json:"state"`
	StartedAt int64  `json:"startedAt"`
	SettledAt int64  `json:"settledAt,omitempty"`
	// ProofID is the worker-settlement record id reconcile accepts.
	ProofID string `json:"proofId,omitempty"`
}
