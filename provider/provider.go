// Package provider defines how the engine drives an agent: a Provider
// starts a Session (a shell for the embedded local provider, a long-lived
// agent CLI process for claude, codex and copilot), the engine sends it
// turns, and the session reports what happens as a closed set of typed
// Events through its Host. Permission prompts and questions go through the
// Host too, which relays them to the operator and blocks until answered.
//
// Data flows one way: provider → Host (the engine) → publisher. A provider
// never sees the protocol or the engine's state.
package provider

import (
	"context"
	"errors"
	"time"
)

// Provider starts agent sessions. Implementations hold their own
// configuration (CLI path, extra args, env, permission mode) from
// construction; Spec carries what differs per session.
type Provider interface {
	// Name is the provider's name: "local", "claude", "codex", "copilot".
	Name() string
	// Start starts a session for spec, reporting to h. It returns once the
	// session can take a turn (the CLI is running and initialised), or an
	// error a user can act on (a missing binary names the npm package and
	// the config key). ctx bounds start-up only; the session lives until
	// Close or until its process ends.
	Start(ctx context.Context, spec Spec, h Host) (Session, error)
}

// Role is what an agent session is for.
type Role string

const (
	RoleWorker      Role = "worker"
	RoleCoordinator Role = "coordinator"
)

// Spec describes one session to start.
type Spec struct {
	// Agent is the fleet's id for this agent ("w3", "coordinator"); it is
	// for logs and the CLI's environment, never for authority.
	Agent string
	Role  Role
	// Dir is the working directory: the worker's worktree, or the fleet's
	// cwd for the coordinator.
	Dir string
	// Env is the complete base environment for the CLI: the daemon's own
	// (so ANTHROPIC_BASE_URL, CODEX_HOME, COPILOT_PROVIDER_* work as users
	// set them) plus the fleet's markers (SessionEnv and friends). The
	// provider adds its configured env and its own settings on top; a
	// variable already in Env is never overridden by a provider default
	// (for example a user's CLAUDE_CODE_MAX_RETRIES).
	Env []string
	// Model overrides the provider's configured model; "" keeps it.
	Model string
	// ResumeID is the CLI's session/thread id to continue; "" starts a
	// new conversation.
	ResumeID string
	// Instructions are appended to the CLI's own system prompt (the
	// coordinator's role description); "" adds nothing.
	Instructions string
	// MCP lists MCP servers to offer the agent (the fleet's own). Their
	// tools are pre-allowed: the CLI must not ask the operator before
	// calling them.
	MCP []MCPServer
}

// MCPServer is an MCP server reachable over streamable HTTP on loopback.
type MCPServer struct {
	Name    string            // e.g. "fleet": tools appear as mcp__fleet__<tool> in Claude
	URL     string            // http://127.0.0.1:PORT/mcp/...
	Headers map[string]string // sent with every request (Authorization: Bearer …)
	Tools   []string          // the tool names it offers, all pre-allowed
}

// Turn is one user turn sent to a session.
type Turn struct {
	Text string
}

// ErrBusy is returned by Session.Send while a turn is still running.
var ErrBusy = errors.New("the agent is still working on its last turn")

// ErrClosed is returned by Session methods after the session ended.
var ErrClosed = errors.New("the agent session has ended")

// Session is one live agent session. Its methods are safe for concurrent
// use.
type Session interface {
	// Send starts a turn. It returns once the turn is handed to the CLI;
	// what the turn does arrives as events on the Host, and the turn ends
	// with exactly one TurnEnded event. Send during a turn returns ErrBusy.
	Send(ctx context.Context, t Turn) error
	// Interrupt asks the CLI to stop the current turn (Claude's interrupt
	// control request, Codex's turn/interrupt, ACP session/cancel, SIGINT
	// to a shell's group) and ends what the turn started. The turn still
	// ends with TurnEnded (Interrupted set). A no-op between turns.
	Interrupt(ctx context.Context) error
	// ResumeID is the CLI's session or thread id, "" until the CLI said
	// it. It is what Spec.ResumeID takes to continue the conversation.
	ResumeID() string
	// Close ends the session: it interrupts a running turn (which then ends
	// with TurnEnded), stops the CLI and ends every process it started,
	// however detached, within a bounded time. Idempotent; it returns when
	// nothing of the session is left.
	Close() error
	// Done is closed once the session has ended, by Close or because its
	// process exited.
	Done() <-chan struct{}
	// Err says why the session ended when it was not by Close: the CLI's
	// own words (its error line, the tail of its stderr), never only an
	// exit status. nil while running and after a clean Close.
	Err() error
}

