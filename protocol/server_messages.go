package protocol

// This file holds the server → client conversation messages. Dashboard
// snapshots are in fleet.go and intel.go, native results in native.go.

// Role is the source role of a transcript or conversation line.
type Role string

// Roles from the protocol page.
const (
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
)

// Stream says which output stream a transcript line came from. It is an
// extension of the page allowed by DESIGN §6; see Transcript.Stream.
type Stream string

// Streams of a worker's command output.
const (
	StreamStdout Stream = "stdout"
	StreamStderr Stream = "stderr"
)

// ResolvedKind says which kind of request a confirmResolved resolves.
type ResolvedKind string

// Kinds of resolved requests.
const (
	KindConfirm ResolvedKind = "confirm"
	KindAsk     ResolvedKind = "ask"
)

// ResolvedReason says how a confirm or ask was resolved (DESIGN §5).
type ResolvedReason string

// Resolution reasons.
const (
	// ReasonAnswered: a socket client answered.
	ReasonAnswered ResolvedReason = "answered"
	// ReasonSuperseded: the terminal or another surface answered first.
	ReasonSuperseded ResolvedReason = "superseded"
	// ReasonExpired: the request's TTL ran out.
	ReasonExpired ResolvedReason = "expired"
	// ReasonCancelled: the asking worker ended or the session shut down.
	ReasonCancelled ResolvedReason = "cancelled"
)

// Welcome is sent to a client right after a successful hello.
type Welcome struct {
	SessionID       string   `json:"sessionId,omitempty"`
	Model           string   `json:"model,omitempty"`
	ProtocolVersion *int64   `json:"protocolVersion,omitempty"`
	SessionName     string   `json:"sessionName,omitempty"`
	Cwd             string   `json:"cwd,omitempty"`
	Capabilities    []string `json:"capabilities,omitempty"`
}

// MessageType returns TypeWelcome.
func (Welcome) MessageType() string { return TypeWelcome }

// UserMessage is the fan-out echo of a prompt one client sent.
type UserMessage struct {
	// Source is the originating client's name, else its kind.
	Source    string `json:"source"`
	Text      string `json:"text"`
	RequestID string `json:"requestId,omitempty"`
}

// MessageType returns TypeUserMessage.
func (UserMessage) MessageType() string { return TypeUserMessage }

// Reply is an assistant reply chunk or turn.
type Reply struct {
	Text string `json:"text"`
	Ts   int64  `json:"ts,omitempty"`
	// IsError is an extension (docs/protocol-decisions.md): true when the
	// reply reports that a prompt or command failed or was refused (an
	// unknown command or worker, bad arguments, a refusal); absent
	// otherwise. Named like toolCall.isError.
	IsError *bool `json:"isError,omitempty"`
}

// MessageType returns TypeReply.
func (Reply) MessageType() string { return TypeReply }

// Status is the periodic status snapshot.
type Status struct {
	Processing        bool           `json:"processing"`
	Model             string         `json:"model,omitempty"`
	Provider          string         `json:"provider,omitempty"`
	RunningFleets     *int64         `json:"runningFleets,omitempty"`
	Workers           []StatusWorker `json:"workers,omitempty"`
	ActiveWorkerCount *int64         `json:"activeWorkerCount,omitempty"`
	TotalWorkerCount  *int64         `json:"totalWorkerCount,omitempty"`
	TasksDone         *int64         `json:"tasksDone,omitempty"`
	TasksTotal        *int64         `json:"tasksTotal,omitempty"`
	TasksActive       *int64         `json:"tasksActive,omitempty"`
}

// MessageType returns TypeStatus.
func (Status) MessageType() string { return TypeStatus }

// StatusWorker is one worker in Status.Workers.
type StatusWorker struct {
	Name   string `json:"name"`
	Status string `json:"status"`
}

// ConfirmRequest asks the operator to approve or deny an action.
type ConfirmRequest struct {
	ID      string `json:"id"`
	Summary string `json:"summary"`
	// Ts is the creation time, kept verbatim when replayed.
	Ts int64 `json:"ts,omitempty"`
}

