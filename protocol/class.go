package protocol

import "slices"

// Class is what a frame is for a session's history and for flow control:
// whether the journal saves it, what of it a late-attaching client is
// replayed (control-socket-protocol.md, "Replay order on attach"), and
// what a bounded queue may do with it when it falls behind. Each
// registered type has exactly one (ClassOf); whoever adds a type lists it
// in classes (TestEveryTypeIsClassified fails until then).
type Class uint8

const (
	// ClassUnknown is the zero Class: a frame of a type this package does
	// not know (Unknown). Consumers keep it like a live event.
	ClassUnknown Class = iota
	// ClassInbound: client → server (hello, prompt, confirmResponse,
	// askResponse, ping, nativeRoot). Never broadcast, never kept.
	ClassInbound
	// ClassConnection: a frame of one connection (welcome, replayEnd,
	// pong, error, nativeRootResult). Live only: never saved or replayed.
	ClassConnection
	// ClassSavedEvent: the conversation and the inter-agent feed
	// (userMessage, reply, hubEvent). Part of the session's history: the
	// journal saves it and replay carries it inside hydrate.
	ClassSavedEvent
	// ClassSavedOutput: transcript lines. History like ClassSavedEvent,
	// but the flood: droppable under load.
	ClassSavedOutput
	// ClassLiveEvent: the live file-change feed (fileChange). Neither saved
	// nor replayed.
	ClassLiveEvent
	// ClassLiveOutput: tool calls (toolCall). Neither saved nor replayed;
	// droppable under load.
	ClassLiveOutput
	// ClassDashboard: the periodic dashboards (status, fleetAnalytics).
	// Each replaces the one before, so a queue under load keeps only the
	// newest of each; not replayed.
	ClassDashboard
	// ClassFleetState: fleetState. A dashboard whose last one is replayed
	// (step 4).
	ClassFleetState
	// ClassSnapshot: the set-once snapshots (commandCatalog, fleetIntel,
	// fleetEvolution, fleetStore, fleetExperiment). The newest of each is
	// replayed (step 2), in SnapshotTypes order.
	ClassSnapshot
	// ClassRequest: the requests a fleet waits on and their ends
	// (confirmRequest, askRequest, confirmResolved). Each unresolved one
	// is replayed in creation order (step 3); never dropped, since a
	// request nobody sees leaves its task waiting.
	ClassRequest
	// ClassBackfill: hydrate, the history window built for each attach
	// (step 2) from the ClassSaved* frames.
	ClassBackfill
)

// ClassOf returns m's Class; ClassUnknown for nil and for an Unknown.
func ClassOf(m Message) Class {
	switch m.(type) {
	case nil, Unknown, *Unknown:
		return ClassUnknown
	}
	return classOf(m.MessageType())
}

// classes lists the types of each class: the one place that says what a
// frame is. ClassSnapshot's are in replay order (SnapshotTypes).
var classes = map[Class][]string{
	ClassInbound:     {TypeHello, TypePrompt, TypeConfirmResponse, TypeAskResponse, TypePing, TypeNativeRoot},
	ClassConnection:  {TypeWelcome, TypeReplayEnd, TypePong, TypeError, TypeNativeRootResult},
	ClassSavedEvent:  {TypeUserMessage, TypeReply, TypeHubEvent},
	ClassSavedOutput: {TypeTranscript},
	ClassLiveEvent:   {TypeFileChange},
	ClassLiveOutput:  {TypeToolCall},
	ClassDashboard:   {TypeStatus, TypeFleetAnalytics},
	ClassFleetState:  {TypeFleetState},
	ClassSnapshot:    {TypeCommandCatalog, TypeFleetIntel, TypeFleetEvolution, TypeFleetStore, TypeFleetExperiment},
	ClassRequest:     {TypeConfirmRequest, TypeAskRequest, TypeConfirmResolved},
	ClassBackfill:    {TypeHydrate},
}

// classByType is classes by type.
var classByType = func() map[string]Class {
	out := make(map[string]Class)
	for c, types := range classes {
		for _, typ := range types {
			if _, twice := out[typ]; twice {
				panic("protocol: " + typ + " is classified twice")
			}
			out[typ] = c
		}
	}
	return out
}()

func classOf(typ string) Class { return classByType[typ] }

// Saved reports whether frames of class c are part of the session's
// history: the journal saves them and replay carries them inside hydrate
// (history.RecordOf makes their records).
func (c Class) Saved() bool { return c == ClassSavedEvent || c == ClassSavedOutput }

// Droppable reports whether frames of class c are the output a bounded
// queue drops first when it falls behind.
func (c Class) Droppable() bool { return c == ClassSavedOutput || c == ClassLiveOutput }

// Coalesced reports whether a queue that falls behind may keep only the
// newest frame of each type of class c: each replaces the one before.
func (c Class) Coalesced() bool { return c == ClassDashboard || c == ClassFleetState }

// SnapshotTypes returns the ClassSnapshot types in the order a
// late-attaching client is replayed them, in a fresh slice.
func SnapshotTypes() []string { return slices.Clone(classes[ClassSnapshot]) }
