package protocol

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// This file checks what encoding/json does not: that required fields are
// present and that every field has the right JSON kind (null included), with
// a message naming the field's path. The rules come from the struct tags:
// a field without omitempty/omitzero is required unless tagged
// protocol:"optional"; null is accepted only for pointer fields and for
// optional fields (as "absent").

type kind uint8

const (
	kindString kind = iota
	kindBool
	kindInt
	kindFloat
	kindArray
	kindStruct
	kindObject // map[string]any or json.RawMessage
	kindAny
)

var kindWant = [...]string{
	kindString: "a string",
	kindBool:   "a boolean",
	kindInt:    "an integer",
	kindFloat:  "a number",
	kindArray:  "an array",
	kindStruct: "an object",
	kindObject: "an object",
	kindAny:    "a value",
}

// typeInfo describes a Go type for validation and normalisation.
type typeInfo struct {
	kind   kind
	elem   *typeInfo   // kindArray
	fields []fieldInfo // kindStruct
	// msgType is set for a nested struct that is itself a message (HubEvent
	// in Hydrate.Hub): a "type" key, when present, must equal it.
	msgType string
	// norm is true when decoded values of this type may hold empty optional
	// arrays or maps that normalize turns into nil.
	norm bool
}

type fieldInfo struct {
	name     string
	fold     string // foldKey(name), for encoding/json's case-insensitive match
	index    int
	required bool
	nullOK   bool
	// emptyToNil: an optional (omitempty) array or map, which Decode turns
	// into nil when empty so that decode→encode→decode is stable.
	emptyToNil bool
	t          *typeInfo
}

var (
	rawMessageType = reflect.TypeFor[json.RawMessage]()
	messageType    = reflect.TypeFor[Message]()
)

// infoCache is filled at init by the registry and read-only afterwards.
var infoCache = map[reflect.Type]*typeInfo{}