// MessageType returns TypeConfirmRequest.
func (ConfirmRequest) MessageType() string { return TypeConfirmRequest }

// AskRequest asks the operator for a freeform or choice answer.
type AskRequest struct {
	ID       string `json:"id"`
	Question string `json:"question"`
	// Kind is an open string (e.g. "freeform", "choice").
	Kind string `json:"kind"`
	// Choices is nil for a freeform ask.
	Choices       []AskChoiceOption `json:"choices,omitempty"`
	AllowFreeform *bool             `json:"allowFreeform,omitempty"`
	Ts            int64             `json:"ts,omitempty"`
}

// MessageType returns TypeAskRequest.
func (AskRequest) MessageType() string { return TypeAskRequest }

// AskChoiceOption is one selectable option of a choice ask.
type AskChoiceOption struct {
	Label       string `json:"label"`
	Value       string `json:"value"`
	Description string `json:"description,omitempty"`
}

// ConfirmResolved says a pending confirm or ask was resolved. Empty Kind and
// Reason mean a legacy confirm that was answered.
type ConfirmResolved struct {
	ID string `json:"id"`
	// Approved is the outcome; true for an answered ask.
	Approved bool           `json:"approved"`
	Kind     ResolvedKind   `json:"kind,omitempty"`
	Reason   ResolvedReason `json:"reason,omitempty"`
}

// MessageType returns TypeConfirmResolved.
func (ConfirmResolved) MessageType() string { return TypeConfirmResolved }

// ReplayEnd marks the end of the replay burst sent after welcome.
type ReplayEnd struct{}

// MessageType returns TypeReplayEnd.
func (ReplayEnd) MessageType() string { return TypeReplayEnd }

// Error is a protocol or runtime error surfaced to the client.
type Error struct {
	Message string `json:"message"`
	// Code and ID are extensions (docs/protocol-decisions.md), set on the
	// error a confirmResponse or askResponse gets when the fleet does not
	// take it: Code is one of the ErrCode constants, ID the request's id.
	Code string `json:"code,omitempty"`
	ID   string `json:"id,omitempty"`
}

// MessageType returns TypeError.
func (Error) MessageType() string { return TypeError }

// Error returns e.Message: an engine can return the error frame a client
// gets as a Go error, and the control server sends it as it is.
func (e *Error) Error() string { return e.Message }

// Codes of an error frame that refuses an answer (Error.Code).
const (
	// ErrCodeRequestResolved: the request was already resolved (answered
	// elsewhere, expired or cancelled); the message says how.
	ErrCodeRequestResolved = "request_resolved"
	// ErrCodeRequestUnknown: the fleet has no request with that id.
	ErrCodeRequestUnknown = "request_unknown"
	// ErrCodeAnswerInvalid: the request is pending but the answer does not
	// fit it (not one of its choices, or the wrong response type).
	ErrCodeAnswerInvalid = "answer_invalid"
)

// Pong answers Ping.
type Pong struct{}

// MessageType returns TypePong.
func (Pong) MessageType() string { return TypePong }

// Transcript is one worker (or coordinator) transcript line. It is the hot
// path of the fan-out.
type Transcript struct {
	Role Role   `json:"role"`
	Text string `json:"text"`
	// Agent is the worker name/ID; empty for coordinator-level lines.
	Agent string `json:"agent,omitempty"`
	Ts    int64  `json:"ts,omitempty"`
	// Stream is an extension of the page (DESIGN §6): "stderr" for a line a
	// command wrote to stderr, "stdout" or empty otherwise. Consumers that do
	// not know it ignore it.
	Stream Stream `json:"stream,omitempty"`
	// Kind is an extension (docs/protocol-decisions.md): "reasoning" for
	// an agent's visible reasoning, empty otherwise.
	Kind string `json:"kind,omitempty"`
}

// TranscriptReasoning is Transcript.Kind for an agent's reasoning.
const TranscriptReasoning = "reasoning"

// MessageType returns TypeTranscript.
func (Transcript) MessageType() string { return TypeTranscript }
