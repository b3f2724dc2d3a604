package daemon

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/agents-fleet/fleet/engine"
	"github.com/agents-fleet/fleet/fleetmcp"
	"github.com/agents-fleet/fleet/provider"
)

// fleetTools adapts the engine to the fleet's MCP tools.
type fleetTools struct{ e *engine.Engine }

var _ fleetmcp.Fleet = fleetTools{}

func (f fleetTools) SpawnWorker(ctx context.Context, caller string, r fleetmcp.SpawnRequest) (fleetmcp.SpawnResult, error) {
	task, worker, err := f.e.SpawnWorker(ctx, caller, engine.Spawn{Text: r.Task, Provider: r.Provider, Model: r.Model,
		Skill: r.Skill, Host: r.Host, Label: r.Label})
	return fleetmcp.SpawnResult{WorkerID: worker, TaskID: task}, err
}

func (f fleetTools) Workers(context.Context) []fleetmcp.WorkerInfo {
	ws := f.e.Workers()
	out := make([]fleetmcp.WorkerInfo, 0, len(ws))
	for _, w := range ws {
		out = append(out, fleetmcp.WorkerInfo{ID: w.ID, Status: w.Status, TaskID: w.TaskID, Task: w.Task,
			Provider: w.Provider, Model: w.Model, Branch: w.Branch, Host: w.Host, InputTokens: w.InputTokens,
			OutputTokens: w.OutputTokens, LastActivity: w.LastActivity})
	}
	return out
}

func (f fleetTools) Tasks(context.Context) []fleetmcp.TaskInfo {
	ts := f.e.Tasks()
	out := make([]fleetmcp.TaskInfo, 0, len(ts))
	for _, t := range ts {
		out = append(out, fleetmcp.TaskInfo{ID: t.ID, Status: t.Status, Worker: t.Worker, Text: t.Text, Reason: t.Reason})
	}
	return out
}

func (f fleetTools) WorkerOutput(_ context.Context, worker string, n int) ([]string, error) {
	return f.e.WorkerOutput(worker, n)
}

func (f fleetTools) TellWorker(_ context.Context, caller, worker, text string) error {
	return f.e.TellWorker(caller, worker, text)
}

func (f fleetTools) CancelWorker(_ context.Context, caller, worker string) error {
	return f.e.CancelWorker(caller, worker)
}

func (f fleetTools) AskOperator(ctx context.Context, caller string, q provider.Question) (string, error) {
	return f.e.AskOperator(ctx, caller, q)
}

func (f fleetTools) ConfirmOperator(ctx context.Context, caller, summary string) (bool, error) {
	return f.e.ConfirmOperator(ctx, caller, summary)
}

// Tools is the fleet's MCP server (package fleetmcp) for its agents. It
// listens before the engine exists, so the engine can hand its agents the
// server's endpoints, and serves once the engine is attached.
type Tools struct{ srv *fleetmcp.Server }

// ListenTools starts listening on loopback.
func ListenTools(log *slog.Logger) (*Tools, error) {
	srv := fleetmcp.New(log)
	if err := srv.Listen(); err != nil {
		return nil, fmt.Errorf("start the fleet's MCP server: %w", err)
	}
	return &Tools{srv: srv}, nil
}

// Coordinator is the engine's coordinator configuration: its agents get
// the fleet's tools.
func (t *Tools) Coordinator() *engine.CoordinatorConfig {
	return &engine.CoordinatorConfig{
		MCP:    func(agent string) []provider.MCPServer { return []provider.MCPServer{t.srv.Endpoint(agent)} },
		Revoke: t.srv.Revoke,
	}
}

// Serve answers tool calls with e.
func (t *Tools) Serve(e *engine.Engine) error { return t.srv.Serve(fleetTools{e}) }

// Close stops the server; calls in flight end.
func (t *Tools) Close() error { return t.srv.Close() }
