package protocol

import (
	"encoding/json"
	"errors"
)

// scanner walks JSON text without building values. It is used to peek the
// type of a frame, to check field presence and kinds (validate.go) and to
// check the keys of native frames. It never panics on malformed input: it
// reports errMalformed instead. It does not fully validate JSON (e.g. it
// accepts "tru" as a scalar); callers that need validity check it first
// (json.Valid or json.Unmarshal).
type scanner struct {
	data []byte
	pos  int
}

var errMalformed = errors.New("malformed JSON")

func (s *scanner) ws() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// peek returns the next byte, or 0 at the end.
func (s *scanner) peek() byte {
	if s.pos < len(s.data) {
		return s.data[s.pos]
	}
	return 0
}

// str consumes the string at s.pos and returns it with its quotes, and
// whether it contains escapes.
func (s *scanner) str() (quoted []byte, escaped bool, ok bool) {
	if s.peek() != '"' {
		return nil, false, false
	}
	for i := s.pos + 1; i < len(s.data); i++ {
		switch s.data[i] {
		case '"':
			quoted = s.data[s.pos : i+1]
			s.pos = i + 1
			return quoted, escaped, true
		case '\\':
			escaped = true
			i++ // the escaped byte can't end the string; \uXXXX digits can't either
		}
	}
	return nil, false, false
}

// unquote returns the contents of a quoted string from str.
func unquote(quoted []byte, escaped bool) ([]byte, bool) {
	if !escaped {
		return quoted[1 : len(quoted)-1], true
	}
	var v string
	if err := json.Unmarshal(quoted, &v); err != nil {
		return nil, false
	}
	return []byte(v), true
}

// stringValue consumes a string value and returns its contents.
func (s *scanner) stringValue() (string, bool) {
	s.ws()
	q, esc, ok := s.str()
	if !ok {
		return "", false
	}
	v, ok := unquote(q, esc)
	return string(v), ok
}

// scalar consumes a literal or number and returns its bytes.
func (s *scanner) scalar() []byte {
	start := s.pos
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ',', '}', ']', ':', ' ', '\t', '\n', '\r', '"', '{', '[':
			return s.data[start:s.pos]
		}
		s.pos++
	}
	return s.data[start:s.pos]
}

// skip consumes one value of any kind.
func (s *scanner) skip() error {
	s.ws()
	switch s.peek() {
	case '"':
		if _, _, ok := s.str(); !ok {
			return errMalformed
		}
		return nil
	case '{', '[':
		depth := 0
		for s.pos < len(s.data) {
			switch s.data[s.pos] {
			case '"':
				if _, _, ok := s.str(); !ok {
					return errMalformed
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					s.pos++
					return nil
				}
			}
			s.pos++
		}
		return errMalformed
	case 0, ',', '}', ']', ':':
		return errMalformed
	default:
		if len(s.scalar()) == 0 {
			return errMalformed
		}
		return nil
	}
}

// object iterates the members of the object at s.pos. fn gets each
// (unescaped) key with s positioned before the value, and must consume the
// value; the key slice is only valid during the call. object returns fn's
// first error, or errMalformed.
func (s *scanner) object(fn func(key []byte) error) error {
	s.ws()
	if s.peek() != '{' {
		return errMalformed
	}
	s.pos++
	s.ws()
	if s.peek() == '}' {
		s.pos++
		return nil
	}
	for {
		s.ws()
		q, esc, ok := s.str()
		if !ok {
			return errMalformed
		}
		key, ok := unquote(q, esc)
		if !ok {
			return errMalformed
		}
		s.ws()
		if s.peek() != ':' {
			return errMalformed
		}
		s.pos++
		s.ws()
		if err := fn(key); err != nil {
			return err
		}
		s.ws()
		switch s.peek() {
		case ',':
			s.pos++
		case '}':
			s.pos++
			return nil
		default:
			return errMalformed
		}
	}
}

// array iterates the elements of the array at s.pos; fn must consume each.
func (s *scanner) array(fn func(i int) error) error {
	s.ws()
	if s.peek() != '[' {
		return errMalformed
	}
	s.pos++
	s.ws()
	if s.peek() == ']' {
		s.pos++
		return nil
	}
	for i := 0; ; i++ {
		s.ws()
		if err := fn(i); err != nil {
			return err
		}
		s.ws()
		switch s.peek() {
		case ',':
			s.pos++
		case ']':
			s.pos++
			return nil
		default:
			return errMalformed
		}
	}
}

// errFoundType stops the object walk in peekType once "type" was read.
var errFoundType = errors.New("found type")

// peekType returns the first top-level "type" value of the object in frame.
// present reports whether a "type" key was found; isString whether its value
// was a string.
func peekType(frame []byte) (typ []byte, present, isString bool, err error) {
	s := scanner{data: frame}
	err = s.object(func(key []byte) error {
		if string(key) != "type" {
			return s.skip()
		}
		present = true
		s.ws()
		q, esc, ok := s.str()
		if !ok {
			return errFoundType
		}
		typ, isString = unquote(q, esc)
		return errFoundType
	})
	if err == errFoundType {
		err = nil
	}
	return typ, present, isString, err
}
