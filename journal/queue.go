package journal

// queue is the journal's FIFO of items: a ring that grows by doubling and
// shrinks back once it is empty. An item is addressed by its position, the
// number of items pushed before it, which stays valid while the item is
// queued (the overload's maps keep positions). Not safe for concurrent
// use: Journal.mu guards it.
type queue struct {
	buf   []item // len(buf) is a power of two
	first uint64 // position of the oldest item
	n     int    // items queued, dropped ones included
	base  int    // the size it starts with and shrinks back to
}

func newQueue(size int) queue {
	n := 1
	for n < size {
		n <<= 1
	}
	return queue{buf: make([]item, n), base: n}
}

// next is the position the next push takes.
func (q *queue) next() uint64 { return q.first + uint64(q.n) }

// has reports whether position p is queued.
func (q *queue) has(p uint64) bool { return p >= q.first && p < q.next() }

// at returns the item at position p, which must be queued.
func (q *queue) at(p uint64) *item { return &q.buf[int(p)&(len(q.buf)-1)] }

func (q *queue) push(it item) {
	if q.n == len(q.buf) {
		buf := make([]item, 2*len(q.buf))
		for p := q.first; p < q.next(); p++ {
			buf[int(p)&(len(buf)-1)] = *q.at(p)
		}
		q.buf = buf
	}
	*q.at(q.next()) = it
	q.n++
}

// pop removes the oldest item, which must exist.
func (q *queue) pop() {
	*q.at(q.first) = item{}
	q.first++
	q.n--
	if q.n == 0 && len(q.buf) > 4*q.base {
		q.buf = make([]item, q.base) // an overload's ring
	}
}
