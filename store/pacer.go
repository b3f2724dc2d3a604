package store

import (
	"sync/atomic"
	"time"
)

// pacer decides when background work that follows writes (a checkpoint, an
// ingest of the transcript logs) is due. Output comes in bursts, and that
// work costs less done once after a burst than a little after every write,
// so a round is due once no write has happened for idle, or maxAge after
// the first write since the last round (which bounds how long the work can
// lag), or at once when the writer calls full. A write only stores a
// timestamp and signals a channel at most once a round, so the goroutine
// does not wake for every write.
type pacer struct {
	idle, maxAge time.Duration
	dirty        chan struct{} // a write happened (buffer 1)
	fullc        chan struct{} // a round is due at once (buffer 1)
	last         atomic.Int64  // time of the last write, UnixNano

	// quietMin is the shortest time without a write that a round became
	// due after, ns (0 before the first round), whatever made it due: a
	// round in the middle of a burst shows here. Only wait writes it. For
	// tests and diagnostics.
	quietMin atomic.Int64
}

func newPacer(idle, maxAge time.Duration) pacer {
	return pacer{idle: idle, maxAge: maxAge, dirty: make(chan struct{}, 1), fullc: make(chan struct{}, 1)}
}

// wrote records a write. It never blocks.
func (p *pacer) wrote() {
	p.last.Store(time.Now().UnixNano())
	select {
	case p.dirty <- struct{}{}:
	default:
	}
}

// full makes the next round due at once. It never blocks.
func (p *pacer) full() {
	select {
	case p.fullc <- struct{}{}:
	default:
	}
}

// wait blocks until a round is due and returns true, or returns false once
// stop is closed. The caller resets its own counters and then calls
// started before it does the round.
func (p *pacer) wait(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return false
	case <-p.dirty:
	}
	idle := time.NewTimer(p.idle)
	defer idle.Stop()
	age := time.NewTimer(p.maxAge)
	defer age.Stop()
	for {
		select {
		case <-stop:
			return false
		case <-idle.C:
			// Writes since the timer was set push the round back.
			q := p.quiet()
			if q < p.idle {
				idle.Reset(p.idle - q)
				continue
			}
			p.due(q)
			return true
		case <-age.C:
			p.due(p.quiet())
			return true
		case <-p.fullc:
			p.due(p.quiet())
			return true
		}
	}
}

// quiet is how long no write has happened.
func (p *pacer) quiet() time.Duration {
	return time.Duration(time.Now().UnixNano() - p.last.Load())
}

// due notes that a round became due after q without a write.
func (p *pacer) due(q time.Duration) {
	if m := p.quietMin.Load(); m == 0 || int64(q) < m {
		p.quietMin.Store(int64(q))
	}
}

// started drops the signals raised before the round begins: the round
// covers those writes.
func (p *pacer) started() {
	select {
	case <-p.dirty:
	default:
	}
	select {
	case <-p.fullc:
	default:
	}
}
