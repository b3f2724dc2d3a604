package e2e

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/protocol"
	"github.com/agents-fleet/fleet/registry"
)

// hello connects and says hello, with a 30 s deadline on the connection.
func hello(path, token, name string) (net.Conn, error) {
	c, err := net.Dial("unix", path)
	if err != nil {
		return nil, err
	}
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := fmt.Fprintf(c, `{"type":"hello","token":%q,"clientKind":"other","clientName":%q}`+"\n", token, name); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// rawAttach connects, says hello and reads through replayEnd.
func rawAttach(path, token, name string) (net.Conn, *protocol.Reader, error) {
	c, err := hello(path, token, name)
	if err != nil {
		return nil, nil, err
	}
	r := protocol.NewReader(c, protocol.MaxFrameSize)
	for {
		f, err := r.ReadFrame()
		if err != nil {
			c.Close()
			return nil, nil, err
		}
		if typ, _ := protocol.PeekType(f); typ == protocol.TypeReplayEnd {
			c.SetDeadline(time.Time{})
			return c, r, nil
		}
	}
}

// crowd attaches n healthy clients and one that never reads, floods lines,
// and checks every healthy client got every line in order and the stalled
// one was evicted for the expected reason.
func crowd(t *testing.T, limits, wantReason string, n, lines int) {
	e := newEnv(t)
	if raceEnabled {
		// A thousand race-instrumented readers on two cores can each go
		// unscheduled for longer than the default grace, which the fleet
		// rightly takes for a stall; give them the time a real console
		// would not need.
		limits = strings.Replace(limits, `{"limits": {`, `{"limits": {"stallGraceMs": 5000, `, 1)
	}
	os.WriteFile(filepath.Join(e.home, "config.json"), []byte(limits), 0o600)
	d := e.start("--control-socket")
	token, _ := registry.ReadToken(d.desc.TokenPath)

	stalled, _, err := rawAttach(d.desc.SocketPath, token, "stalled")
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	// Keep its receive buffer small so its backlog builds in the fleet.
	stalled.(*net.UnixConn).SetReadBuffer(4096)

	type healthy struct {
		c net.Conn
		r *protocol.Reader
	}
	clients := make([]healthy, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 64)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			c, r, err := rawAttach(d.desc.SocketPath, token, fmt.Sprint("h", i))
			if err != nil {
				errs <- err
				return
			}
			clients[i] = healthy{c, r}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	defer func() {
		for _, h := range clients {
			h.c.Close()
		}
	}()

	pad := strings.Repeat(".", 200)
	trigger := fmt.Sprintf(`{"type":"prompt","text":"$ seq 1 %d | sed 's/$/ %s/'"}`+"\n", lines, pad)
	if _, err := clients[0].c.Write([]byte(trigger)); err != nil {
		t.Fatal(err)
	}
	failures := make(chan string, n)
	for i, h := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			next := 1
			// A bound on progress, not on the whole flood: a thousand
			// readers under the race detector on a loaded machine are slow
			// but steady; one that gets nothing for a minute is stuck.
			for next <= lines {
				if next%100 == 1 {
					h.c.SetReadDeadline(time.Now().Add(60 * time.Second))
				}
				f, err := h.r.ReadFrame()
				if err != nil {
					failures <- fmt.Sprintf("client %d: %v after %d lines", i, err, next-1)
					return
				}
				if !bytes.Contains(f, []byte(`"type":"transcript","role":"tool"`)) {
					continue
				}
				at := bytes.Index(f, []byte(`"text":"`))
				num := f[at+8:]
				num = num[:bytes.IndexByte(num, ' ')]
				if string(num) != strconv.Itoa(next) {
					failures <- fmt.Sprintf("client %d: line %d is %q", i, next, num)
					return
				}
				next++
			}
		}()
	}
	wg.Wait()
	close(failures)
	for f := range failures {
		t.Fatalf("%s\nfleet log:\n%s", f, evictions(d.stderr.String()))
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(d.stderr.String(), wantReason) {
		if time.Now().After(deadline) {
			t.Fatalf("stalled client not evicted with %q:\n%s", wantReason, d.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	<-d.done
}

func TestThousandClientsOneStalledEvictedByBytes(t *testing.T) {
	// 4000 lines of ~270 bytes: well past the stalled client's socket
	// buffer (sendBufferBytes, doubled by Linux) plus its queue bound.
	crowd(t, `{"limits": {"queueBytes": 262144, "softQueueBytes": 65536, "writeTimeoutMs": 600000}}`,
		"outbound queue over its byte bound", 1000, 4000)
}

func TestThousandClientsOneStalledEvictedByDeadline(t *testing.T) {
	timeout := 300
	if raceEnabled {
		timeout = 3000 // healthy readers under the race detector miss 300 ms
	}
	crowd(t, fmt.Sprintf(`{"limits": {"queueBytes": 1073741824, "softQueueBytes": 65536, "writeTimeoutMs": %d}}`, timeout),
		"write deadline exceeded", 1000, 2000)
}

// evictions is the fleet log's eviction lines, for a failure message.
func evictions(log string) string {
	var b strings.Builder
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "evicted") || strings.Contains(l, "stall") {
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
	return b.String()
}