// Host receives a session's events and answers its prompts. Its methods
// are safe for concurrent use. Events of one session are handled in the
// order the provider calls Event; a provider calls it from one goroutine
// per stream it reads, and never while holding a lock that the Host could
// need to take through another Session method.
type Host interface {
	// Event reports one event. It does not call back into the session. It
	// may block briefly to pass clients' backpressure on to the agent
	// (Output), so a provider reads its CLI's stream on a goroutine of its
	// own and calls Event from there.
	Event(ev Event)
	// Permission relays a permission prompt of the CLI to the operator and
	// blocks until the first answer, ctx's end, or the request's expiry.
	// On any error the provider must deny the CLI's prompt and tell it.
	Permission(ctx context.Context, r PermissionRequest) (Decision, error)
	// Ask asks the operator a question (the local provider's ::ask::) and
	// blocks like Permission.
	Ask(ctx context.Context, q Question) (string, error)
	// Confirm asks the operator a yes/no question (::confirm::, the confirm
	// policy) and blocks like Permission.
	Confirm(ctx context.Context, summary string) (bool, error)
}

// ErrNoAnswer is returned by Host.Permission, Ask and Confirm when the
// request ended without an answer: it expired, the task was cancelled, or
// the fleet is shutting down.
var ErrNoAnswer = errors.New("the request ended without an answer")

// Event is one thing a session reports. The set is closed: the types below
// are all there are, and the engine handles each.
type Event interface{ isEvent() }

// SessionStarted says the CLI's own session (thread) id and model. It may
// come more than once (each Claude turn repeats system/init); the engine
// keeps the last id.
type SessionStarted struct {
	ID    string
	Model string
}

// Stream says which output stream a line came from.
type Stream string

const (
	Stdout Stream = "stdout"
	Stderr Stream = "stderr"
)

// Output is raw lines a process printed, in order, each without its
// newline: what one read brought, so a burst costs one event. The local
// provider's shell output; the engine shows them as role "tool" lines. The
// host may keep the strings but not the slice.
type Output struct {
	Stream Stream
	Lines  []string
}

// Text is assistant text: a whole message or content block, not a delta.
// Reasoning marks the model's visible reasoning (thinking, summaries).
type Text struct {
	Text      string
	Reasoning bool
}

// Note is a line from the fleet or the adapter about the session (role
// "system"): a retry, a warning from the CLI, a workspace note.
type Note struct {
	Text string
}

// ToolStarted is the start of a tool call, with the CLI's own tool name
// and input and the CLI's id for the call.
type ToolStarted struct {
	ID     string
	Name   string
	Detail string // one line for humans: the command, the file path
	Input  map[string]any
}

// ToolCompleted is the end of the tool call with the same ID.
type ToolCompleted struct {
	ID       string
	Name     string
	Result   string // the provider may pass it long; the engine truncates
	IsError  bool
	Duration time.Duration // 0 when unknown: the engine measures from ToolStarted
}

// Change is what happened to an edited file.
type Change string

const (
	Created Change = "created"
	Edited  Change = "edited"
	Deleted Change = "deleted"
)

// FileEdited is a file the agent created, edited or deleted through a tool
// (Write, Edit, apply_patch, create…). Path is absolute or relative to
// Spec.Dir. The engine confirms it against the worktree diff.
type FileEdited struct {
	Path   string
	Change Change
	Tool   string
}

// Usage is the tokens of model requests not reported before: each request
// is counted once, whatever the CLI repeats or accumulates (the adapter
// turns cumulative totals into deltas). InputTokens is what the model
// endpoint reported as input: the Anthropic API leaves cache reads and
// writes out of it, the OpenAI API counts cached tokens in it (then
// CacheReadTokens is the cached part of InputTokens). Context fields, when known, are
// the latest request's context size and the model's window.
type Usage struct {
	InputTokens      int64
	OutputTokens     int64
	CacheReadTokens  int64
	CacheWriteTokens int64
	ContextTokens    int64 // 0 when unknown
	ContextWindow    int64 // 0 when unknown
}

// TurnEnded ends the turn Send started. Err is nil when the turn
// succeeded; otherwise it carries the CLI's own error text (API error,
// status, error code). Result is the final assistant text of the turn.
type TurnEnded struct {
	Result      string
	Err         error
	Interrupted bool
	ExitCode    int // the local provider's command exit code; -1 when it never ran or was killed
}

// RateLimited says the model API refused the agent's account for a while:
// a rate limit (HTTP 429) or a usage limit. Until is when it resets, zero
// when the CLI did not say. Retrying says the CLI waits it out itself
// (Claude's api_retry): the turn goes on, and the fleet only holds the
// provider's other work meanwhile.
type RateLimited struct {
	Until    time.Time
	Retrying bool
	Reason   string // in words, for the operator
}

// RateLimitError is a TurnEnded.Err for a turn the CLI ended on a rate or
// usage limit: the fleet waits until Until (zero: it chooses the wait) and
// resumes the session with "continue" (docs/unattended.md).
type RateLimitError struct {
	Until  time.Time
	Reason string // the CLI's own words
}

func (e *RateLimitError) Error() string { return e.Reason }

