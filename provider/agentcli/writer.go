package agentcli

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agents-fleet/fleet/provider"
)

// WriteTimeout bounds one write to a CLI's stdin: a CLI that stopped
// reading fails the write instead of blocking its writer (Close among
// them) for ever. A ctx deadline shortens it.
const WriteTimeout = 10 * time.Second

// Writer writes lines to a CLI's stdin. Each line goes out in one Write
// under mu, so that concurrent writers never interleave, with a deadline.
// Close does not take mu: it cuts a write in progress short.
type Writer struct {
	mu     sync.Mutex
	w      Input
	closed atomic.Bool
}

// NewWriter writes to w.
func NewWriter(w Input) *Writer { return &Writer{w: w} }

// WriteLine writes line, which ends with its newline, within WriteTimeout
// or ctx, whichever ends first. After Close it returns provider.ErrClosed.
func (w *Writer) WriteLine(ctx context.Context, line []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed.Load() {
		return provider.ErrClosed
	}
	dl := time.Now().Add(WriteTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(dl) {
		dl = d
	}
	_ = w.w.SetWriteDeadline(dl)
	stop := context.AfterFunc(ctx, func() { _ = w.w.SetWriteDeadline(time.Now()) })
	defer stop()
	_, err := w.w.Write(line)
	return err
}

// WriteJSON writes v as one JSON line.
func (w *Writer) WriteJSON(ctx context.Context, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %T: %w", v, err)
	}
	return w.WriteLine(ctx, append(b, '\n'))
}

// Close closes stdin once, which asks an idle CLI to exit; later writes
// fail with provider.ErrClosed.
func (w *Writer) Close() {
	if w.closed.CompareAndSwap(false, true) {
		_ = w.w.SetWriteDeadline(time.Now())
		_ = w.w.Close()
	}
}
