package protocol

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckNativeFrame(t *testing.T) {
	ok := []string{
		`{"type":"nativeRoot","id":"read-1","request":{"action":"status","rootId":"R"}}`,
		"{\"request\":{},\"id\":\"x\",\"type\":\"nativeRoot\"}\n",
	}
	for _, f := range ok {
		if err := CheckNativeFrame([]byte(f)); err != nil {
			t.Errorf("CheckNativeFrame(%s) = %v", f, err)
		}
	}
	bad := map[string]string{
		`{"type":"nativeRoot","id":"x","request":{},"principal":"root"}`: `nativeRoot: unexpected key "principal"`,
		`{"type":"nativeRoot","request":{}}`:                             `nativeRoot: missing required field "id"`,
		`{"type":"nativeRoot","id":"x"}`:                                 `nativeRoot: missing required field "request"`,
		`{"type":"nativeRoot","id":"x","id":"y","request":{}}`:           `nativeRoot: duplicate key "id"`,
		`{"type":"prompt","id":"x","request":{}}`:                        `nativeRoot: field "type" must be "nativeRoot"`,
		`{"Type":"nativeRoot","id":"x","request":{}}`:                    `nativeRoot: unexpected key "Type"`,
		`{"type":"nativeRoot","id":"x","request":{}`:                     `invalid JSON`,
		`["nativeRoot"]`: `frame is not a JSON object`,
	}
	for f, want := range bad {
		err := CheckNativeFrame([]byte(f))
		var de *DecodeError
		if !errors.As(err, &de) || de.Msg != want {
			t.Errorf("CheckNativeFrame(%s) = %v, want %q", f, err, want)
		}
	}
	pad := func(n int) []byte {
		head := `{"type":"nativeRoot","id":"x","request":{"action":"list","rationale":"`
		tail := `"}}`
		return []byte(head + strings.Repeat("r", n-len(head)-len(tail)) + tail)
	}
	if err := CheckNativeFrame(pad(MaxNativeFrameSize)); err != nil {
		t.Errorf("frame of exactly 16 KiB: %v", err)
	}
	if err := CheckNativeFrame(append(pad(MaxNativeFrameSize), '\n')); err != nil {
		t.Errorf("frame of exactly 16 KiB plus newline: %v", err)
	}
	if err := CheckNativeFrame(pad(MaxNativeFrameSize + 1)); !errors.Is(err, ErrFrameTooLarge) {
		t.Errorf("frame of 16 KiB + 1: %v, want ErrFrameTooLarge", err)
	}
}

func TestParseNativeRequest(t *testing.T) {
	req, err := ParseNativeRequest([]byte(`{"action":"approve","rootId":"R","operationId":"op-1","expectedRevision":4,"taskId":"t","rationale":"ok","supersedes":"d-1"}`))
	if err != nil {
		t.Fatal(err)
	}
	want := NativeRequest{Action: NativeApprove, RootID: "R", OperationID: "op-1", ExpectedRevision: Int(4), TaskID: "t", Rationale: "ok", Supersedes: "d-1"}
	if req.Action != want.Action || *req.ExpectedRevision != 4 || req.Supersedes != "d-1" || req.RootID != "R" {
		t.Fatalf("ParseNativeRequest = %+v", req)
	}
	if err := req.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}

	bad := map[string]string{
		`{"action":"status","rootId":"R","principal":"admin"}`:       `nativeRoot: request: unknown field "principal"`,
		`{"action":"status","rootId":"R","owner":{"id":1}}`:          `nativeRoot: request: unknown field "owner"`,
		`{"action":"status","RootID":"R"}`:                           `nativeRoot: request: unknown field "RootID"`,
		`{"action":"pause","expectedRevision":"3"}`:                  `nativeRoot: request: field "expectedRevision" must be an integer`,
		`{"action":"pause","expectedRevision":3.5}`:                  `nativeRoot: request: field "expectedRevision" must be an integer`,
		`{"action":"pause","expectedRevision":null}`:                 `nativeRoot: request: field "expectedRevision" must be an integer`,
		`{"action":"pause","expectedRevision":99999999999999999999}`: `nativeRoot: request: field "expectedRevision" must be an integer`,
		`{"action":5}`:                          `nativeRoot: request: field "action" must be a string`,
		`{"action":"list","rootId":null}`:       `nativeRoot: request: field "rootId" must be a string`,
		`{"action":"list","action":"status"}`:   `nativeRoot: request: duplicate field "action"`,
		`["list"]`:                              `nativeRoot: request must be an object`,
		`{"action":"list"} {"action":"status"}`: `nativeRoot: request is not valid JSON`,
		`{"action":"list"`:                      `nativeRoot: request is not valid JSON`,
	}
	for raw, want := range bad {
		_, err := ParseNativeRequest([]byte(raw))
		var de *DecodeError
		if !errors.As(err, &de) || de.Msg != want || de.Type != TypeNativeRoot {
			t.Errorf("ParseNativeRequest(%s) = %v, want %q", raw, err, want)
		}
	}
	big := []byte(`{"action":"list","rationale":"` + strings.Repeat("x", MaxNativeFrameSize) + `"}`)
	if _, err := ParseNativeRequest(big); !errors.Is(err, ErrFrameTooLarge) {
		t.Errorf("oversized request: %v", err)
	}
}

