// Package wire is what the fleet and a worker host say to each other about
// workers, over the hub (docs/hosts.md, "Remote workers"): the claim that
// starts a worker on a host, the control requests the fleet sends a running
// one (a turn, an interrupt, an answer, close), and the events the host
// sends back, in batches with sequence numbers, through a JetStream stream.
//
// Everything a host sends is untrusted: Decode* bound sizes and counts and
// check every field a consumer relies on, and an unknown event kind is an
// error, not something skipped.
package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/agents-fleet/fleet/hosts"
	"github.com/agents-fleet/fleet/provider"
)

// Names of the JetStream streams and the object store bucket the fleet
// makes in each host's account. A host may read and write them, never make,
// change or delete them (hosts.hostPermissions).
const (
	// WorkStream holds claims (Start) for the host: a work queue, so a
	// claim is removed once the host acknowledges it.
	WorkStream = "WORK"
	// EventStream holds the events of the host's workers, one subject per
	// worker run.
	EventStream = "EVENTS"
	// WorkConsumer is the host's durable consumer of WorkStream.
	WorkConsumer = "host"
)

// Bucket is the object store bucket of host name: git bundles both ways.
func Bucket(name string) string { return "fleet-host-" + name }

// Subjects of one host (all under hosts.Subject(name, …)).
func WorkSubject(host string) string { return hosts.Subject(host, "work") }

// EventSubject is where host sends the events of run (RunKey).
func EventSubject(host, run string) string { return hosts.Subject(host, "ev", run) }

// EventSubjects is the filter of EventStream.
func EventSubjects(host string) string { return hosts.Subject(host, "ev", "*") }

// ControlSubject is where the fleet sends control requests for run; the
// host subscribes to ControlSubjects.
func ControlSubject(host, run string) string { return hosts.Subject(host, "ctl", run) }

// ControlSubjects is what the host subscribes to for its runs' control.
func ControlSubjects(host string) string { return hosts.Subject(host, "ctl", "*") }

// HaveSubject is the request the fleet sends before a base: which commits
// the host's cache of a repository holds (gitmove.Cache.Have).
func HaveSubject(host string) string { return hosts.Subject(host, "have") }

