// Package fleetmcp is the MCP server named "fleet" that the daemon hosts for
// its agents: the coordinator plans and delegates through its tools
// (spawn_worker, list_workers, list_tasks, read_worker_output, tell_worker,
// cancel_worker, ask_operator, confirm), and workers may get a subset.
//
// It speaks MCP's streamable HTTP transport on 127.0.0.1, because the agent
// CLIs own the stdio servers they start (as children) while the fleet's
// state lives in the daemon. Every request carries a bearer token minted per
// agent by Endpoint; the token alone says which agent is calling, and that
// caller id is what the tools pass to Fleet. docs/fleet-mcp.md describes the
// tools, the authentication and the limits.
//
// Data flows one way: the tools call Fleet (the engine), which the consumer
// of this package implements; fleetmcp never sees the engine's state.
package fleetmcp

import (
	"context"

	"github.com/agents-fleet/fleet/provider"
)

// Fleet is what the tools act on; the engine implements it. caller is the id
// of the agent whose token made the call ("coordinator", "w3"); it is the
// only authority the tools carry, and Fleet decides what that agent may do.
//
// Methods are called concurrently, from the goroutines serving MCP requests.
// ctx ends when the agent's MCP client cancels the call, when the agent's
// token is revoked, or when the Server closes; a method that blocks (an
// operator question) must return once ctx is done. An error's text is shown
// to the agent as the tool's error result, so it should say what to do.
type Fleet interface {
	// SpawnWorker starts a worker agent on a new task.
	SpawnWorker(ctx context.Context, caller string, r SpawnRequest) (SpawnResult, error)
	// Workers lists the fleet's workers.
	Workers(ctx context.Context) []WorkerInfo
	// Tasks lists the fleet's tasks.
	Tasks(ctx context.Context) []TaskInfo
	// WorkerOutput returns up to maxLines of the worker's latest transcript
	// lines, oldest first; an error for an unknown worker.
	WorkerOutput(ctx context.Context, worker string, maxLines int) ([]string, error)
	// TellWorker sends text to the worker as its next turn.
	TellWorker(ctx context.Context, caller, worker, text string) error
	// CancelWorker stops the worker.
	CancelWorker(ctx context.Context, caller, worker string) error
	// AskOperator relays q to the operator and blocks until it is
	// answered or ends unanswered (provider.ErrNoAnswer), or ctx is done.
	AskOperator(ctx context.Context, caller string, q provider.Question) (string, error)
	// ConfirmOperator asks the operator to approve summary and blocks like
	// AskOperator.
	ConfirmOperator(ctx context.Context, caller, summary string) (bool, error)
}

// SpawnRequest is what spawn_worker asks for. Provider and Model are ""
// when the agent left them out: the fleet's defaults.
type SpawnRequest struct {
	Task     string
	Provider string
	Model    string
	Skill    string // "" for none
	// Host or Label (at most one) pins the worker to that worker host or to
	// a host with that label; "" for none (the fleet places it).
	Host  string
	Label string
}

// SpawnResult names the worker and task SpawnWorker started.
type SpawnResult struct {
	WorkerID, TaskID string
}

// WorkerInfo is one worker as list_workers shows it; its JSON form is what
// the agent reads.
type WorkerInfo struct {
	ID           string `json:"id"`
	Status       string `json:"status"`
	TaskID       string `json:"task_id,omitempty"`
	Task         string `json:"task,omitempty"` // shortened to maxListText runes in the listing
	Provider     string `json:"provider,omitempty"`
	Model        string `json:"model,omitempty"`
	Branch       string `json:"branch,omitempty"`
	Host         string `json:"host,omitempty"` // the worker host it runs on; left out for the fleet's machine
	InputTokens  int64  `json:"input_tokens"`
	OutputTokens int64  `json:"output_tokens"`
	LastActivity string `json:"last_activity,omitempty"`
}

// TaskInfo is one task as list_tasks shows it; its JSON form is what the
// agent reads.
type TaskInfo struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Worker string `json:"worker,omitempty"`
	Text   string `json:"text"` // shortened to maxListText runes in the listing
	Reason string `json:"reason,omitempty"`
}
