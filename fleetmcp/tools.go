package fleetmcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agents-fleet/fleet/provider"
)

// The tool names are a contract: agents, CLIs' allow-lists (Claude's
// mcp__fleet__<name>) and docs/fleet-mcp.md name them.
const (
	ToolSpawnWorker      = "spawn_worker"
	ToolListWorkers      = "list_workers"
	ToolListTasks        = "list_tasks"
	ToolReadWorkerOutput = "read_worker_output"
	ToolTellWorker       = "tell_worker"
	ToolCancelWorker     = "cancel_worker"
	ToolAskOperator      = "ask_operator"
	ToolConfirm          = "confirm"
)

// ToolNames returns the names of the tools the server offers, in a fixed
// order.
func ToolNames() []string {
	return []string{
		ToolSpawnWorker, ToolListWorkers, ToolListTasks, ToolReadWorkerOutput,
		ToolTellWorker, ToolCancelWorker, ToolAskOperator, ToolConfirm,
	}
}

// Limits on tool arguments and results. Text limits are in bytes.
const (
	maxTaskBytes     = 64 << 10 // spawn_worker task, tell_worker text
	maxQuestionBytes = 16 << 10 // ask_operator question, confirm summary
	maxChoices       = 20
	maxChoiceBytes   = 1 << 10
	maxNameBytes     = 128 // worker ids, provider and model names
	defaultLines     = 50
	maxLines         = 500
	maxLineRunes     = 2000 // read_worker_output shortens longer lines
	maxListText      = 1000 // list_workers/list_tasks shorten task texts
	maxErrorBytes    = 2000 // error results are shortened in the middle
)

// instructions is the server's MCP instructions, which some CLIs show the
// model next to the tool descriptions.
const instructions = "The agents fleet: spawn worker agents (each a coding-agent session in its own git worktree) on self-contained tasks, " +
	"follow their progress with list_workers, list_tasks and read_worker_output, steer them with tell_worker and cancel_worker, " +
	"and reach the human operator with ask_operator and confirm."

type spawnIn struct {
	Task     string `json:"task" jsonschema:"the worker's complete, self-contained instruction: the goal, the files or areas involved, the constraints, and what done means (at most 64 KiB)"`
	Provider string `json:"provider,omitempty" jsonschema:"the agent CLI to run the worker with (claude, codex, copilot, local); leave it out for the fleet's default"`
	Model    string `json:"model,omitempty" jsonschema:"the model for the worker; leave it out for the provider's default"`
	Skill    string `json:"skill,omitempty" jsonschema:"a skill the worker follows (instructions kept in the repository's .fleet/skills/NAME.md); leave it out when none fits"`
	Host     string `json:"host,omitempty" jsonschema:"the worker host (another machine joined to the fleet) the worker must run on; leave it out to let the fleet place it"`
	Label    string `json:"label,omitempty" jsonschema:"a label (such as gpu) of the worker hosts the worker may run on; leave it out to let the fleet place it. Give host or label, not both"`
}

type spawnOut struct {
	Worker string `json:"worker" jsonschema:"the new worker's id"`
	Task   string `json:"task" jsonschema:"the new task's id"`
}

type noIn struct{}

type workersOut struct {
	Workers []WorkerInfo `json:"workers"`
}

type tasksOut struct {
	Tasks []TaskInfo `json:"tasks"`
}

type readIn struct {
	Worker string `json:"worker" jsonschema:"the worker's id, as list_workers shows it (e.g. w3)"`
	Lines  int    `json:"lines,omitempty" jsonschema:"how many of the latest lines to return"`
}

type readOut struct {
	Worker string   `json:"worker"`
	Lines  []string `json:"lines"`
}

type tellIn struct {
	Worker string `json:"worker" jsonschema:"the worker's id, as list_workers shows it (e.g. w3)"`
	Text   string `json:"text" jsonschema:"the message, as the worker's next user turn (at most 64 KiB)"`
}

type cancelIn struct {
	Worker string `json:"worker" jsonschema:"the worker's id, as list_workers shows it (e.g. w3)"`
}

type askIn struct {
	Question      string   `json:"question" jsonschema:"the question, with the context the operator needs to answer it (at most 16 KiB)"`
	Choices       []string `json:"choices,omitempty" jsonschema:"the answers to choose from (at most 20, each at most 1 KiB); leave it out for a free-text answer"`
	AllowFreeform bool     `json:"allow_freeform,omitempty" jsonschema:"with choices: whether the operator may also type an answer of their own"`
}