var (
	tokenRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	claimRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,160}$`)
)

// RunKey names one worker of one fleet session on a host: one subject
// token, "<session>-<worker>" with both parts checked.
func RunKey(session, worker string) (string, error) {
	if !tokenRE.MatchString(session) || !tokenRE.MatchString(worker) {
		return "", fmt.Errorf("session %q and worker %q must each be 1-64 of A-Z, a-z, 0-9, '_' and '-'", session, worker)
	}
	return session + "-" + worker, nil
}

// Bounds of what crosses the link.
const (
	// MaxMessage bounds one message either way (the hub's max_payload).
	MaxMessage = 1 << 20
	// MaxBatch is what a host puts in one event batch before it sends it:
	// well under MaxMessage, so one output line (the engine bounds lines to
	// 64 KiB) always fits with the envelope.
	MaxBatch = 512 << 10
	// MaxBatchEvents bounds the events of one batch.
	MaxBatchEvents = 4096
	// MaxEnv bounds Start.Env entries.
	MaxEnv = 64
)

// Start is a claim: start worker Worker of fleet session Session on the
// host. It goes through WorkStream; the host acknowledges it (and so takes
// it) before it starts anything.
type Start struct {
	// Claim is unique per claim (the run key and a nonce). The host puts
	// it in every batch of the run, and the batches' message ids are made
	// of it: a worker claimed again numbers its events from 1 again, and
	// neither the stream's duplicate window nor the fleet mistakes them
	// for the earlier claim's.
	Claim    string `json:"claim"`
	Session  string `json:"session"`
	Worker   string `json:"worker"`
	Provider string `json:"provider"` // local, claude, codex, copilot
	Model    string `json:"model,omitempty"`
	ResumeID string `json:"resumeId,omitempty"`
	// Instructions are appended to the CLI's system prompt ("" for
	// workers).
	Instructions string `json:"instructions,omitempty"`
	// Env are the fleet's markers for the worker's processes
	// (AGENTS_FLEET_*): nothing else of the fleet's environment crosses
	// to a host; the host runs its CLIs with its own.
	Env []string `json:"env,omitempty"`
	// Repo is the repository's id (gitmove.RepoID), Base the commit the
	// worker starts from, BaseKey the bundle that brings it ("" when the
	// host's cache has it), Branch the worker's branch.
	Repo    string `json:"repo"`
	Base    string `json:"base"`
	BaseKey string `json:"baseKey,omitempty"`
	Branch  string `json:"branch"`
	// Acked is the branch tip the fleet already has ("" none): the host
	// sends its first branch bundle against it.
	Acked string `json:"acked,omitempty"`
}

// Run is the run key of the claim.
func (s Start) Run() (string, error) { return RunKey(s.Session, s.Worker) }

// DecodeStart decodes and checks a claim.
func DecodeStart(data []byte) (Start, error) {
	var s Start
	if len(data) > MaxMessage {
		return s, fmt.Errorf("claim of %d bytes; the limit is %d", len(data), MaxMessage)
	}
	if err := json.Unmarshal(data, &s); err != nil {
		return s, fmt.Errorf("claim: %w", err)
	}
	if _, err := s.Run(); err != nil {
		return s, fmt.Errorf("claim: %w", err)
	}
	if s.Provider == "" || s.Repo == "" || s.Base == "" || s.Branch == "" {
		return s, errors.New("claim: provider, repo, base and branch are required")
	}
	if !claimRE.MatchString(s.Claim) {
		return s, fmt.Errorf("claim: id %q: want 1-160 of A-Z, a-z, 0-9, '.', '_' and '-'", s.Claim)
	}
	if len(s.Env) > MaxEnv {
		return s, fmt.Errorf("claim: %d env entries; the limit is %d", len(s.Env), MaxEnv)
	}
	for _, kv := range s.Env {
		if !strings.HasPrefix(kv, "AGENTS_FLEET_") || !strings.Contains(kv, "=") {
			return s, fmt.Errorf("claim: env entry %q is not a fleet marker", kv)
		}
	}
	return s, nil
}

// Control ops.
const (
	OpSend      = "send"      // start a turn with Text
	OpInterrupt = "interrupt" // stop the current turn
	OpAnswer    = "answer"    // the operator's answer to request ID
	OpFetched   = "fetched"   // the fleet has the branch at Commit
	OpClose     = "close"     // end the session: send the last branch, then "ended"
	OpStop      = "stop"      // end a run the fleet gave up (lost): no process left; late work still comes
)

// Control is a request from the fleet to a host about one run, sent to
// ControlSubject; the host answers with a Reply.
type Control struct {
	Op     string  `json:"op"`
	Text   string  `json:"text,omitempty"`
	ID     string  `json:"id,omitempty"`
	Answer *Answer `json:"answer,omitempty"`
	Commit string  `json:"commit,omitempty"`
}

// Answer is the operator's answer to a permission, question or confirm.
// Err is set when the request ended without one (provider.ErrNoAnswer).
type Answer struct {
	Decision *provider.Decision `json:"decision,omitempty"`
	Text     string             `json:"text,omitempty"`
	Yes      bool               `json:"yes,omitempty"`
	Err      string             `json:"err,omitempty"`
}

// Reply answers a Control. Busy mirrors provider.ErrBusy, Gone says the
// host has no such run (it ended, or the host restarted).
type Reply struct {
	OK   bool   `json:"ok"`
	Err  string `json:"err,omitempty"`
	Busy bool   `json:"busy,omitempty"`
	Gone bool   `json:"gone,omitempty"`
}

// Have asks which commits the host's cache of Repo holds; HaveReply says.
type Have struct {
	Repo string `json:"repo"`
}

type HaveReply struct {
	Commits []string `json:"commits"`
	Err     string   `json:"err,omitempty"`
}

// Event kinds: the provider's events, and the run's own.
const (
	KindReady      = "ready"     // the session runs and can take a turn
	KindSession    = "session"   // provider.SessionStarted
	KindOutput     = "output"    // provider.Output
	KindText       = "text"      // provider.Text
	KindNote       = "note"      // provider.Note
	KindToolStart  = "toolStart" // provider.ToolStarted
	KindToolEnd    = "toolEnd"   // provider.ToolCompleted
	KindFile       = "file"      // provider.FileEdited
	KindUsage      = "usage"     // provider.Usage
	KindTurnEnded  = "turnEnded" // provider.TurnEnded
	KindPermission = "permission"
	KindAsk        = "ask"
	KindConfirm    = "confirm"
	KindBranch     = "branch" // the worker's branch is in the bucket at Key
	KindEnded      = "ended"  // the session ended; Err says why when not by close
)

// Event is one thing a host says about a run. Which fields are set
// depends on Kind.
type Event struct {
	Kind string `json:"k"`

	// session, ready (the resume id), turnEnded
	ID    string `json:"id,omitempty"`
	Model string `json:"model,omitempty"`

	// output
	Stream provider.Stream `json:"stream,omitempty"`
	Lines  []string        `json:"lines,omitempty"`

	// text, note, ask (the question), confirm (the summary)
	Text      string `json:"text,omitempty"`
	Reasoning bool   `json:"reasoning,omitempty"`

	// toolStart, toolEnd, file
	Name       string         `json:"name,omitempty"`
	Detail     string         `json:"detail,omitempty"`
	Input      map[string]any `json:"input,omitempty"`
	Result     string         `json:"result,omitempty"`
	IsError    bool           `json:"isError,omitempty"`
	DurationMs int64          `json:"durationMs,omitempty"`
	Path       string         `json:"path,omitempty"`
	Change     string         `json:"change,omitempty"`

	// usage
	Usage *provider.Usage `json:"usage,omitempty"`

	// turnEnded, ended
	Err         string `json:"err,omitempty"`
	Interrupted bool   `json:"interrupted,omitempty"`
	ExitCode    int    `json:"exitCode,omitempty"`

	// permission (ID is the request's), ask
	Permission *provider.PermissionRequest `json:"permission,omitempty"`
	Question   *provider.Question          `json:"question,omitempty"`

	// branch
	Key    string `json:"key,omitempty"`
	Commit string `json:"commit,omitempty"`

	// Late marks what a host sends for a run the fleet had already given up
	// (lost): the fleet shows it, marked, and changes no state for it.
	Late bool `json:"late,omitempty"`
}

// FromProvider is ev on the wire.
func FromProvider(ev provider.Event) Event {
	switch e := ev.(type) {
	case provider.SessionStarted:
		return Event{Kind: KindSession, ID: e.ID, Model: e.Model}
	case provider.Output:
		return Event{Kind: KindOutput, Stream: e.Stream, Lines: e.Lines}
	case provider.Text:
		return Event{Kind: KindText, Text: e.Text, Reasoning: e.Reasoning}
	case provider.Note:
		return Event{Kind: KindNote, Text: e.Text}
	case provider.ToolStarted:
		return Event{Kind: KindToolStart, ID: e.ID, Name: e.Name, Detail: e.Detail, Input: e.Input}
	case provider.ToolCompleted:
		return Event{Kind: KindToolEnd, ID: e.ID, Name: e.Name, Result: e.Result, IsError: e.IsError, DurationMs: e.Duration.Milliseconds()}
	case provider.FileEdited:
		return Event{Kind: KindFile, Path: e.Path, Change: string(e.Change), Name: e.Tool}
	case provider.Usage:
		return Event{Kind: KindUsage, Usage: &e}
	case provider.TurnEnded:
		out := Event{Kind: KindTurnEnded, Result: e.Result, Interrupted: e.Interrupted, ExitCode: e.ExitCode}
		if e.Err != nil {
			out.Err = e.Err.Error()
		}
		return out
	}
	panic(fmt.Sprintf("wire: unknown provider event %T", ev))
}

// Provider is the provider event e carries; ok is false for the run's own
// kinds (ready, permission, ask, confirm, branch, ended).
func (e Event) Provider() (provider.Event, bool) {
	switch e.Kind {
	case KindSession:
		return provider.SessionStarted{ID: e.ID, Model: e.Model}, true
	case KindOutput:
		return provider.Output{Stream: e.Stream, Lines: e.Lines}, true
	case KindText:
		return provider.Text{Text: e.Text, Reasoning: e.Reasoning}, true
	case KindNote:
		return provider.Note{Text: e.Text}, true
	case KindToolStart:
		return provider.ToolStarted{ID: e.ID, Name: e.Name, Detail: e.Detail, Input: e.Input}, true
	case KindToolEnd:
		return provider.ToolCompleted{ID: e.ID, Name: e.Name, Result: e.Result, IsError: e.IsError,
			Duration: time.Duration(e.DurationMs) * time.Millisecond}, true
	case KindFile:
		return provider.FileEdited{Path: e.Path, Change: provider.Change(e.Change), Tool: e.Name}, true
	case KindUsage:
		return *e.Usage, true
	case KindTurnEnded:
		res := provider.TurnEnded{Result: e.Result, Interrupted: e.Interrupted, ExitCode: e.ExitCode}
		if e.Err != "" {
			res.Err = errors.New(e.Err)
		}
		return res, true
	}
	return nil, false
}

// check says what is wrong with an event from a host.
func (e Event) check() error {
	switch e.Kind {
	case KindReady, KindSession, KindText, KindNote, KindToolStart, KindToolEnd, KindEnded:
	case KindOutput:
		if e.Stream != provider.Stdout && e.Stream != provider.Stderr {
			return fmt.Errorf("output on stream %q", e.Stream)
		}
	case KindFile:
		switch provider.Change(e.Change) {
		case provider.Created, provider.Edited, provider.Deleted:
		default:
			return fmt.Errorf("file change %q", e.Change)
		}
		if e.Path == "" {
			return errors.New("file change without a path")
		}
	case KindUsage:
		if e.Usage == nil {
			return errors.New("usage without counts")
		}
		u := e.Usage
		if u.InputTokens < 0 || u.OutputTokens < 0 || u.CacheReadTokens < 0 || u.CacheWriteTokens < 0 || u.ContextTokens < 0 || u.ContextWindow < 0 {
			return errors.New("negative token counts")
		}
	case KindTurnEnded:
	case KindPermission:
		if e.ID == "" || e.Permission == nil {
			return errors.New("permission request without an id or a request")
		}
	case KindAsk:
		if e.ID == "" || e.Question == nil {
			return errors.New("question without an id or a question")
		}
	case KindConfirm:
		if e.ID == "" {
			return errors.New("confirm without an id")
		}
	case KindBranch:
		if e.Key == "" || e.Commit == "" {
			return errors.New("branch without a key or a commit")
		}
	default:
		return fmt.Errorf("unknown event kind %q", e.Kind)
	}
	return nil
}

// Batch is one message of EventStream: events Seq, Seq+1, … of one claim
// of a run, in order. A host numbers a claim's events from 1 and sends each
// batch until the stream takes it (with the message id BatchID), so the
// fleet may see a batch twice but never a gap: it drops what it has seen
// by Seq, and what belongs to another Claim.
type Batch struct {
	Claim  string  `json:"claim"`
	Seq    uint64  `json:"seq"`
	Events []Event `json:"events"`
}

// BatchID is the message id of claim's batch starting at seq, for the
// stream's duplicate window.
func BatchID(claim string, seq uint64) string { return fmt.Sprintf("%s.%d", claim, seq) }

// DecodeBatch decodes and checks a batch from a host.
func DecodeBatch(data []byte) (Batch, error) {
	var b Batch
	if len(data) > MaxMessage {
		return b, fmt.Errorf("event batch of %d bytes; the limit is %d", len(data), MaxMessage)
	}
	if err := json.Unmarshal(data, &b); err != nil {
		return b, fmt.Errorf("event batch: %w", err)
	}
	if b.Seq == 0 || len(b.Events) == 0 || len(b.Events) > MaxBatchEvents {
		return b, fmt.Errorf("event batch: seq %d with %d events (want seq ≥ 1 and 1-%d events)", b.Seq, len(b.Events), MaxBatchEvents)
	}
	for i, e := range b.Events {
		if err := e.check(); err != nil {
			return b, fmt.Errorf("event batch: event %d: %w", b.Seq+uint64(i), err)
		}
	}
	return b, nil
}

// EncodeEvent is e as a batch holds it. An event over MaxBatch (a tool
// input of megabytes) cannot cross: it becomes a note saying so.
func EncodeEvent(e Event) []byte {
	data, err := json.Marshal(e)
	if err == nil && len(data) <= MaxBatch {
		return data
	}
	what := fmt.Sprintf("%d bytes", len(data))
	if err != nil {
		what = err.Error()
	}
	data, _ = json.Marshal(Event{Kind: KindNote, Text: fmt.Sprintf("a %s event of the worker could not be sent from its host (%s; the limit is %d bytes)", e.Kind, what, MaxBatch)})
	return data
}

// EncodeBatch is claim's batch of events (each from EncodeEvent) starting
// at seq.
func EncodeBatch(claim string, seq uint64, events [][]byte) []byte {
	n := 48 + len(claim)
	for _, e := range events {
		n += len(e) + 1
	}
	b := make([]byte, 0, n)
	b = fmt.Appendf(b, `{"claim":%q,"seq":%d,"events":[`, claim, seq)
	for i, e := range events {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, e...)
	}
	return append(b, "]}"...)
}
