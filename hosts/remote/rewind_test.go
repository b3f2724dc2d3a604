package remote

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A consumer that handed out batches nobody acknowledged (a fleet stopped
// with them in its pull iterator) hands them out again at once after
// rewind, in order, from the first one not acknowledged; without it they
// would come back only after AckWait, behind the later ones.
func TestRewindHandsOutWhatWasNotAcknowledged(t *testing.T) {
	srv, err := server.NewServer(&server.Options{JetStream: true, StoreDir: t.TempDir(), Port: -1, Host: "127.0.0.1", NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(srv.Shutdown)
	if !srv.ReadyForConnections(30 * time.Second) {
		t.Fatal("nats server not ready")
	}
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "EV", Subjects: []string{"ev.>"}})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 6; i++ {
		if _, err := js.Publish(ctx, "ev.r", fmt.Appendf(nil, "%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	cons, err := stream.CreateConsumer(ctx, jetstream.ConsumerConfig{
		Durable: "fleet-r", FilterSubject: "ev.r", AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: 5 * time.Minute, Metadata: map[string]string{metaClaim: "c1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	// 1 and 2 handled and acknowledged; 3 and 4 taken and dropped.
	batch, err := cons.Fetch(4, jetstream.FetchMaxWait(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for m := range batch.Messages() {
		if n++; n <= 2 {
			if err := m.DoubleAck(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n != 4 {
		t.Fatalf("fetched %d messages, want 4", n)
	}

	cons, err = rewind(ctx, stream, cons)
	if err != nil {
		t.Fatal(err)
	}
	if md := cons.CachedInfo().Config.Metadata; md[metaClaim] != "c1" {
		t.Fatalf("the rewound consumer lost its metadata: %v", md)
	}
	var got []string
	for len(got) < 4 {
		batch, err := cons.Fetch(4-len(got), jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		k := len(got)
		for m := range batch.Messages() {
			got = append(got, string(m.Data()))
			if err := m.DoubleAck(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if len(got) == k {
			t.Fatalf("after rewind only %v came within the wait (AckWait is 5 min)", got)
		}
	}
	if fmt.Sprint(got) != "[3 4 5 6]" {
		t.Fatalf("after rewind: %v, want [3 4 5 6]", got)
	}

	// With nothing pending, rewind leaves the consumer as it is.
	same, err := rewind(ctx, stream, cons)
	if err != nil {
		t.Fatal(err)
	}
	if same != cons {
		t.Fatal("rewind made a consumer again with nothing pending")
	}
}