type confirmIn struct {
	Summary string `json:"summary" jsonschema:"exactly what will happen if approved: which workers, files or commands, and what cannot be undone (at most 16 KiB)"`
}

// Input schemas: inferred from the structs above (descriptions from their
// jsonschema tags, required fields from the lack of omitempty) and given
// the bounds the model should see. Built once; every agent's server shares
// them.
var (
	spawnSchema = inputSchema[spawnIn](func(p props) {
		p.str("task", 1, 0)
		p.str("provider", 0, maxNameBytes)
		p.str("model", 0, maxNameBytes)
		p.str("skill", 0, maxNameBytes)
		p.str("host", 0, maxNameBytes)
		p.str("label", 0, maxNameBytes)
	})
	noSchema   = inputSchema[noIn](nil)
	readSchema = inputSchema[readIn](func(p props) {
		p.str("worker", 1, maxNameBytes)
		p.intRange("lines", 1, maxLines, defaultLines)
	})
	tellSchema = inputSchema[tellIn](func(p props) {
		p.str("worker", 1, maxNameBytes)
		p.str("text", 1, 0)
	})
	cancelSchema = inputSchema[cancelIn](func(p props) { p.str("worker", 1, maxNameBytes) })
	askSchema    = inputSchema[askIn](func(p props) {
		p.str("question", 1, 0)
		p.items("choices", maxChoices, maxChoiceBytes)
	})
	confirmSchema = inputSchema[confirmIn](func(p props) { p.str("summary", 1, 0) })
)

// props adjusts an inferred schema's properties.
type props map[string]*jsonschema.Schema

// str bounds a string property's length; 0 leaves a bound out. The long
// texts have no maxLength: the schema counts characters where the limit is
// in bytes, and the SDK's validation error would quote the whole text back
// to the model. Their handlers check the limit, which the descriptions
// state.
func (p props) str(name string, min, max int) {
	if min > 0 {
		p[name].MinLength = &min
	}
	if max > 0 {
		p[name].MaxLength = &max
	}
}

func (p props) intRange(name string, min, max, def int) {
	lo, hi := float64(min), float64(max)
	p[name].Minimum, p[name].Maximum = &lo, &hi
	p[name].Default = json.RawMessage(fmt.Sprint(def))
}

func (p props) items(name string, maxItems, maxLen int) {
	p[name].Type, p[name].Types = "array", nil // not [null, array]: an absent list is left out
	p[name].MaxItems = &maxItems
	one := 1
	p[name].Items.MinLength, p[name].Items.MaxLength = &one, &maxLen
}

func inputSchema[T any](adjust func(props)) *jsonschema.Schema {
	s, err := jsonschema.For[T](nil)
	if err != nil {
		panic(fmt.Sprintf("fleetmcp: input schema of %T: %v", *new(T), err))
	}
	if s.Properties == nil {
		s.Properties = map[string]*jsonschema.Schema{} // tools/list shows "properties": {}
	}
	if adjust != nil {
		adjust(props(s.Properties))
	}
	return s
}

var (
	readOnly    = &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: new(false)}
	additive    = &mcp.ToolAnnotations{DestructiveHint: new(false), OpenWorldHint: new(false)}
	destructive = &mcp.ToolAnnotations{DestructiveHint: new(true), IdempotentHint: true, OpenWorldHint: new(false)}
)

