package wire_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agents-fleet/fleet/hosts/hoststest"
	"github.com/agents-fleet/fleet/hosts/wire"
)

// TestEnsureHostStreams: the streams and the bucket are made as the host
// needs them, and making them again changes nothing and loses nothing.
func TestEnsureHostStreams(t *testing.T) {
	hub := hoststest.StartHub(t, time.Minute)
	hub.Enrol(t, "h1")
	js, err := jetstream.New(hub.Conn("h1"))
	if err != nil {
		t.Fatal(err)
	}
	store, err := wire.EnsureHostStreams(t.Context(), js, "h1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.PutString(t.Context(), "kept", "hello"); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(t.Context(), wire.WorkSubject("h1"), []byte("{}")); err != nil {
		t.Fatal(err)
	}
	store, err = wire.EnsureHostStreams(t.Context(), js, "h1")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := store.GetString(t.Context(), "kept"); err != nil || got != "hello" {
		t.Fatalf("the bucket after a second ensure: %q, %v", got, err)
	}
	for name, want := range map[string]func(jetstream.StreamConfig) bool{
		wire.WorkStream: func(c jetstream.StreamConfig) bool {
			return c.Retention == jetstream.WorkQueuePolicy && c.Subjects[0] == wire.WorkSubject("h1") && c.MaxMsgSize == wire.MaxMessage
		},
		wire.EventStream: func(c jetstream.StreamConfig) bool {
			return c.Subjects[0] == wire.EventSubjects("h1") && c.Duplicates == 20*time.Minute && c.Discard == jetstream.DiscardNew
		},
		"OBJ_" + wire.Bucket("h1"): func(c jetstream.StreamConfig) bool { return !c.AllowDirect && c.MaxBytes == 2<<30 },
	} {
		s, err := js.Stream(t.Context(), name)
		if err != nil {
			t.Fatal(err)
		}
		info := s.CachedInfo()
		if !want(info.Config) {
			t.Fatalf("stream %s: %+v", name, info.Config)
		}
		if name == wire.WorkStream && info.State.Msgs != 1 {
			t.Fatalf("WORK lost its claim: %+v", info.State)
		}
	}
}
