package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"sync"
)

// ErrFrameTooLarge is returned by Encode and AppendEncode for a message whose
// frame would exceed MaxFrameSize, by Reader for a line longer than its cap,
// and by CheckNativeFrame and ParseNativeRequest for native input over
// MaxNativeFrameSize. A stream that produced it can't be resynchronised.
var ErrFrameTooLarge = errors.New("protocol: frame exceeds size limit")

// DecodeError is returned by Decode and PeekType for a frame that is not a
// JSON object, has no string "type", or is a known type whose fields have
// the wrong JSON kinds or whose required fields are missing; and by the
// native helpers for a request that breaks the native rules.
type DecodeError struct {
	// Type is the frame's type when it could be read, "" otherwise (in
	// particular for a frame that is not valid JSON).
	Type string
	// Msg is a short reason that is safe to send to the client, e.g.
	// `prompt: field "text" must be a string`.
	Msg string
}

// Error returns e.Msg.
func (e *DecodeError) Error() string { return e.Msg }

// entry is one known message type.
type entry struct {
	new  func() Message
	info *typeInfo
}

var registry = map[string]*entry{}

func register[T any, PT interface {
	*T
	Message
}]() {
	typ := PT(new(T)).MessageType()
	registry[typ] = &entry{
		new:  func() Message { return PT(new(T)) },
		info: infoFor(reflect.TypeFor[T]()),
	}
}

// init registers every message type; classOf (class.go) says what each is
// for, the direction included.
func init() {
	register[Hello]()
	register[Prompt]()
	register[ConfirmResponse]()
	register[AskResponse]()
	register[Ping]()
	register[NativeRoot]()

	register[NativeRootResult]()
	register[Welcome]()
	register[UserMessage]()
	register[Reply]()
	register[Status]()
	register[ConfirmRequest]()
	register[AskRequest]()
	register[ConfirmResolved]()
	register[ReplayEnd]()
	register[Error]()
	register[Pong]()
	register[Transcript]()
	register[FleetState]()
	register[FleetAnalytics]()
	register[FileChange]()
	register[ToolCall]()
	register[HubEvent]()
	register[Hydrate]()
	register[CommandCatalog]()
	register[FleetIntel]()
	register[FleetEvolution]()
	register[FleetStore]()
	register[FleetExperiment]()
}

