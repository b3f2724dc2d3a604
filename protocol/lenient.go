package protocol

import "errors"

// DecodeLenient decodes frame as Decode does, for a reader that would
// rather have most of a frame than none of it (a console reading history):
// when a frame of a known type fails only because of entries of its arrays
// (an entry without a required field, with a field of the wrong kind, or
// null), those entries are left out, counted in skipped, and the rest is
// decoded. An entry is left out at the innermost array that holds the
// fault, so one bad hydrate transcript line costs that line, not the
// replay. Any other failure is Decode's error, as from Decode.
//
// Consoles read with it (client.Conn.Next); the fleet's server stays
// strict about what it accepts and uses Decode.
func DecodeLenient(frame []byte) (m Message, skipped int, err error) {
	m, err = Decode(frame)
	if err == nil {
		return m, 0, nil
	}
	var de *DecodeError
	if !errors.As(err, &de) || de.Type == "" {
		return nil, 0, err
	}
	e := registry[de.Type]
	if e == nil {
		return nil, 0, err
	}
	pruned, n, ok := pruneObject(trimNewline(frame), e.info, true)
	if !ok || n == 0 {
		return nil, 0, err
	}
	m, perr := Decode(pruned)
	if perr != nil {
		return nil, 0, err
	}
	return m, n, nil
}

// pruneValue returns data, one JSON value, with the array entries that do
// not match ti left out, how many were, and whether the result matches ti.
func pruneValue(data []byte, ti *typeInfo) ([]byte, int, bool) {
	s := scanner{data: data}
	if s.validateValue(ti) == nil {
		return data, 0, true
	}
	switch ti.kind {
	case kindArray:
		return pruneArray(data, ti)
	case kindStruct:
		return pruneObject(data, ti, false)
	}
	return nil, 0, false
}

// pruneArray keeps the entries of the array data that match (or can be
// pruned to match) ti's element type.
func pruneArray(data []byte, ti *typeInfo) ([]byte, int, bool) {
	s := scanner{data: data}
	out := make([]byte, 0, len(data))
	out = append(out, '[')
	skipped, kept := 0, 0
	err := s.array(func(int) error {
		s.ws()
		start := s.pos
		if err := s.skip(); err != nil {
			return err
		}
		elem := data[start:s.pos]
		if elem[0] != 'n' {
			if v, n, ok := pruneValue(elem, ti.elem); ok {
				if kept > 0 {
					out = append(out, ',')
				}
				out = append(out, v...)
				kept++
				skipped += n
				return nil
			}
		}
		skipped++
		return nil
	})
	if err != nil {
		return nil, 0, false
	}
	return append(out, ']'), skipped, true
}

// pruneObject prunes the arrays (at any depth) of the object data, a
// struct of type ti (the frame itself when top), and reports whether the
// result then matches ti.
func pruneObject(data []byte, ti *typeInfo, top bool) ([]byte, int, bool) {
	s := scanner{data: data}
	out := make([]byte, 0, len(data))
	out = append(out, '{')
	skipped, members := 0, 0
	err := s.object(func(key []byte) error {
		s.ws()
		start := s.pos
		if err := s.skip(); err != nil {
			return err
		}
		val := data[start:s.pos]
		if i := ti.field(key); i >= 0 && !(top && string(key) == "type") && val[0] != 'n' {
			if ft := ti.fields[i].t; ft.kind == kindArray || ft.kind == kindStruct {
				if v, n, ok := pruneValue(val, ft); ok {
					val = v
					skipped += n
				}
			}
		}
		if members > 0 {
			out = append(out, ',')
		}
		out = appendJSONString(out, string(key))
		out = append(out, ':')
		out = append(out, val...)
		members++
		return nil
	})
	if err != nil {
		return nil, 0, false
	}
	out = append(out, '}')
	check := scanner{data: out}
	if top {
		err = check.validateObject(ti, true)
	} else {
		err = check.validateValue(ti)
	}
	if err != nil {
		return nil, 0, false
	}
	return out, skipped, true
}
