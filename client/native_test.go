package client

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agents-fleet/fleet/controlsock"
	"github.com/agents-fleet/fleet/internal/testdir"
	"github.com/agents-fleet/fleet/native"
	"github.com/agents-fleet/fleet/protocol"
)

// nativeFleet is a real control server in front of a real native store:
// what a fleet started with --native-root serves.
type nativeFleet struct {
	*harness
	ctl *native.Controller
}

// nativeBackend answers nativeRoot with the controller; nothing else is
// used here.
type nativeBackend struct{ ctl *native.Controller }

func (nativeBackend) Prompt(*protocol.UserMessage)                    {}
func (nativeBackend) AnswerConfirm(id string, _ bool, _ string) error { return errors.New("no " + id) }
func (nativeBackend) AnswerAsk(id, _, _ string) error                 { return errors.New("no " + id) }
func (b nativeBackend) Native(ctx context.Context, req *protocol.NativeRequest) protocol.NativeResult {
	return b.ctl.Handle(ctx, req)
}

func startNativeFleet(t *testing.T) *nativeFleet {
	t.Helper()
	h := &harness{token: strings.Repeat("cd", 32), serve: make(chan error, 1)}
	dir := testdir.New(t)
	st, err := native.Open(filepath.Join(dir, "state", "native.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctl, err := native.New(t.Context(), st, "sess-n", native.Options{PolicyVersion: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	h.path = testdir.SocketPath(t)
	h.srv = controlsock.New(controlsock.Config{Token: h.token, Backend: nativeBackend{ctl}, Welcome: protocol.Welcome{SessionID: "sess-n", Cwd: dir}})
	ln, err := controlsock.Listen(h.path)
	if err != nil {
		t.Fatal(err)
	}
	go func() { h.serve <- h.srv.Serve(ln) }()
	t.Cleanup(h.stop)
	return &nativeFleet{harness: h, ctl: ctl}
}

// status reads a root straight from the controller.
func (f *nativeFleet) status(t *testing.T, root string) *protocol.NativeRootStatus {
	t.Helper()
	res := f.ctl.Handle(t.Context(), &protocol.NativeRequest{Action: protocol.NativeStatus, RootID: root})
	if res.Root == nil {
		t.Fatalf("status %s: %+v", root, res)
	}
	return res.Root
}

// lossyProxy stands between a console and a fleet on real control sockets and
// loses the first nativeRootResult of the first connection: it hangs up
// on both sides (hangUp) or keeps it and the connection open (swallow).
// It records every nativeRoot frame it forwards and the result it lost.
type lossyProxy struct {
	path   string
	ln     net.Listener
	hangUp bool

	mu       sync.Mutex
	conns    []net.Conn
	accepted int
	sent     []*protocol.NativeRoot
	lostRes  *protocol.NativeRootResult
	lostOnce chan struct{} // closed when the result was lost
	wg       sync.WaitGroup
}

func startLossyProxy(t *testing.T, target string, hangUp bool) *lossyProxy {
	t.Helper()
	p := &lossyProxy{path: testdir.SocketPath(t), hangUp: hangUp, lostOnce: make(chan struct{})}
	ln, err := controlsock.Listen(p.path)
	if err != nil {
		t.Fatal(err)
	}
	p.ln = ln
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := controlsock.Dial(context.Background(), target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			n := p.accepted
			p.accepted++
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			p.wg.Add(2)
			go func() { defer p.wg.Done(); p.pipe(c, up, n, true) }()
			go func() { defer p.wg.Done(); p.pipe(up, c, n, false) }()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

// pipe copies frames from src to dst; toFleet says the direction. Connection
// n's first nativeRootResult is lost.
func (p *lossyProxy) pipe(src, dst net.Conn, n int, toFleet bool) {
	defer dst.Close()
	r := protocol.NewReader(src, protocol.MaxFrameSize)
	for {
		frame, err := r.ReadFrame()
		if err != nil {
			return
		}
		m, err := protocol.Decode(frame)
		if err == nil {
			p.mu.Lock()
			switch m := m.(type) {
			case *protocol.NativeRoot:
				p.sent = append(p.sent, m)
			case *protocol.NativeRootResult:
				if n == 0 && p.lostRes == nil {
					p.lostRes = m
					close(p.lostOnce)
					p.mu.Unlock()
					if p.hangUp {
						src.Close()
						return
					}
					continue
				}
			}
			p.mu.Unlock()
		}
		if _, err := dst.Write(append(append([]byte(nil), frame...), '\n')); err != nil {
			return
		}
	}
}

func (p *lossyProxy) frames() []*protocol.NativeRoot {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*protocol.NativeRoot(nil), p.sent...)
}

// The first attempt's result is lost after the fleet committed it: the
// client sends the same operation again, and the fleet answers with the
// result it gave the first time, changing nothing more. A retry under a
// fresh operation id would be a new pause at a stale revision, answered
// with revision_conflict.
func TestNativeClientRetriesTheSameOperation(t *testing.T) {
	for _, tc := range []struct {
		name    string
		hangUp  bool
		timeout time.Duration
	}{
		{"connection dropped before the result", true, 0},
		// Long enough for a loaded machine to answer the retry.
		{"no result in time", false, 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := startNativeFleet(t)
			p := startLossyProxy(t, f.path, tc.hangUp)
			root := f.ctl.BoundRoot()

			nc := NewNativeClient("root-", func(ctx context.Context) (*Conn, error) {
				return DialSocket(ctx, p.path, f.token, Options{ClientName: "native-test"})
			})
			defer nc.Close()
			nc.AttemptTimeout = tc.timeout
			var retried []string
			nc.OnRetry = func(req protocol.NativeRequest, why error) {
				retried = append(retried, req.OperationID+": "+why.Error())
			}

			req := NativeMutation("test-", protocol.NativeRequest{Action: protocol.NativePause, RootID: root}, 1)
			if !strings.HasPrefix(req.OperationID, "test-op-") || *req.ExpectedRevision != 1 {
				t.Fatalf("NativeMutation = %+v", req)
			}
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			res, raw, err := nc.Do(ctx, req)
			if err != nil {
				t.Fatalf("Do: %v (retries %q)", err, retried)
			}
			select {
			case <-p.lostOnce:
			default:
				t.Fatal("the proxy lost no result")
			}
			lost := p.lostRes.Result
			if lost.Kind != protocol.NativeKindReceipt || lost.Receipt == nil {
				t.Fatalf("the lost first result is %+v, want the receipt", lost)
			}
			if res.Kind != protocol.NativeKindReceipt || res.Receipt == nil || *res.Receipt != *lost.Receipt {
				t.Fatalf("the retry was answered %+v (%s), want the first receipt %+v", res, raw, *lost.Receipt)
			}
			if res.Receipt.OperationID != req.OperationID || res.Receipt.Revision != 2 {
				t.Errorf("receipt %+v, want operation %s at revision 2", res.Receipt, req.OperationID)
			}
			if len(retried) != 1 || !strings.HasPrefix(retried[0], req.OperationID+": ") {
				t.Errorf("OnRetry calls %q, want one for %s", retried, req.OperationID)
			}
			sent := p.frames()
			if len(sent) != 2 {
				t.Fatalf("%d nativeRoot frames sent, want the attempt and one retry", len(sent))
			}
			if string(sent[0].Request) != string(sent[1].Request) || sent[0].ID == sent[1].ID || !strings.HasPrefix(sent[1].ID, "root-") {
				t.Errorf("retry frame %s id %s, first %s id %s: want the same body under a new transport id",
					sent[1].Request, sent[1].ID, sent[0].Request, sent[0].ID)
			}
			if st := f.status(t, root); st.Revision != 2 || st.Intent != "pause" {
				t.Errorf("root at revision %d intent %s, want one pause: revision 2", st.Revision, st.Intent)
			}
		})
	}
}

// A read whose connection drops is not retried: its error says so.
func TestNativeClientReadNotRetried(t *testing.T) {
	f := startNativeFleet(t)
	p := startLossyProxy(t, f.path, true)
	dials := 0
	nc := NewNativeClient("root-", func(ctx context.Context) (*Conn, error) {
		dials++
		return DialSocket(ctx, p.path, f.token, Options{})
	})
	defer nc.Close()
	_, _, err := nc.Do(t.Context(), protocol.NativeRequest{Action: protocol.NativeList})
	if err == nil || !strings.Contains(err.Error(), "closed the connection before answering") {
		t.Fatalf("Do = %v, want the dropped connection", err)
	}
	if dials != 1 || len(p.frames()) != 1 {
		t.Errorf("%d dials, %d frames: a read was retried", dials, len(p.frames()))
	}
	// The next call connects again.
	res, _, err := nc.Do(t.Context(), protocol.NativeRequest{Action: protocol.NativeList})
	if err != nil || res.Kind != protocol.NativeKindRoots || len(res.Roots) != 1 || dials != 2 {
		t.Fatalf("second list: %+v %v after %d dials", res, err, dials)
	}
}

func TestNativeCalls(t *testing.T) {
	calls := NewNativeCalls[string]("hub-")
	t0 := time.Unix(1000, 0)
	read, err := NewNativeCall(protocol.NativeRequest{Action: protocol.NativeList}, "list")
	if err != nil {
		t.Fatal(err)
	}
	mut, err := NewNativeCall(NativeMutation("hub-", protocol.NativeRequest{Action: protocol.NativeStop, RootID: "r1"}, 4), "stop")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewNativeCall(protocol.NativeRequest{Action: protocol.NativeStop, RootID: "r1"}, ""); err == nil {
		t.Error("a mutation without operationId and revision was accepted")
	}
	fr, _ := calls.Attempt(read, t0)
	f1, _ := calls.Attempt(mut, t0.Add(time.Second))
	if !strings.HasPrefix(fr.ID, "hub-") || !strings.HasPrefix(mut.Req.OperationID, "hub-op-") || calls.Len() != 2 {
		t.Fatalf("ids %s %s, %d tracked", fr.ID, mut.Req.OperationID, calls.Len())
	}

	// Only the attempts old enough expire; the mutation becomes uncertain.
	if got := calls.Expired(t0.Add(10*time.Second), 10*time.Second); len(got) != 1 || got[0] != read || read.Uncertain {
		t.Fatalf("Expired = %v, want the read, not uncertain", got)
	}
	if got := calls.Expired(t0.Add(11*time.Second), 10*time.Second); len(got) != 1 || got[0] != mut || !mut.Uncertain || !mut.Retryable() {
		t.Fatalf("Expired = %v, want the mutation, uncertain and retryable", got)
	}
	if calls.Result(&protocol.NativeRootResult{ID: &f1.ID}) != nil {
		t.Error("a result of an expired attempt was paired")
	}

	// A retry: the same body under a new id; the old id is forgotten.
	f2, _ := calls.Attempt(mut, t0.Add(12*time.Second))
	if string(f2.Request) != string(f1.Request) || f2.ID == f1.ID || mut.Uncertain || mut.Tries != 2 {
		t.Fatalf("retry %s %s (tries %d) after %s %s", f2.ID, f2.Request, mut.Tries, f1.ID, f1.Request)
	}
	f3, _ := calls.Attempt(mut, t0.Add(13*time.Second))
	if calls.Result(&protocol.NativeRootResult{ID: &f2.ID}) != nil || calls.Len() != 1 {
		t.Error("the replaced attempt's result was paired")
	}
	if got := calls.Lost(); len(got) != 1 || got[0] != mut || mut.Retryable() {
		t.Fatalf("Lost = %v; after %d tries Retryable = %v", got, mut.Tries, mut.Retryable())
	}
	if calls.Result(&protocol.NativeRootResult{ID: &f3.ID}) != nil || calls.Len() != 0 {
		t.Error("a result after the connection was lost was paired")
	}
	// A frame that could not be sent is not an attempt.
	calls.Attempt(mut, t0)
	calls.Unsent(mut)
	if mut.Tries != 3 || !mut.Uncertain || calls.Len() != 0 {
		t.Fatalf("after Unsent: %d tries, uncertain %v, %d tracked", mut.Tries, mut.Uncertain, calls.Len())
	}
	f4, _ := calls.Attempt(mut, t0)
	if c := calls.Result(&protocol.NativeRootResult{ID: &f4.ID}); c != mut || c.Data != "stop" || calls.Len() != 0 {
		t.Errorf("Result = %v, want the stop call", c)
	}

	// Bounded: the attempt beyond MaxNativeCalls is refused.
	for range MaxNativeCalls {
		c, _ := NewNativeCall(protocol.NativeRequest{Action: protocol.NativeList}, "")
		if _, err := calls.Attempt(c, t0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := calls.Attempt(read, t0); !errors.Is(err, ErrNativeBusy) {
		t.Errorf("attempt %d: %v, want ErrNativeBusy", MaxNativeCalls+1, err)
	}

	big, err := NewNativeCall(NativeMutation("", protocol.NativeRequest{Action: protocol.NativeApprove, RootID: "r1", TaskID: "t1",
		Rationale: strings.Repeat("why ", protocol.MaxNativeFrameSize/4)}, 1), "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewNativeCalls[string]("x-").Attempt(big, t0); !errors.Is(err, protocol.ErrFrameTooLarge) {
		t.Errorf("oversized request: %v", err)
	}
}