// Types returns the type names of every message this package knows, sorted.
func Types() []string {
	out := make([]string, 0, len(registry))
	for t := range registry {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// New returns a new zero message of the registered type typ, as a pointer
// (the form Decode returns), or nil when typ is not registered.
func New(typ string) Message {
	if e := registry[typ]; e != nil {
		return e.new()
	}
	return nil
}

// FromClient reports whether typ is a known client → server message type
// (ClassInbound). A server can use it to ignore server → client types a
// client sends.
func FromClient(typ string) bool { return classOf(typ) == ClassInbound }

// encoder is a pooled json.Encoder that does not escape <, > and & (the
// frames are not HTML, and JSON.stringify does not escape them either).
type encoder struct {
	buf bytes.Buffer
	enc *json.Encoder
}

var encoderPool = sync.Pool{New: func() any {
	e := &encoder{}
	e.enc = json.NewEncoder(&e.buf)
	e.enc.SetEscapeHTML(false)
	return e
}}

// maxPooledBuffer keeps the pool from pinning the memory of a huge frame.
const maxPooledBuffer = 64 << 10

// marshal runs fn with the JSON object encoding of v (no trailing newline);
// the slice is only valid during fn.
func marshal(v any, fn func(body []byte) error) error {
	e := encoderPool.Get().(*encoder)
	defer func() {
		if e.buf.Cap() <= maxPooledBuffer {
			e.buf.Reset()
			encoderPool.Put(e)
		}
	}()
	if err := e.enc.Encode(v); err != nil {
		return err
	}
	body := e.buf.Bytes()
	body = body[:len(body)-1] // Encode's newline
	return fn(body)
}

// marshalPlain is json.Marshal without HTML escaping, for MarshalJSON methods.
func marshalPlain(v any) ([]byte, error) {
	var out []byte
	err := marshal(v, func(body []byte) error {
		out = bytes.Clone(body)
		return nil
	})
	return out, err
}

// nonNil returns s, or an empty slice when s is nil, so that a required array
// is encoded as [] rather than null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// Encode returns m as one frame: a JSON object with "type" first, then m's
// fields in declaration order, then '\n'.
func Encode(m Message) ([]byte, error) {
	if t, ok := m.(*Transcript); ok && t != nil {
		// The hot path: one allocation of about the right size (escapes
		// may still grow it).
		return appendTranscript(make([]byte, 0, len(t.Text)+len(t.Agent)+96), t, MaxFrameSize)
	}
	return AppendEncode(nil, m)
}

// AppendEncode appends m's frame (with its '\n') to dst and returns the
// extended slice. On error dst is returned unchanged; a frame longer than
// MaxFrameSize (newline excluded) is ErrFrameTooLarge.
func AppendEncode(dst []byte, m Message) ([]byte, error) {
	return appendMessage(dst, m, MaxFrameSize)
}

// appendMessage is AppendEncode with limit as the frame cap (Fit measures
// a frame over MaxFrameSize with an unlimited one).
func appendMessage(dst []byte, m Message, limit int) ([]byte, error) {
	switch u := m.(type) {
	case nil:
		return dst, errors.New("protocol: encode nil message")
	case *Unknown:
		if u == nil {
			return dst, errors.New("protocol: encode nil message")
		}
		return appendUnknown(dst, u, limit)
	case Unknown:
		return appendUnknown(dst, &u, limit)
	case HubEvent:
		return appendFrame(dst, TypeHubEvent, hubEventFields(u), limit)
	case *HubEvent:
		if u == nil {
			return dst, errors.New("protocol: encode nil message")
		}
		return appendFrame(dst, TypeHubEvent, (*hubEventFields)(u), limit)
	case *Transcript:
		if u == nil {
			return dst, errors.New("protocol: encode nil message")
		}
		return appendTranscript(dst, u, limit)
	}
	if v := reflect.ValueOf(m); v.Kind() == reflect.Pointer && v.IsNil() {
		return dst, errors.New("protocol: encode nil message")
	}
	return appendFrame(dst, m.MessageType(), m, limit)
}

// appendFrame appends {"type":typ, <fields of payload>}\n to dst, or fails
// with ErrFrameTooLarge when that is over limit bytes (newline excluded).
func appendFrame(dst []byte, typ string, payload any, limit int) ([]byte, error) {
	out := dst
	err := marshal(payload, func(body []byte) error {
		if len(body) < 2 || body[0] != '{' {
			return fmt.Errorf("protocol: %s does not encode as a JSON object", typ)
		}
		size := len(`{"type":`) + len(body) // body's '{' stands for the ',' or '}'
		var quoted []byte
		if plainTypeName(typ) {
			size += len(typ) + 2
		} else {
			quoted, _ = json.Marshal(typ)
			size += len(quoted)
		}
		if size > limit {
			return ErrFrameTooLarge
		}
		out = append(out, `{"type":`...)
		if quoted != nil {
			out = append(out, quoted...)
		} else {
			out = append(out, '"')
			out = append(out, typ...)
			out = append(out, '"')
		}
		if len(body) == 2 { // {}
			out = append(out, '}')
		} else {
			out = append(out, ',')
			out = append(out, body[1:]...)
		}
		out = append(out, '\n')
		return nil
	})
	if err != nil {
		if err != ErrFrameTooLarge {
			err = fmt.Errorf("protocol: encode %s: %w", typ, err)
		}
		return dst, err
	}
	return out, nil
}

// plainTypeName reports whether typ can be written between quotes as is.
func plainTypeName(typ string) bool {
	for i := 0; i < len(typ); i++ {
		if c := typ[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// appendUnknown writes u.Raw back, compacted so that it stays one line, or
// {"type":u.Type} when Raw is empty.
func appendUnknown(dst []byte, u *Unknown, limit int) ([]byte, error) {
	raw := trimNewline(u.Raw)
	if len(raw) == 0 {
		return appendFrame(dst, u.Type, struct{}{}, limit)
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil || b.Len() == 0 || b.Bytes()[0] != '{' {
		return dst, fmt.Errorf("protocol: encode %s: Raw is not a JSON object", u.Type)
	}
	if b.Len() > limit {
		return dst, ErrFrameTooLarge
	}
	dst = append(dst, b.Bytes()...)
	return append(dst, '\n'), nil
}

func trimNewline(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		return b[:n-1]
	}
	return b
}

// PeekType returns the top-level "type" of a frame without decoding the
// rest. It does not validate the rest of the frame. Errors are *DecodeError.
func PeekType(frame []byte) (string, error) {
	typ, err := peek(trimNewline(frame))
	return string(typ), err
}

func peek(frame []byte) ([]byte, error) {
	typ, present, isString, err := peekType(frame)
	switch {
	case err != nil:
		if json.Valid(frame) {
			return nil, &DecodeError{Msg: "frame is not a JSON object"}
		}
		return nil, &DecodeError{Msg: "invalid JSON"}
	case !present:
		return nil, &DecodeError{Msg: `missing required field "type"`}
	case !isString:
		if !json.Valid(frame) {
			return nil, &DecodeError{Msg: "invalid JSON"}
		}
		return nil, &DecodeError{Msg: `field "type" must be a string`}
	}
	return typ, nil
}

// afterDecoder is implemented by messages that tidy themselves after Decode.
type afterDecoder interface{ afterDecode() error }

// Decode decodes one frame, with or without its trailing newline. It reads
// the type first, then decodes the payload into the matching struct and
// returns a pointer to it (e.g. *Prompt). A frame of a type this package
// does not know is returned as *Unknown (Raw a copy of the frame) when it is
// valid JSON. Other failures are *DecodeError. Unknown fields are ignored
// and keys match field names case-insensitively, as encoding/json does; an
// empty optional array or object decodes as nil.
func Decode(frame []byte) (Message, error) {
	frame = trimNewline(frame)
	typ, err := peek(frame)
	if err != nil {
		return nil, err
	}
	e := registry[string(typ)]
	if e == nil {
		if !json.Valid(frame) {
			return nil, &DecodeError{Msg: "invalid JSON"}
		}
		if err := checkUniqueType(frame); err != nil {
			return nil, err
		}
		return &Unknown{Type: string(typ), Raw: bytes.Clone(frame)}, nil
	}
	name := e.info.msgType
	m := e.new()
	uerr := json.Unmarshal(frame, m)
	if _, ok := uerr.(*json.SyntaxError); ok {
		return nil, &DecodeError{Msg: "invalid JSON"}
	}
	if err := validateMessage(frame, e.info); err != nil {
		if fe, ok := err.(*fieldError); ok {
			return nil, &DecodeError{Type: name, Msg: fe.message(name)}
		}
		return nil, &DecodeError{Type: name, Msg: name + ": invalid frame"}
	}
	if uerr != nil {
		msg := name + ": invalid field value"
		var te *json.UnmarshalTypeError
		if errors.As(uerr, &te) && te.Field != "" {
			msg = fmt.Sprintf("%s: invalid value for field %q", name, te.Field)
		} else if de, ok := uerr.(*DecodeError); ok {
			msg = name + ": " + de.Msg
		}
		return nil, &DecodeError{Type: name, Msg: msg}
	}
	if e.info.norm {
		normalize(reflect.ValueOf(m).Elem(), e.info)
	}
	if a, ok := m.(afterDecoder); ok {
		if err := a.afterDecode(); err != nil {
			return nil, &DecodeError{Type: name, Msg: name + ": invalid frame"}
		}
	}
	return m, nil
}

// checkUniqueType rejects a frame with two top-level "type" keys, which
// decoders that keep the last one would read differently.
func checkUniqueType(frame []byte) error {
	s := scanner{data: frame}
	n := 0
	err := s.object(func(key []byte) error {
		if string(key) == "type" {
			n++
		}
		return s.skip()
	})
	if err != nil || n > 1 {
		return &DecodeError{Msg: `duplicate field "type"`}
	}
	return nil
}
