package tui

// Bounded containers: what the model keeps never grows past its bound.

// ring is a fixed-capacity FIFO that overwrites its oldest element.
type ring[T any] struct {
	buf   []T
	start int
	n     int
	cap   int
	total int64 // elements ever pushed: the sequence number of the next one
}

func newRing[T any](capacity int) ring[T] { return ring[T]{cap: capacity} }

// push appends v, returning the element it evicted, if any.
func (r *ring[T]) push(v T) (old T, evicted bool) {
	r.total++
	if r.n < r.cap {
		if len(r.buf) < r.cap {
			r.buf = append(r.buf, v)
		} else {
			r.buf[(r.start+r.n)%r.cap] = v
		}
		r.n++
		return old, false
	}
	old = r.buf[r.start]
	r.buf[r.start] = v
	r.start = (r.start + 1) % r.cap
	return old, true
}

// shift removes and returns the oldest element; the ring must not be empty.
func (r *ring[T]) shift() T {
	var zero T
	v := r.buf[r.start]
	r.buf[r.start] = zero
	r.start = (r.start + 1) % r.cap
	r.n--
	return v
}

func (r *ring[T]) len() int { return r.n }

// at returns the i-th element, 0 being the oldest.
func (r *ring[T]) at(i int) T { return r.buf[(r.start+i)%r.cap] }

// firstSeq is the sequence number of the oldest element.
func (r *ring[T]) firstSeq() int64 { return r.total - int64(r.n) }

func (r *ring[T]) reset() { r.buf, r.start, r.n = nil, 0, 0 }

// filter keeps the elements keep accepts, in order.
func (r *ring[T]) filter(keep func(T) bool) {
	var kept []T
	for i := 0; i < r.n; i++ {
		if v := r.at(i); keep(v) {
			kept = append(kept, v)
		}
	}
	total := r.total
	r.reset()
	for _, v := range kept {
		r.push(v)
	}
	r.total = total
}

// idSet is a bounded set of ids; the oldest id goes when it is full.
type idSet struct {
	m     map[string]struct{}
	order []string
	max   int
}

func newIDSet(n int) idSet { return idSet{m: map[string]struct{}{}, max: n} }

func (s *idSet) add(id string) {
	if _, ok := s.m[id]; ok {
		return
	}
	if len(s.order) >= s.max {
		delete(s.m, s.order[0])
		s.order = s.order[1:]
	}
	s.m[id] = struct{}{}
	s.order = append(s.order, id)
}

func (s *idSet) has(id string) bool { _, ok := s.m[id]; return ok }

// remove deletes id and reports whether it was there.
func (s *idSet) remove(id string) bool {
	if _, ok := s.m[id]; !ok {
		return false
	}
	delete(s.m, id)
	for i, o := range s.order {
		if o == id {
			s.order = append(s.order[:i], s.order[i+1:]...)
			break
		}
	}
	return true
}

func (s *idSet) clear() {
	clear(s.m)
	s.order = s.order[:0]
}