func infoFor(t reflect.Type) *typeInfo {
	if ti, ok := infoCache[t]; ok {
		return ti
	}
	ti := &typeInfo{}
	infoCache[t] = ti
	switch {
	case t == rawMessageType:
		ti.kind = kindObject
	case t.Kind() == reflect.String:
		ti.kind = kindString
	case t.Kind() == reflect.Bool:
		ti.kind = kindBool
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64:
		ti.kind = kindInt
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		ti.kind = kindFloat
	case t.Kind() == reflect.Slice:
		ti.kind = kindArray
		ti.elem = infoFor(t.Elem())
		ti.norm = ti.elem.norm
	case t.Kind() == reflect.Map:
		ti.kind = kindObject
	case t.Kind() == reflect.Interface:
		ti.kind = kindAny
	case t.Kind() == reflect.Struct:
		ti.kind = kindStruct
		if reflect.PointerTo(t).Implements(messageType) {
			ti.msgType = reflect.New(t).Interface().(Message).MessageType()
		}
		for i := range t.NumField() {
			sf := t.Field(i)
			tag := sf.Tag.Get("json")
			if !sf.IsExported() || tag == "-" {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			if name == "" {
				name = sf.Name
			}
			optional := strings.Contains(opts, "omitempty") || strings.Contains(opts, "omitzero")
			ft := sf.Type
			ptr := ft.Kind() == reflect.Pointer
			if ptr {
				ft = ft.Elem()
			}
			fi := fieldInfo{
				name:     name,
				fold:     foldKey([]byte(name)),
				index:    i,
				required: !optional && sf.Tag.Get("protocol") != "optional",
				nullOK:   ptr || optional,
				t:        infoFor(ft),
			}
			k := sf.Type.Kind()
			fi.emptyToNil = strings.Contains(opts, "omitempty") && (k == reflect.Slice || k == reflect.Map)
			if fi.emptyToNil || fi.t.norm {
				ti.norm = true
			}
			ti.fields = append(ti.fields, fi)
		}
		if len(ti.fields) > 64 {
			panic("protocol: too many fields in " + t.String())
		}
	default:
		panic("protocol: unsupported field type " + t.String())
	}
	return ti
}

// foldKey folds a key the way encoding/json matches object keys to field
// names case-insensitively.
func foldKey(b []byte) string {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); {
		if c := b[i]; c < utf8.RuneSelf {
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			out = append(out, c)
			i++
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		out = utf8.AppendRune(out, unicode.ToUpper(unicode.ToLower(r)))
		i += n
	}
	return string(out)
}

// field returns the index of the field a key decodes into, exact name first,
// then the case-insensitive match, as encoding/json does; -1 if none.
func (ti *typeInfo) field(key []byte) int {
	for i := range ti.fields {
		if ti.fields[i].name == string(key) {
			return i
		}
	}
	f := foldKey(key)
	for i := range ti.fields {
		if ti.fields[i].fold == f {
			return i
		}
	}
	return -1
}

// fieldError is a validation failure. path is built in reverse while the
// recursion unwinds.
type fieldError struct {
	rpath   []string
	missing bool
	want    string // e.g. `a string`, or `"hubEvent"`
	dup     bool
}

func (e *fieldError) Error() string { return e.message("") }

func (e *fieldError) at(seg string) *fieldError {
	e.rpath = append(e.rpath, seg)
	return e
}

func (e *fieldError) path() string {
	var b strings.Builder
	for i := len(e.rpath) - 1; i >= 0; i-- {
		b.WriteString(e.rpath[i])
	}
	return strings.TrimPrefix(b.String(), ".")
}

func (e *fieldError) message(typ string) string {
	prefix := ""
	if typ != "" {
		prefix = typ + ": "
	}
	switch {
	case e.missing:
		return prefix + "missing required field " + strconv.Quote(e.path())
	case e.dup:
		return prefix + "duplicate field " + strconv.Quote(e.path())
	default:
		return prefix + "field " + strconv.Quote(e.path()) + " must be " + e.want
	}
}

// validateMessage checks a frame (valid JSON, an object) against the
// message struct described by ti.
func validateMessage(frame []byte, ti *typeInfo) error {
	s := scanner{data: frame}
	return s.validateObject(ti, true)
}

// validateObject checks the object at s.pos against struct ti. top is true
// for the frame itself, whose "type" key was handled by the caller but must
// not appear twice.
func (s *scanner) validateObject(ti *typeInfo, top bool) error {
	var seenBits uint64 // fields seen, by position in ti.fields (< 64)
	typeSeen := false
	err := s.object(func(key []byte) error {
		if (top || ti.msgType != "") && string(key) == "type" {
			if top {
				if typeSeen {
					return (&fieldError{dup: true}).at(".type")
				}
				typeSeen = true
				return s.skip()
			}
			s.ws()
			q, esc, ok := s.str()
			if ok {
				v, ok2 := unquote(q, esc)
				ok = ok2 && string(v) == ti.msgType
			}
			if !ok {
				return (&fieldError{want: strconv.Quote(ti.msgType)}).at(".type")
			}
			return nil
		}
		i := ti.field(key)
		if i < 0 {
			return s.skip()
		}
		f := &ti.fields[i]
		seenBits |= 1 << uint(i)
		s.ws()
		if s.peek() == 'n' {
			if !f.nullOK {
				return (&fieldError{want: kindWant[f.t.kind]}).at("." + f.name)
			}
			return s.skip()
		}
		if err := s.validateValue(f.t); err != nil {
			if fe, ok := err.(*fieldError); ok {
				return fe.at("." + f.name)
			}
			return err
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i := range ti.fields {
		if ti.fields[i].required && seenBits&(1<<uint(i)) == 0 {
			return (&fieldError{missing: true}).at("." + ti.fields[i].name)
		}
	}
	return nil
}

// validateValue checks the non-null value at s.pos against ti and consumes it.
func (s *scanner) validateValue(ti *typeInfo) error {
	s.ws()
	c := s.peek()
	ok := true
	switch ti.kind {
	case kindAny:
		return s.skip()
	case kindString:
		ok = c == '"'
	case kindBool:
		ok = c == 't' || c == 'f'
	case kindInt:
		return checkNumber(s.scalar(), true, ti)
	case kindFloat:
		return checkNumber(s.scalar(), false, ti)
	case kindObject:
		ok = c == '{'
	case kindStruct:
		if c != '{' {
			return mismatch(ti)
		}
		return s.validateObject(ti, false)
	case kindArray:
		if c != '[' {
			return mismatch(ti)
		}
		return s.array(func(i int) error {
			s.ws()
			var err error
			if s.peek() == 'n' {
				err = mismatch(ti.elem)
			} else {
				err = s.validateValue(ti.elem)
			}
			if fe, ok := err.(*fieldError); ok {
				return fe.at("[" + strconv.Itoa(i) + "]")
			}
			return err
		})
	}
	if !ok {
		return mismatch(ti)
	}
	return s.skip()
}

func mismatch(ti *typeInfo) *fieldError { return &fieldError{want: kindWant[ti.kind]} }

// checkNumber checks that b is a JSON number that fits the field: for an
// integer field, digits only and within int64; for a float, within float64.
func checkNumber(b []byte, integer bool, ti *typeInfo) error {
	if len(b) == 0 || (b[0] != '-' && (b[0] < '0' || b[0] > '9')) {
		return mismatch(ti)
	}
	if integer {
		digits := b
		if digits[0] == '-' {
			digits = digits[1:]
		}
		if len(digits) == 0 {
			return mismatch(ti)
		}
		for _, d := range digits {
			if d < '0' || d > '9' {
				return mismatch(ti)
			}
		}
		if len(digits) >= 19 {
			if _, err := strconv.ParseInt(string(b), 10, 64); err != nil {
				return mismatch(ti)
			}
		}
		return nil
	}
	for _, d := range b {
		if d == 'e' || d == 'E' || len(b) > 300 {
			if _, err := strconv.ParseFloat(string(b), 64); err != nil {
				return mismatch(ti)
			}
			break
		}
	}
	return nil
}

// normalize turns empty optional arrays and maps in v (a struct of type ti)
// into nil, so that a decoded message re-encodes and re-decodes to an equal
// value (omitempty drops them either way).
func normalize(v reflect.Value, ti *typeInfo) {
	switch ti.kind {
	case kindStruct:
		for i := range ti.fields {
			f := &ti.fields[i]
			fv := v.Field(f.index)
			if f.emptyToNil && fv.Len() == 0 && !fv.IsNil() {
				fv.SetZero()
				continue
			}
			if !f.t.norm {
				continue
			}
			if fv.Kind() == reflect.Pointer {
				if fv.IsNil() {
					continue
				}
				fv = fv.Elem()
			}
			normalize(fv, f.t)
		}
	case kindArray:
		for i := range v.Len() {
			normalize(v.Index(i), ti.elem)
		}
	}
}
