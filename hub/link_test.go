package hub

import (
	"slices"
	"testing"

	"github.com/agents-fleet/fleet/protocol"
)

// TestRelayedFrames walks every registered type: the main loop gets what
// a person must see, the output only when verbose, and of the dashboards
// only status (for /status).
func TestRelayedFrames(t *testing.T) {
	always := []string{
		protocol.TypeAskRequest, protocol.TypeConfirmRequest, protocol.TypeConfirmResolved,
		protocol.TypeError, protocol.TypeHubEvent, protocol.TypeHydrate, protocol.TypeNativeRootResult,
		// welcome and pong are connection frames like replayEnd; the hub
		// gets neither past the handshake (it never pings).
		protocol.TypePong, protocol.TypeReplayEnd, protocol.TypeReply, protocol.TypeStatus,
		protocol.TypeUserMessage, protocol.TypeWelcome,
	}
	output := []string{protocol.TypeToolCall, protocol.TypeTranscript}
	var quiet, verbose []string
	for _, typ := range protocol.Types() {
		m := protocol.New(typ)
		if relayed(m, false) {
			quiet = append(quiet, typ)
		}
		if relayed(m, true) {
			verbose = append(verbose, typ)
		}
	}
	if !slices.Equal(quiet, always) {
		t.Errorf("relayed when not verbose: %v\nwant %v", quiet, always)
	}
	want := append(slices.Clone(always), output...)
	slices.Sort(want)
	if !slices.Equal(verbose, want) {
		t.Errorf("relayed when verbose: %v\nwant %v", verbose, want)
	}
	if relayed(&protocol.Unknown{Type: "later", Raw: []byte(`{"type":"later"}`)}, true) {
		t.Error("an unknown frame is relayed")
	}
}