func TestNativeRequestValidate(t *testing.T) {
	rev := Int(3)
	mut := func(action string) NativeRequest {
		return NativeRequest{Action: action, RootID: "R", OperationID: "op", ExpectedRevision: rev}
	}
	with := func(r NativeRequest, f func(*NativeRequest)) NativeRequest { f(&r); return r }
	valid := []NativeRequest{
		{Action: NativeList},
		{Action: NativeStatus, RootID: "R"},
		mut(NativePause), mut(NativeResume), mut(NativeStop), mut(NativeAbort), mut(NativeReclassify), mut(NativeAbandon),
		with(mut(NativeStop), func(r *NativeRequest) { r.TaskID = "t" }),
		with(mut(NativeRelease), func(r *NativeRequest) { r.HoldHash = "h" }),
		with(mut(NativeApprove), func(r *NativeRequest) { r.TaskID = "t"; r.Rationale = "why" }),
		with(mut(NativeDeny), func(r *NativeRequest) { r.TaskID = "t"; r.Rationale = "why"; r.Supersedes = "d-1" }),
		with(mut(NativeManualStart), func(r *NativeRequest) { r.TaskID = "t" }),
		with(mut(NativeReconcile), func(r *NativeRequest) { r.ProofID = "ws-1"; r.TaskID = "t" }),
		with(mut(NativeAbandon), func(r *NativeRequest) { r.OperationID = strings.Repeat("é", MaxOperationIDLen) }),
		with(mut(NativePause), func(r *NativeRequest) { r.ExpectedRevision = Int(0) }),
	}
	for _, r := range valid {
		if err := r.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v", r, err)
		}
	}
	invalid := map[string]NativeRequest{
		`nativeRoot: unknown action "explode"`:                         {Action: "explode"},
		`nativeRoot: unknown action ""`:                                {},
		`nativeRoot: action "status" needs field "rootId"`:             {Action: NativeStatus},
		`nativeRoot: action "list" does not take field "rootId"`:       {Action: NativeList, RootID: "R"},
		`nativeRoot: action "pause" needs field "expectedRevision"`:    {Action: NativePause, RootID: "R", OperationID: "op"},
		`nativeRoot: action "release" needs field "holdHash"`:          mut(NativeRelease),
		`nativeRoot: action "release" does not take field "taskId"`:    with(mut(NativeRelease), func(r *NativeRequest) { r.HoldHash = "h"; r.TaskID = "t" }),
		`nativeRoot: action "reclassify" does not take field "taskId"`: with(mut(NativeReclassify), func(r *NativeRequest) { r.TaskID = "t" }),
		`nativeRoot: action "approve" needs field "rationale"`:         with(mut(NativeApprove), func(r *NativeRequest) { r.TaskID = "t" }),
		`nativeRoot: action "deny" needs a non-empty rationale`:        with(mut(NativeDeny), func(r *NativeRequest) { r.TaskID = "t"; r.Rationale = " \t" }),
		`nativeRoot: action "manual-start" needs field "taskId"`:       mut(NativeManualStart),
		`nativeRoot: action "reconcile" needs field "proofId"`:         mut(NativeReconcile),
		`nativeRoot: action "pause" does not take field "supersedes"`:  with(mut(NativePause), func(r *NativeRequest) { r.Supersedes = "d" }),
		`nativeRoot: operationId must be 1-128 characters`:             with(mut(NativeAbandon), func(r *NativeRequest) { r.OperationID = strings.Repeat("x", MaxOperationIDLen+1) }),
	}
	for want, r := range invalid {
		err := r.Validate()
		var de *DecodeError
		if !errors.As(err, &de) || de.Msg != want {
			t.Errorf("Validate(%+v) = %v, want %q", r, err, want)
		}
	}
}

// TestNativeRootRequestParses: the request Decode keeps is what
// ParseNativeRequest reads.
func TestNativeRootRequestParses(t *testing.T) {
	frame := []byte(`{"type":"nativeRoot","id":"m-1","request":{ "action":"pause","rootId":"R","operationId":"op","expectedRevision":2 }}`)
	if err := CheckNativeFrame(frame); err != nil {
		t.Fatal(err)
	}
	m, err := Decode(frame)
	if err != nil {
		t.Fatal(err)
	}
	nr := m.(*NativeRoot)
	req, err := ParseNativeRequest(nr.Request)
	if err != nil || nr.ID != "m-1" || req.Action != NativePause || *req.ExpectedRevision != 2 {
		t.Fatalf("req = %+v, %v", req, err)
	}
	if err := req.Validate(); err != nil {
		t.Fatal(err)
	}
}
