// Package protocol defines every message of the fleet control socket (see
// control-socket-protocol.md) as a Go type, in both directions, and the NDJSON
// codec that frames them: Encode/AppendEncode write one JSON object per line
// with "type" as its first key, Decode turns one frame back into a typed
// message, and Reader splits a byte stream into frames under a hard size cap.
//
// The package does no I/O of its own beyond io.Reader; transports, auth and
// fan-out belong to controlsock and client.
//
// Field conventions, shared by every struct here:
//   - a field without omitempty is required: it is always encoded (false, 0,
//     "" and [] included) and Decode reports it missing when it is absent;
//   - optional strings, arrays and objects use omitempty; optional numbers and
//     booleans are pointers (see Int, Float, Bool) so a known zero is sent and
//     an unknown value is left out; optional epoch-ms timestamps are plain
//     int64 with omitempty because 0 is never a real time;
//   - timestamps are epoch milliseconds, counts int64, rates and percentages
//     float64.
package protocol

// Version is the wire protocol version this package speaks (PROTOCOL_VERSION).
const Version = 1

// MaxFrameSize is the per-frame cap in bytes, newline excluded (1 MiB).
const MaxFrameSize = 1 << 20

// MaxNativeFrameSize is the cap for a nativeRoot frame, newline excluded (16 KiB).
const MaxNativeFrameSize = 16 << 10

// Capabilities a fleet control socket advertises in welcome.capabilities.
const (
	CapReplayEnd             = "replayEnd"
	CapConfirmResolvedReason = "confirmResolvedReason"
	CapRequestIDEcho         = "requestIdEcho"
)

// Capabilities returns the capabilities a fleet control socket advertises, in
// a fresh slice the caller may keep or modify.
func Capabilities() []string {
	return []string{CapReplayEnd, CapConfirmResolvedReason, CapRequestIDEcho}
}

// Message type discriminators, the value of every frame's "type" key.
const (
	// Client → server.
	TypeHello           = "hello"
	TypePrompt          = "prompt"
	TypeConfirmResponse = "confirmResponse"
	TypeAskResponse     = "askResponse"
	TypePing            = "ping"
	TypeNativeRoot      = "nativeRoot"

	// Server → client.
	TypeNativeRootResult = "nativeRootResult"
	TypeWelcome          = "welcome"
	TypeUserMessage      = "userMessage"
	TypeReply            = "reply"
	TypeStatus           = "status"
	TypeConfirmRequest   = "confirmRequest"
	TypeAskRequest       = "askRequest"
	TypeConfirmResolved  = "confirmResolved"
	TypeReplayEnd        = "replayEnd"
	TypeError            = "error"
	TypePong             = "pong"
	TypeTranscript       = "transcript"
	TypeFleetState       = "fleetState"
	TypeFleetAnalytics   = "fleetAnalytics"
	TypeFileChange       = "fileChange"
	TypeToolCall         = "toolCall"
	TypeHubEvent         = "hubEvent"
	TypeHydrate          = "hydrate"
	TypeCommandCatalog   = "commandCatalog"
	TypeFleetIntel       = "fleetIntel"
	TypeFleetEvolution   = "fleetEvolution"
	TypeFleetStore       = "fleetStore"
	TypeFleetExperiment  = "fleetExperiment"
)

// Message is any wire message. MessageType returns its discriminator, which
// the codec writes as the frame's first key. Every message struct implements
// it on the value receiver, so both T and *T are Messages.
type Message interface{ MessageType() string }

// Unknown is what Decode returns for a frame whose type this package does not
// know. Raw is a copy of the whole frame (without its trailing newline);
// encoding an Unknown writes Raw back, compacted.
type Unknown struct {
	Type string
	Raw  []byte
}

// MessageType returns u.Type.
func (u Unknown) MessageType() string { return u.Type }

// Int returns a pointer to v, for optional integer fields.
func Int(v int64) *int64 { return &v }

// Float returns a pointer to v, for optional number fields.
func Float(v float64) *float64 { return &v }

// Bool returns a pointer to v, for optional boolean fields.
func Bool(v bool) *bool { return &v }

// String returns a pointer to v, for NativeRootResult.ID.
func String(v string) *string { return &v }