// addTools registers the tools on a's server, bound to a as the caller.
func (s *Server) addTools(a *agent) {
	addTool(s, a, &mcp.Tool{
		Name:  ToolSpawnWorker,
		Title: "Spawn a worker",
		Description: "Start a new worker agent on a task. The worker is a separate coding-agent session in its own git worktree and branch, " +
			"working in parallel with you; it cannot see this conversation, so the task must be a complete, self-contained instruction. " +
			"Returns the worker's and the task's ids at once, without waiting for the work. Use it to delegate independent pieces of work; " +
			"to follow up with a worker you already have, use tell_worker instead. Leave provider and model out unless the task needs a specific one, " +
			"and host and label unless it must run on a particular worker host (say, one with a GPU).",
		InputSchema: spawnSchema,
		Annotations: additive,
	}, func(ctx context.Context, caller string, in spawnIn) (*mcp.CallToolResult, spawnOut, error) {
		if err := checkText("task", in.Task, maxTaskBytes); err != nil {
			return nil, spawnOut{}, err
		}
		for _, f := range [][2]string{{"provider", in.Provider}, {"model", in.Model}, {"skill", in.Skill}, {"host", in.Host}, {"label", in.Label}} {
			if err := checkName(f[0], f[1], false); err != nil {
				return nil, spawnOut{}, err
			}
		}
		if strings.TrimSpace(in.Host) != "" && strings.TrimSpace(in.Label) != "" {
			return nil, spawnOut{}, errors.New("give host or label, not both: host names one worker host, label any host that has it")
		}
		r, err := s.current().SpawnWorker(ctx, caller, SpawnRequest{Task: in.Task, Provider: strings.TrimSpace(in.Provider),
			Model: strings.TrimSpace(in.Model), Skill: strings.TrimSpace(in.Skill),
			Host: strings.TrimSpace(in.Host), Label: strings.TrimSpace(in.Label)})
		if err != nil {
			return nil, spawnOut{}, fmt.Errorf("could not spawn the worker: %w", err)
		}
		text := fmt.Sprintf("Started worker %s on task %s. It works on its own; follow it with list_workers or read_worker_output.", r.WorkerID, r.TaskID)
		return textResult(text), spawnOut{Worker: r.WorkerID, Task: r.TaskID}, nil
	})

	addTool(s, a, &mcp.Tool{
		Name:  ToolListWorkers,
		Title: "List workers",
		Description: "List every worker of the fleet: its id, status (running, idle, completed, failed, cancelled…), task, provider, model, " +
			"branch, the worker host it runs on (when not the fleet's own machine), token usage and last activity. Use it to check progress and to find a worker's id before reading its output, " +
			"sending it a follow-up or cancelling it. Long task texts are shortened.",
		InputSchema: noSchema,
		Annotations: readOnly,
	}, func(ctx context.Context, _ string, _ noIn) (*mcp.CallToolResult, workersOut, error) {
		ws := s.current().Workers(ctx)
		out := workersOut{Workers: make([]WorkerInfo, 0, len(ws))}
		for _, w := range ws {
			w.Task = shorten(w.Task, maxListText)
			out.Workers = append(out.Workers, w)
		}
		return nil, out, nil
	})

	addTool(s, a, &mcp.Tool{
		Name:  ToolListTasks,
		Title: "List tasks",
		Description: "List every task of the fleet: its id, status, the worker running it, its text and, for a failed or cancelled task, " +
			"the reason. Use it to see what has been delegated and how it ended. Long texts are shortened.",
		InputSchema: noSchema,
		Annotations: readOnly,
	}, func(ctx context.Context, _ string, _ noIn) (*mcp.CallToolResult, tasksOut, error) {
		ts := s.current().Tasks(ctx)
		out := tasksOut{Tasks: make([]TaskInfo, 0, len(ts))}
		for _, t := range ts {
			t.Text = shorten(t.Text, maxListText)
			out.Tasks = append(out.Tasks, t)
		}
		return nil, out, nil
	})

	addTool(s, a, &mcp.Tool{
		Name:  ToolReadWorkerOutput,
		Title: "Read a worker's output",
		Description: fmt.Sprintf("Read the latest lines of a worker's transcript (its messages, tool calls and command output), oldest first. "+
			"Use it to see what a worker did, or why it is stuck, before following up or cancelling. lines is how many of the latest lines "+
			"to return, 1 to %d (default %d); lines longer than %d characters are shortened.", maxLines, defaultLines, maxLineRunes),
		InputSchema: readSchema,
		Annotations: readOnly,
	}, func(ctx context.Context, _ string, in readIn) (*mcp.CallToolResult, readOut, error) {
		if err := checkName("worker", in.Worker, true); err != nil {
			return nil, readOut{}, err
		}
		if in.Lines < 1 || in.Lines > maxLines {
			return nil, readOut{}, fmt.Errorf("lines must be between 1 and %d, not %d", maxLines, in.Lines)
		}
		worker := strings.TrimSpace(in.Worker)
		lines, err := s.current().WorkerOutput(ctx, worker, in.Lines)
		if err != nil {
			return nil, readOut{}, fmt.Errorf("could not read %s's output: %w", worker, err)
		}
		out := readOut{Worker: worker, Lines: make([]string, 0, len(lines))}
		for _, l := range lines {
			out.Lines = append(out.Lines, shorten(l, maxLineRunes))
		}
		text := strings.Join(out.Lines, "\n")
		if len(out.Lines) == 0 {
			text = "(" + worker + " has no output yet)"
		}
		return textResult(text), out, nil
	})

	addTool(s, a, &mcp.Tool{
		Name:  ToolTellWorker,
		Title: "Tell a worker",
		Description: "Send a follow-up message to a worker as its next user turn: a correction, more requirements, an answer to its question, " +
			"or further work in the same worktree. A worker that has finished resumes its session to handle it. " +
			"Returns once the message is delivered, not when the worker has acted on it; follow it with list_workers or read_worker_output.",
		InputSchema: tellSchema,
		Annotations: additive,
	}, func(ctx context.Context, caller string, in tellIn) (*mcp.CallToolResult, any, error) {
		if err := checkName("worker", in.Worker, true); err != nil {
			return nil, nil, err
		}
		if err := checkText("text", in.Text, maxTaskBytes); err != nil {
			return nil, nil, err
		}
		worker := strings.TrimSpace(in.Worker)
		if err := s.current().TellWorker(ctx, caller, worker, in.Text); err != nil {
			return nil, nil, fmt.Errorf("could not send the message to %s: %w", worker, err)
		}
		return textResult("Sent to " + worker + "."), nil, nil
	})

	addTool(s, a, &mcp.Tool{
		Name:  ToolCancelWorker,
		Title: "Cancel a worker",
		Description: "Stop a worker: interrupt its current turn and end its session and every process it started. " +
			"Its worktree and branch are kept. Use it when a worker is off track or its work is no longer needed.",
		InputSchema: cancelSchema,
		Annotations: destructive,
	}, func(ctx context.Context, caller string, in cancelIn) (*mcp.CallToolResult, any, error) {
		if err := checkName("worker", in.Worker, true); err != nil {
			return nil, nil, err
		}
		worker := strings.TrimSpace(in.Worker)
		if err := s.current().CancelWorker(ctx, caller, worker); err != nil {
			return nil, nil, fmt.Errorf("could not cancel %s: %w", worker, err)
		}
		return textResult("Cancelled " + worker + "."), nil, nil
	})

	addTool(s, a, &mcp.Tool{
		Name:  ToolAskOperator,
		Title: "Ask the operator",
		Description: "Ask the human operator a question and wait for the answer, which can take minutes. Use it only when you cannot " +
			"go on sensibly without a decision or information only they have; otherwise choose a reasonable default. With choices the " +
			"operator picks one of them (or, with allow_freeform, may type another answer); without choices the answer is free text. " +
			"Returns the operator's answer.",
		InputSchema: askSchema,
		Annotations: additive,
	}, func(ctx context.Context, caller string, in askIn) (*mcp.CallToolResult, any, error) {
		q, err := question(in)
		if err != nil {
			return nil, nil, err
		}
		answer, err := s.current().AskOperator(ctx, caller, q)
		if err != nil {
			return nil, nil, noAnswer(err)
		}
		return textResult(answer), nil, nil
	})

	addTool(s, a, &mcp.Tool{
		Name:  ToolConfirm,
		Title: "Ask the operator to confirm",
		Description: "Ask the human operator to approve or deny an action before you take it, and wait for the answer. " +
			"The summary says exactly what will happen. Returns \"approved\" or \"denied\"; on \"denied\", do not take the action.",
		InputSchema: confirmSchema,
		Annotations: additive,
	}, func(ctx context.Context, caller string, in confirmIn) (*mcp.CallToolResult, any, error) {
		if err := checkText("summary", in.Summary, maxQuestionBytes); err != nil {
			return nil, nil, err
		}
		ok, err := s.current().ConfirmOperator(ctx, caller, in.Summary)
		if err != nil {
			return nil, nil, noAnswer(err)
		}
		if ok {
			return textResult("approved"), nil, nil
		}
		return textResult("denied"), nil, nil
	})
}

