package protocol

// This file holds the client → server messages except nativeRoot (native.go).

// ClientKind is the front-end type a client declares in hello.
type ClientKind string

// Client kinds from the protocol page. Decode accepts any string; the server
// decides what to do with an unknown kind.
const (
	ClientREPL  ClientKind = "repl"
	ClientBot   ClientKind = "bot"
	ClientOther ClientKind = "other"
)

// Hello is the first frame a client sends after connecting: authentication
// and client identity.
type Hello struct {
	Token      string     `json:"token"`
	ClientKind ClientKind `json:"clientKind"`
	ClientName string     `json:"clientName,omitempty"`
	// ProtocolVersion is the wire version the client speaks; nil means 1.
	ProtocolVersion *int64 `json:"protocolVersion,omitempty"`
}

// MessageType returns TypeHello.
func (Hello) MessageType() string { return TypeHello }

// Prompt is a user-typed prompt from any client.
type Prompt struct {
	Text string `json:"text"`
	// RequestID is the client's submission id (1–256 chars when set), echoed
	// on the resulting userMessage. The length rule is the server's to apply.
	RequestID string `json:"requestId,omitempty"`
}

// MessageType returns TypePrompt.
func (Prompt) MessageType() string { return TypePrompt }

// ConfirmResponse is a client's boolean answer to a pending confirmRequest.
type ConfirmResponse struct {
	ID      string `json:"id"`
	Approve bool   `json:"approve"`
}

// MessageType returns TypeConfirmResponse.
func (ConfirmResponse) MessageType() string { return TypeConfirmResponse }

// AskResponse is a client's textual answer to a pending askRequest: the
// selected option's value for a choice ask, the literal text otherwise.
type AskResponse struct {
	ID   string `json:"id"`
	Text string `json:"text"`
}

// MessageType returns TypeAskResponse.
func (AskResponse) MessageType() string { return TypeAskResponse }

// Ping is a liveness probe; the server answers Pong.
type Ping struct{}

// MessageType returns TypePing.
func (Ping) MessageType() string { return TypePing }