// TransportError is a TurnEnded.Err for a turn the CLI ended because the
// model API failed after its own retries (a 5xx, a reset connection): the
// fleet resumes the session after a backoff, a bounded number of times
// (docs/unattended.md).
type TransportError struct {
	Reason string // the CLI's own words
}

func (e *TransportError) Error() string { return e.Reason }

func (SessionStarted) isEvent() {}
func (RateLimited) isEvent()    {}
func (Output) isEvent()         {}
func (Text) isEvent()           {}
func (Note) isEvent()           {}
func (ToolStarted) isEvent()    {}
func (ToolCompleted) isEvent()  {}
func (FileEdited) isEvent()     {}
func (Usage) isEvent()          {}
func (TurnEnded) isEvent()      {}

// PermissionRequest is a CLI asking whether it may run a tool.
type PermissionRequest struct {
	ToolCallID  string
	Tool        string         // the CLI's tool name: Bash, Write, exec_command, shell…
	Input       map[string]any // the tool's input as the CLI gave it
	Description string         // the CLI's own words about the call, if any
	// Options are the decisions the CLI allows, in its order. Empty means
	// a plain allow/deny.
	Options []PermissionOption
}

// OptionKind classifies a permission option.
type OptionKind string

const (
	AllowOnce   OptionKind = "allow_once"
	AllowAlways OptionKind = "allow_always" // for the rest of this session
	Reject      OptionKind = "reject"
)

// PermissionOption is one decision a CLI offers.
type PermissionOption struct {
	ID    string // the CLI's id for it, passed back in Decision.OptionID
	Label string
	Kind  OptionKind
}

// Decision answers a PermissionRequest.
type Decision struct {
	Allow    bool
	OptionID string // the chosen option's ID when the request had options
	Message  string // why, for a denial: shown to the model
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

// SessionEnv is the environment variable that marks an agent's processes
// (and whatever they start, which inherits it) with their fleet session's
// id. The engine sets it, with AGENTS_FLEET_TASK and AGENTS_FLEET_WORKER; a
// resumed session uses it to find what a killed fleet process left running
// (proctree.KillMarked), and Close uses it to end detached descendants.
const SessionEnv = "AGENTS_FLEET_SESSION"

// WorkerEnv marks an agent's processes with the worker they run for
// (beside SessionEnv): how a worker's process tree is measured.
const WorkerEnv = "AGENTS_FLEET_WORKER"

// HostEnv marks the processes a worker host (fleet join) runs for the
// fleet with the host's name. They carry SessionEnv too, but they are the
// host's: a fleet started again does not take them for its own leftovers,
// even when the host runs on the fleet's machine.
const HostEnv = "AGENTS_FLEET_HOST"

// Options is a CLI provider's configuration: config.json
// providers.<name> (path, args, env, model, permissionMode). Every field is
// optional.
type Options struct {
	// Path is the CLI binary; "" looks the CLI's command name up in PATH.
	Path string
	// Args are extra arguments, added after the adapter's own.
	Args []string
	// Env are extra NAME=value entries, added after Spec.Env (so they win).
	Env []string
	// Model is the default model; Spec.Model overrides it per session.
	Model string
	// PermissionMode is passed to the CLI where it has one (Claude's
	// --permission-mode, Codex's approval policy); "" keeps the adapter's
	// default, which asks the operator.
	PermissionMode string
}

// MissingCLIError is Start's error when the CLI binary cannot be found.
type MissingCLIError struct {
	Provider  string // "claude"
	Command   string // what was looked for: the configured path or the command name
	Package   string // the npm package to install: "@anthropic-ai/claude-code"
	ConfigKey string // where to set the path: "providers.claude.path"
}

func (e *MissingCLIError) Error() string {
	return "the " + e.Provider + " provider needs the " + e.Command + " CLI, which was not found: install it with `npm install -g " +
		e.Package + "`, or set " + e.ConfigKey + " in config.json to its path"
}

// Quiet is implemented by providers whose turns may rightly print nothing
// for a long time (a shell command that sleeps or builds): the engine's
// stall timeout does not apply to their sessions.
type Quiet interface {
	Quiet() bool
}

// Inspector is implemented by providers that wrap a CLI; fleet doctor and
// start-up use it.
type Inspector interface {
	Inspect(ctx context.Context, env []string) Inspection
}

// Inspection is what a provider found about its CLI.
type Inspection struct {
	Path     string // resolved binary path; "" when not found
	Version  string // as the CLI printed it
	Verified bool   // Version is one the adapter was verified with (docs/providers.md)
	// Endpoint says where the CLI will send model requests, as far as the
	// environment and config tell ("ANTHROPIC_BASE_URL=http://127.0.0.1:18080",
	// "default (api.anthropic.com)"), and Credentials which credential it
	// will use ("ANTHROPIC_API_KEY set", "none found"). Never a secret.
	Endpoint    string
	Credentials string
	Err         error // why the CLI cannot be used (missing, --version failed)
}