// readableErrors is receiving middleware for tools/call error results. The
// SDK reports invalid arguments as `validating "arguments": validating
// root: …`, quoting the offending value whole; the agent gets "invalid
// arguments for <tool>: …" instead, and every error text is cut to
// maxErrorBytes, keeping its start (what is wrong) and its end (what was
// wanted).
func readableErrors(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		r, ok := res.(*mcp.CallToolResult)
		if err != nil || method != "tools/call" || !ok || !r.IsError {
			return res, err
		}
		var tool string
		if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok {
			tool = p.Name
		}
		for _, c := range r.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				tc.Text = readableError(tool, tc.Text)
			}
		}
		return r, nil
	}
}

func readableError(tool, text string) string {
	if rest, ok := strings.CutPrefix(text, `validating "arguments": `); ok {
		rest = strings.TrimPrefix(rest, "validating root: ")
		text = "invalid arguments for " + tool + ": " + rest + " (see the tool's input schema)"
	}
	return shortenMiddle(text, maxErrorBytes)
}

// shortenMiddle cuts s to about max bytes by dropping its middle.
func shortenMiddle(s string, max int) string {
	if len(s) <= max {
		return s
	}
	head, tail := s[:max/2], s[len(s)-max/2:]
	return strings.ToValidUTF8(head, "") + " … " + strings.ToValidUTF8(tail, "")
}

