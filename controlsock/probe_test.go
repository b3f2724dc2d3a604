package controlsock

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/agents-fleet/fleet/internal/testwait"
)

// logBuffer is an io.Writer for a slog handler that tests read from.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A connection closed before its first byte is a liveness probe (fleet ls,
// the hub's rescans; on Windows every listing opens each fleet's pipe): it
// is logged at debug, not as a refused connection at info.
func TestProbeIsNotARefusal(t *testing.T) {
	var logs logBuffer
	h := newHarness(t, func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	c := h.dial()
	c.conn.Close()
	testwait.For(t, testwait.Bound, "the probe to be logged", func() bool {
		s := logs.String()
		return strings.Contains(s, "closed before hello") || strings.Contains(s, "connection refused")
	})
	s := logs.String()
	if strings.Contains(s, "connection refused") || !strings.Contains(s, "level=DEBUG msg=\"connection closed before hello\"") {
		t.Fatalf("a probe was logged as:\n%s", s)
	}
}
