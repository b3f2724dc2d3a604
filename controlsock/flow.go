package controlsock

import (
	"context"
	"time"
)

// Flow control for bursty producers.
//
// A task that prints as fast as it can produces faster than clients read.
// Rather than evicting healthy clients that merely fall behind for a moment,
// the producer of such output (a task's output reader, never the engine
// itself) calls Throttle before publishing. Throttle returns at once unless
// some client's backlog is over SoftQueueBytes; then it waits until every
// congested client has drained below half of that. A pipe between the task
// and its reader carries the backpressure to the task, as a slow terminal
// would.
//
// A stalled client must not hold everyone back: a congested client that has
// completed no write for StallGrace stops counting (it is "stalled") and is
// left to the byte bound and the write deadline, which evict it. So one
// stalled client delays a burst by at most about StallGrace, once.

// stallCheck is how often a waiting Throttle looks for stalled clients.
const stallCheck = 50 * time.Millisecond

// Throttle blocks while a healthy client is congested; see above. It
// returns early when ctx ends.
func (s *Server) Throttle(ctx context.Context) {
	for s.congested.Load() > 0 {
		s.reliefMu.Lock()
		ch := s.relief
		s.reliefMu.Unlock()
		if s.congested.Load() == 0 {
			return
		}
		t := time.NewTimer(stallCheck)
		select {
		case <-ch:
		case <-t.C:
			s.markStalled()
		case <-ctx.Done():
			t.Stop()
			return
		}
		t.Stop()
	}
}

// markStalled stops counting congested clients that made no progress for
// StallGrace.
func (s *Server) markStalled() {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.clients {
		c.mu.Lock()
		if c.congested && !c.stalled && now.Sub(c.progressAt) > s.cfg.StallGrace {
			c.stalled = true
			s.addCongested(-1)
			s.stalls.Add(1)
		}
		c.mu.Unlock()
	}
}

// addCongested adjusts the count of congested, non-stalled clients and
// wakes waiting producers when it reaches zero.
func (s *Server) addCongested(delta int64) {
	if s.congested.Add(delta) == 0 {
		s.reliefMu.Lock()
		close(s.relief)
		s.relief = make(chan struct{})
		s.reliefMu.Unlock()
	}
}

// setCongestedLocked moves c in or out of the congested set. c.mu must be
// held.
func (c *client) setCongestedLocked(on bool) {
	if c.congested == on {
		return
	}
	c.congested = on
	if !c.stalled {
		if on {
			c.srv.addCongested(1)
		} else {
			c.srv.addCongested(-1)
		}
	}
	if !on {
		c.stalled = false
	}
}

// progressLocked records a completed write: a stalled client that moves
// counts again, and a congested one that drained below the low-water mark
// releases the producers. c.mu must be held.
func (c *client) progressLocked() {
	c.progressAt = time.Now()
	if c.stalled {
		c.stalled = false
		if c.congested {
			c.srv.addCongested(1)
		}
	}
	if c.congested && c.queued+c.writing < c.srv.cfg.SoftQueueBytes/2 {
		c.setCongestedLocked(false)
	}
}