// addTool adds a typed tool to a's server. The SDK validates the arguments
// against the input schema and turns a returned error into an error
// result (isError) whose text is the error's; h only ever sees a's calls,
// and ctx ends when the client cancels, a is revoked or the Server closes.
func addTool[In, Out any](s *Server, a *agent, t *mcp.Tool, h func(ctx context.Context, caller string, in In) (*mcp.CallToolResult, Out, error)) {
	mcp.AddTool(a.srv, t, func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
		var zero Out
		if !a.startCall() {
			return nil, zero, errRevoked(s)
		}
		defer a.calls.Done()
		// The SDK binds the session to the token's agent; check the call's
		// token names a anyway, since authority rests on it.
		if ex := req.Extra; ex == nil || ex.TokenInfo == nil || ex.TokenInfo.UserID != a.id {
			return nil, zero, errors.New("this call's token is not the session's")
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(a.ctx, cancel)()
		res, out, err := h(ctx, a.id, in)
		if err != nil && a.ctx.Err() != nil {
			err = errRevoked(s)
		}
		return res, out, err
	})
}

var errShuttingDown = errors.New("the fleet is shutting down; the call ended without a result")

func errRevoked(s *Server) error {
	if s.base.Err() != nil {
		return errShuttingDown
	}
	return errors.New("this agent's access to the fleet tools has ended (its task settled); the call was cancelled")
}

// noAnswer explains an operator request that ended without an answer.
func noAnswer(err error) error {
	if errors.Is(err, provider.ErrNoAnswer) {
		return errors.New("the operator did not answer (the request expired, was cancelled, or the fleet is shutting down); do not assume an answer")
	}
	return fmt.Errorf("could not ask the operator: %w", err)
}

func question(in askIn) (provider.Question, error) {
	if err := checkText("question", in.Question, maxQuestionBytes); err != nil {
		return provider.Question{}, err
	}
	if len(in.Choices) > maxChoices {
		return provider.Question{}, fmt.Errorf("at most %d choices, not %d", maxChoices, len(in.Choices))
	}
	q := provider.Question{Text: in.Question, Kind: "freeform", AllowFreeform: in.AllowFreeform}
	seen := make(map[string]bool, len(in.Choices))
	for i, c := range in.Choices {
		c = strings.TrimSpace(c)
		switch {
		case c == "":
			return provider.Question{}, fmt.Errorf("choice %d is empty", i+1)
		case len(c) > maxChoiceBytes:
			return provider.Question{}, fmt.Errorf("choice %d is longer than %d bytes", i+1, maxChoiceBytes)
		case seen[c]:
			return provider.Question{}, fmt.Errorf("choice %d repeats %q", i+1, c)
		}
		seen[c] = true
		q.Choices = append(q.Choices, provider.Choice{Label: c, Value: c})
	}
	if len(q.Choices) > 0 {
		q.Kind = "choice"
	}
	return q, nil
}

// checkText checks a required free-text argument.
func checkText(name, v string, max int) error {
	switch {
	case strings.TrimSpace(v) == "":
		return fmt.Errorf("%s is empty", name)
	case len(v) > max:
		return fmt.Errorf("%s is %d bytes, more than the limit of %d (%d KiB)", name, len(v), max, max>>10)
	case !utf8.ValidString(v):
		return fmt.Errorf("%s is not valid UTF-8", name)
	}
	return nil
}

// checkName checks an id or name argument.
func checkName(name, v string, required bool) error {
	v = strings.TrimSpace(v)
	switch {
	case v == "" && required:
		return fmt.Errorf("%s is empty: give a worker id as list_workers shows it", name)
	case len(v) > maxNameBytes:
		return fmt.Errorf("%s is longer than %d bytes", name, maxNameBytes)
	case strings.ContainsFunc(v, func(r rune) bool { return r < ' ' || r == 0x7f }):
		return fmt.Errorf("%s contains control characters", name)
	}
	return nil
}

// shorten cuts s to max runes, marking the cut.
func shorten(s string, max int) string {
	if len(s) <= max {
		return s
	}
	n := 0
	for i := range s {
		if n == max {
			return s[:i] + "…"
		}
		n++
	}
	return s
}

func textResult(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

// current is the Fleet Serve attached. Tools only run once Serve was
// called: the HTTP server does not start before.
func (s *Server) current() Fleet {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fleet
}
