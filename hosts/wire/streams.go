package wire

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Bounds of what a host's streams and bucket hold on the hub. A full WORK
// or EVENTS stream refuses the next message (DiscardNew): the sender tries
// again later, and nothing already in it is lost.
const (
	workMaxBytes   = 16 << 20
	eventsMaxBytes = 1 << 30
	bucketMaxBytes = 2 << 30
	// eventsDuplicates is the window in which EVENTS drops a batch it
	// already holds (the same message id): a host retries a batch whose
	// acknowledgement it lost, for as long as its link is down.
	eventsDuplicates = 20 * time.Minute
)

// EnsureHostStreams makes, in the account js is connected to, host's WORK
// and EVENTS streams and its bucket, or brings their configuration to this
// one, and returns the bucket. It is safe to call again: what exists is
// updated, nothing is lost. The fleet calls it before it places work on
// the host; a host cannot (its permissions forbid making streams).
func EnsureHostStreams(ctx context.Context, js jetstream.JetStream, host string) (jetstream.ObjectStore, error) {
	streams := []jetstream.StreamConfig{{
		Name:       WorkStream,
		Subjects:   []string{WorkSubject(host)},
		Retention:  jetstream.WorkQueuePolicy,
		Discard:    jetstream.DiscardNew,
		MaxBytes:   workMaxBytes,
		MaxMsgSize: MaxMessage,
	}, {
		Name:       EventStream,
		Subjects:   []string{EventSubjects(host)},
		Discard:    jetstream.DiscardNew,
		MaxBytes:   eventsMaxBytes,
		MaxMsgSize: MaxMessage,
		Duplicates: eventsDuplicates,
	}}
	for _, cfg := range streams {
		if _, err := js.CreateOrUpdateStream(ctx, cfg); err != nil {
			return nil, fmt.Errorf("host %s: stream %s: %w", host, cfg.Name, err)
		}
	}
	return ensureBucket(ctx, js, Bucket(host))
}

// ensureBucket makes the object store bucket if it is missing, and serves
// its reads without direct gets: a direct get does not cross a leaf node's
// link (the host's requests time out), the stream API does. The bucket is
// bound again after that change, so the store returned reads so too.
func ensureBucket(ctx context.Context, js jetstream.JetStream, bucket string) (jetstream.ObjectStore, error) {
	fail := func(err error) (jetstream.ObjectStore, error) {
		return nil, fmt.Errorf("bucket %s: %w", bucket, err)
	}
	store, err := js.ObjectStore(ctx, bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		store, err = js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: bucket, MaxBytes: bucketMaxBytes})
	}
	if err != nil {
		return fail(err)
	}
	status, err := store.Status(ctx)
	if err != nil {
		return fail(err)
	}
	bs, ok := status.(*jetstream.ObjectBucketStatus)
	if !ok || bs.StreamInfo() == nil {
		return fail(fmt.Errorf("no stream information in its status (%T)", status))
	}
	cfg := bs.StreamInfo().Config
	if !cfg.AllowDirect && cfg.MaxBytes == bucketMaxBytes {
		return store, nil
	}
	cfg.AllowDirect, cfg.MaxBytes = false, bucketMaxBytes
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		return fail(err)
	}
	if store, err = js.ObjectStore(ctx, bucket); err != nil {
		return fail(err)
	}
	return store, nil
}
