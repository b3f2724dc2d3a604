package daemon

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os/exec"
	"strings"
	"time"

	"github.com/agents-fleet/fleet/engine"
	"github.com/agents-fleet/fleet/intel"
	"github.com/agents-fleet/fleet/intel/record"
	"github.com/agents-fleet/fleet/native"
	"github.com/agents-fleet/fleet/protocol"
)

// openNative opens the native root controller of a native session.
func openNative(ctx context.Context, home, sessionID, policyVersion string) (*native.Store, *native.Controller, error) {
	st, err := openNativeStore(home)
	if err != nil {
		return nil, nil, err
	}
	ctl, err := native.New(ctx, st, sessionID, native.Options{PolicyVersion: policyVersion})
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	return st, ctl, nil
}

// policyVersion identifies the confirm policy an approval was given under:
// evidence hashes pin it, so changing the patterns invalidates approvals.
func policyVersion(patterns []string) string {
	h := sha256.New()
	for _, p := range patterns {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return "policy-" + hex.EncodeToString(h.Sum(nil))[:16]
}

// governor adapts the native controller to the engine.
type governor struct {
	ctl           *native.Controller
	baseCommit    string // the repository's HEAD when the fleet started ("" outside git)
	policyVersion string
}

func (g *governor) Reserve(ctx context.Context, r engine.Reservation) error {
	spec := native.TaskSpec{ID: r.ID, Subject: r.Command, NeedsApproval: r.NeedsApproval, Planned: r.Planned}
	if r.NeedsApproval {
		spec.Evidence = native.Evidence(r.Command, g.baseCommit, g.policyVersion)
	}
	return g.ctl.Reserve(ctx, spec)
}

func (g *governor) Admit(ctx context.Context, taskID string) (engine.Admission, error) {
	a, err := g.ctl.Admit(ctx, taskID)
	return engine.Admission{Start: a.Start, Wait: a.Wait, Refuse: a.Refuse}, err
}

func (g *governor) ReleasePlanned(ctx context.Context, taskID string) error {
	return g.ctl.ReleasePlanned(ctx, taskID)
}

func (g *governor) Settle(ctx context.Context, s engine.Settlement) (string, error) {
	return g.ctl.Settle(ctx, native.Settlement{
		TaskID: s.TaskID, WorkerID: s.WorkerID, ExitCode: s.ExitCode, Failed: s.Failed,
		HeadCommit: headCommit(ctx, s.WorktreePath), At: s.At,
	})
}

func (g *governor) Hold(ctx context.Context, taskID, reason string) (string, error) {
	return g.ctl.Hold(ctx, taskID, reason)
}

func (g *governor) MarkUncertain(ctx context.Context, taskID string) error {
	return g.ctl.MarkUncertain(ctx, taskID)
}

func (g *governor) Intent(taskID string) (string, string) {
	return g.ctl.Intent(g.ctl.BoundRoot(), taskID)
}

func (g *governor) ReportPhase(ctx context.Context, phase string) error {
	return g.ctl.ReportPhase(ctx, g.ctl.BoundRoot(), phase)
}

// headCommit is the worktree's HEAD for the settlement record ("" when
// there is no worktree or git cannot tell).
func headCommit(ctx context.Context, dir string) string {
	if dir == "" {
		return ""
	}
	out, err := exec.CommandContext(ctx, "git", "-C", dir, "rev-parse", "HEAD").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// nativeBackend answers nativeRoot requests: the controller in a native
// session, native_mode_required in a legacy one.
func nativeBackend(ctl *native.Controller) func(context.Context, *protocol.NativeRequest) protocol.NativeResult {
	if ctl == nil {
		return func(context.Context, *protocol.NativeRequest) protocol.NativeResult {
			return engine.NativeModeRequired()
		}
	}
	return ctl.Handle
}

// steeredNative records accepted native mutations (an operator's decision
// on running work) as steering in the intel store; in may be nil.
func steeredNative(h func(context.Context, *protocol.NativeRequest) protocol.NativeResult, in *intel.Service, session string) func(context.Context, *protocol.NativeRequest) protocol.NativeResult {
	if in == nil {
		return h
	}
	return func(ctx context.Context, r *protocol.NativeRequest) protocol.NativeResult {
		res := h(ctx, r)
		if res.Kind == protocol.NativeKindReceipt {
			text := r.Action
			if r.TaskID != "" {
				text += " " + r.TaskID
			}
			if r.Rationale != "" {
				text += ": " + r.Rationale
			}
			in.Steer(record.Steering{SessionID: session, Source: "native:" + r.Action, Text: text, Target: r.TaskID, CreatedAt: time.Now().UnixMilli()})
		}
		return res
	}
}
