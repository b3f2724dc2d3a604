package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
)

// AppendFit appends m's frame to dst like AppendEncode, except that a
// message whose frame would be over MaxFrameSize is not refused but
// shortened: its longest texts are cut with CutText (each says what it
// lost) until the frame fits. m itself is never modified: the cuts are
// made on a copy, and AppendFit returns the message its frame encodes (m,
// or that copy) so that a caller keeping it (a replay window) keeps what
// was sent. It fails for a message that does not encode, and with
// ErrFrameTooLarge for one that cutting texts cannot make fit (too many
// entries, or the size is in map keys).
//
// It is the fleet's guarantee that no frame it sends is one a client must
// refuse, whatever produced it; the limits at the sources (MaxPromptText,
// the caps on derived texts) keep it from being needed.
func AppendFit(dst []byte, m Message) ([]byte, Message, error) {
	out, err := AppendEncode(dst, m)
	if err != ErrFrameTooLarge {
		return out, m, err
	}
	c, err := cloneMessage(m)
	if err != nil {
		return dst, m, err
	}
	var slots []textSlot
	collectTexts(reflect.ValueOf(c), &slots)
	// Each round measures the frame and cuts the longest texts by what it
	// is over: one round is enough unless cutting was not (then a second
	// one finds so and gives up).
	for range 3 {
		full, err := appendMessage(nil, c, math.MaxInt)
		if err != nil {
			return dst, m, err
		}
		over := len(full) - 1 - MaxFrameSize
		if over <= 0 {
			return append(dst, full...), c, nil
		}
		if !cutLongest(slots, over) {
			break
		}
	}
	return dst, m, ErrFrameTooLarge
}

// cloneMessage returns a deep copy of m that AppendFit may cut.
func cloneMessage(m Message) (Message, error) {
	switch v := m.(type) {
	case *Transcript:
		c := *v
		return &c, nil
	case *HubEvent:
		c := *v
		return &c, nil
	case HubEvent:
		return &v, nil
	case *Unknown, Unknown:
		return nil, fmt.Errorf("protocol: a %s frame of an unknown type cannot be shortened", m.MessageType())
	}
	e := registry[m.MessageType()]
	if e == nil {
		return nil, fmt.Errorf("protocol: cannot shorten a %s frame", m.MessageType())
	}
	var body []byte
	if err := marshal(m, func(b []byte) error { body = bytes.Clone(b); return nil }); err != nil {
		return nil, fmt.Errorf("protocol: shorten %s: %w", m.MessageType(), err)
	}
	c := e.new()
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber() // numbers in free-form input stay exact
	if err := dec.Decode(c); err != nil {
		return nil, fmt.Errorf("protocol: shorten %s: %w", m.MessageType(), err)
	}
	return c, nil
}

// textSlot is one string of a message that can be cut.
type textSlot struct {
	get func() string
	set func(string)
}

// collectTexts appends a slot for every string value in v: struct fields,
// elements of slices, values of maps (free-form JSON included). Map keys
// and raw JSON are left alone.
func collectTexts(v reflect.Value, out *[]textSlot) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			collectTexts(v.Elem(), out)
		}
	case reflect.Interface:
		if v.IsNil() {
			return
		}
		if v.Elem().Kind() == reflect.String && v.CanSet() {
			*out = append(*out, textSlot{
				get: func() string { return v.Elem().String() },
				set: func(s string) { v.Set(reflect.ValueOf(s)) },
			})
			return
		}
		collectTexts(v.Elem(), out)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				collectTexts(v.Field(i), out)
			}
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return // raw JSON
		}
		for i := range v.Len() {
			collectTexts(v.Index(i), out)
		}
	case reflect.Map:
		iter := v.MapRange()
		for iter.Next() {
			k, e := iter.Key(), iter.Value()
			if e.Kind() == reflect.Interface && !e.IsNil() {
				e = e.Elem()
			}
			switch e.Kind() {
			case reflect.String:
				m, t := v, v.Type().Elem()
				*out = append(*out, textSlot{
					get: func() string {
						e := m.MapIndex(k)
						if e.Kind() == reflect.Interface {
							e = e.Elem()
						}
						return e.String()
					},
					set: func(s string) { m.SetMapIndex(k, reflect.ValueOf(s).Convert(t)) },
				})
			case reflect.Map, reflect.Slice, reflect.Pointer:
				collectTexts(e, out)
			}
		}
	case reflect.String:
		if v.CanSet() {
			*out = append(*out, textSlot{get: v.String, set: v.SetString})
		}
	}
}

// cutLongest cuts the longest texts to one length, the largest that saves
// at least over bytes of encoding (never below MinCut). It reports whether
// it saved anything.
func cutLongest(slots []textSlot, over int) bool {
	lens := make([]int, len(slots))
	longest := 0
	for i, s := range slots {
		lens[i] = EncodedLen(s.get())
		longest = max(longest, lens[i])
	}
	saved := func(t int) int {
		n := 0
		for _, l := range lens {
			n += max(0, l-t)
		}
		return n
	}
	if longest <= MinCut {
		return false
	}
	// The largest cap t in [MinCut, longest) with saved(t) >= over; MinCut
	// when none saves enough.
	lo, hi := MinCut, longest-1
	if saved(lo) >= over {
		for lo < hi {
			mid := lo + (hi-lo+1)/2
			if saved(mid) >= over {
				lo = mid
			} else {
				hi = mid - 1
			}
		}
	}
	for i, s := range slots {
		if lens[i] > lo {
			s.set(CutText(s.get(), lo))
		}
	}
	return true
}
