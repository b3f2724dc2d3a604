// Package provider defines how the engine drives a worker: a Provider runs
// one task and reports what happens through a Host. The interface is shaped
// for agent CLIs (assistant text, tool calls, file edits, token usage,
// questions and permission requests answered by the operator), even while
// the embedded shell provider uses only part of it.
package provider

import (
	"context"
	"errors"
	"time"
)

// Task is one unit of work handed to a provider.
type Task struct {
	ID     string
	Prompt string // for the local provider: the shell command
	Dir    string // working directory (the worker's worktree or the fleet cwd)
	Env    []string
}

// SessionEnv is the environment variable that marks a task's processes (and
// whatever they start, which inherits it) with their session's id. The
// engine sets it, with AGENTS_FLEET_TASK and AGENTS_FLEET_WORKER; a resumed
// session uses it to find what a killed fleet process left running
// (local.KillLeftovers).
const SessionEnv = "AGENTS_FLEET_SESSION"

// Stream says which output stream a line came from.
type Stream string

const (
	Stdout Stream = "stdout"
	Stderr Stream = "stderr"
)

// ToolCall is the start of a tool invocation.
type ToolCall struct {
	ID     string
	Name   string
	Detail string
	Input  map[string]any
}

// ToolResult is the completion of a tool invocation.
type ToolResult struct {
	ID       string
	Name     string
	Result   string
	IsError  bool
	Duration time.Duration
}

// Choice is one option of a choice question.
type Choice struct {
	Label       string `json:"label"`
	Value       string `json:"value"`
	Description string `json:"description,omitempty"`
}

// Question is something a worker asks the operator.
type Question struct {
	Text          string
	Kind          string // open string; "freeform" or "choice" by default
	Choices       []Choice
	AllowFreeform bool
}

// ErrNoAnswer is returned by Host.Ask and Host.Confirm when the request
// ended without an answer: it expired, the task was cancelled, or the fleet
// is shutting down.
var ErrNoAnswer = errors.New("the request ended without an answer")

// Host receives a running task's events. Its methods are safe for
// concurrent use; Ask and Confirm block until the operator answers or ctx
// ends.
type Host interface {
	// Output is lines the task printed, in order, each without its
	// newline: what one read brought, so a burst costs one call rather
	// than one a line. The host may keep the strings but not the slice.
	Output(stream Stream, lines []string)
	// Note is a line from the fleet itself about the task (role system).
	Note(text string)
	ToolStart(c ToolCall)
	ToolComplete(r ToolResult)
	Ask(ctx context.Context, q Question) (string, error)
	Confirm(ctx context.Context, summary string) (bool, error)
}

// Result is how a task ended.
type Result struct {
	ExitCode int   // -1 when the process never started or was killed
	Err      error // why it failed, when it failed; nil on success
}

// Provider runs tasks. Run returns when the task has ended and everything
// it started has been stopped; cancelling ctx stops the task.
type Provider interface {
	Name() string
	Run(ctx context.Context, t Task, h Host) Result
}
