package protocol

import (
	"slices"
	"testing"
)

// TestEveryTypeIsClassified walks every registered type: one that nobody
// classified would be kept, replayed and dropped by each consumer's guess.
func TestEveryTypeIsClassified(t *testing.T) {
	for _, typ := range Types() {
		m := New(typ)
		if m == nil || m.MessageType() != typ {
			t.Fatalf("New(%q) = %#v", typ, m)
		}
		c := ClassOf(m)
		if c == ClassUnknown {
			t.Errorf("%s is not classified: list it in classes (class.go)", typ)
		}
		if c != classOf(typ) {
			t.Errorf("ClassOf(New(%q)) = %d, classOf = %d", typ, c, classOf(typ))
		}
		if (c == ClassInbound) != FromClient(typ) {
			t.Errorf("%s: class %d, FromClient %v", typ, c, FromClient(typ))
		}
	}
}

func TestSnapshotTypesAreTheSnapshots(t *testing.T) {
	var snapshots []string
	for _, typ := range Types() {
		if classOf(typ) == ClassSnapshot {
			snapshots = append(snapshots, typ)
		}
	}
	order := SnapshotTypes()
	sorted := slices.Clone(order)
	slices.Sort(sorted)
	if !slices.Equal(sorted, snapshots) {
		t.Errorf("SnapshotTypes() = %v, the ClassSnapshot types are %v", order, snapshots)
	}
	// The replay order of the protocol page, step 2.
	want := []string{TypeCommandCatalog, TypeFleetIntel, TypeFleetEvolution, TypeFleetStore, TypeFleetExperiment}
	if !slices.Equal(order, want) {
		t.Errorf("SnapshotTypes() = %v, want %v", order, want)
	}
	order[0] = "changed"
	if SnapshotTypes()[0] != TypeCommandCatalog {
		t.Error("SnapshotTypes returned a shared slice")
	}
}

// TestClassPredicates pins, by hand, the types each question answers for:
// the journal, the replay, the consoles' buffers and the hub rely on them.
func TestClassPredicates(t *testing.T) {
	want := map[string][]string{
		"saved":     {TypeHubEvent, TypeReply, TypeTranscript, TypeUserMessage},
		"droppable": {TypeToolCall, TypeTranscript},
		"coalesced": {TypeFleetAnalytics, TypeFleetState, TypeStatus},
	}
	got := map[string][]string{}
	for _, typ := range Types() {
		c := classOf(typ)
		if c.Saved() {
			got["saved"] = append(got["saved"], typ)
		}
		if c.Droppable() {
			got["droppable"] = append(got["droppable"], typ)
		}
		if c.Coalesced() {
			got["coalesced"] = append(got["coalesced"], typ)
		}
	}
	for q, types := range want {
		if !slices.Equal(got[q], types) {
			t.Errorf("%s: %v, want %v", q, got[q], types)
		}
	}
	for typ, c := range map[string]Class{
		TypeConfirmRequest: ClassRequest, TypeAskRequest: ClassRequest, TypeConfirmResolved: ClassRequest,
		TypeFleetState: ClassFleetState, TypeHydrate: ClassBackfill, TypeReplayEnd: ClassConnection,
	} {
		if classOf(typ) != c {
			t.Errorf("classOf(%q) = %d, want %d", typ, classOf(typ), c)
		}
	}
}

func TestClassOfUnknown(t *testing.T) {
	for _, m := range []Message{nil, &Unknown{Type: "later"}, Unknown{Type: "later"},
		&Unknown{Type: TypeStatus}} { // an Unknown is unknown whatever its name
		if c := ClassOf(m); c != ClassUnknown {
			t.Errorf("ClassOf(%#v) = %d", m, c)
		}
	}
	if New("later") != nil {
		t.Error("New of an unregistered type is not nil")
	}
	if ClassOf(Status{}) != ClassDashboard || ClassOf(&Status{}) != ClassDashboard {
		t.Error("a message and its pointer are not of the same class")
	}
}
