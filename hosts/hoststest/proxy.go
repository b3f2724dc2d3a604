package hoststest

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// Proxy stands between a host and the hub: a TCP forwarder whose link
// a test cuts (every connection closed, new ones refused) and heals.
type Proxy struct {
	ln net.Listener

	mu     sync.Mutex
	target string
	down   bool
	conns  map[net.Conn]bool
	wg     sync.WaitGroup
}

// StartProxy forwards a listener on 127.0.0.1 to target until the test
// ends.
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		ln.Close()
		p.Cut()
		p.wg.Wait()
	})
	return p
}

// Addr is where hosts dial.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		target := p.target
		p.mu.Unlock()
		up, err := net.DialTimeout("tcp", target, 10*time.Second)
		p.mu.Lock()
		if err != nil || p.down {
			p.mu.Unlock()
			c.Close()
			if up != nil {
				up.Close()
			}
			continue
		}
		p.conns[c], p.conns[up] = true, true
		p.mu.Unlock()
		for _, pair := range [][2]net.Conn{{c, up}, {up, c}} {
			p.wg.Go(func() {
				io.Copy(pair[0], pair[1])
				pair[0].Close()
				pair[1].Close()
			})
		}
	}
}

// Cut closes every connection through the proxy and refuses new ones
// until Heal.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// Retarget sends the connections made from now on to target (a hub
// started again on another port).
func (p *Proxy) Retarget(target string) {
	p.mu.Lock()
	p.target = target
	p.mu.Unlock()
}

// Heal lets connections through again.
func (p *Proxy) Heal() {
	p.mu.Lock()
	p.down = false
	p.mu.Unlock()
}
