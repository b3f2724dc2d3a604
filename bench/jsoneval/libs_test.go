package jsoneval

import (
	"bytes"
	"encoding/json"
	"sync"

	"github.com/bytedance/sonic"
	gojson "github.com/goccy/go-json"
	segjson "github.com/segmentio/encoding/json"
)

// codec is one JSON library as the benchmarks and tests use it. unmarshal
// decodes one frame into a message struct; marshal returns a fresh frame
// object (no trailing newline) without HTML escaping, as protocol.Encode
// writes it.
type codec struct {
	name      string
	unmarshal func(data []byte, v any) error
	marshal   func(v any) ([]byte, error)
}

// codecs lists the libraries in report order. The GOEXPERIMENT=jsonv2 build
// appends encoding/json/v2 (jsonv2_test.go).
var codecs = []codec{
	{"encoding_json", json.Unmarshal, stdMarshal},
	{"goccy", gojson.Unmarshal, func(v any) ([]byte, error) {
		return gojson.MarshalWithOption(v, gojson.DisableHTMLEscape())
	}},
	// sonic.ConfigDefault: no HTML escaping, no UTF-8 validation of
	// strings, Unmarshal copies the input first.
	{"sonic", sonic.ConfigDefault.Unmarshal, sonic.ConfigDefault.Marshal},
	// sonic.ConfigStd: encoding/json-compatible (validates UTF-8, copies
	// strings, sorts map keys) but escapes HTML when encoding, as
	// json.Marshal does; protocol does not, so its marshal is ConfigDefault
	// with ValidateString, the closest to protocol's output.
	{"sonic_std", sonic.ConfigStd.Unmarshal, sonicValidate.Marshal},
	{"segmentio", segjson.Unmarshal, func(v any) ([]byte, error) {
		return segjson.Append(nil, v, 0) // 0: no EscapeHTML
	}},
}

var sonicValidate = sonic.Config{ValidateString: true, CopyString: true}.Froze()

// stdMarshal is json.Marshal without HTML escaping, the way protocol
// encodes: a pooled json.Encoder with SetEscapeHTML(false), result copied.
func stdMarshal(v any) ([]byte, error) {
	e := stdPool.Get().(*stdEncoder)
	defer stdPool.Put(e)
	e.buf.Reset()
	if err := e.enc.Encode(v); err != nil {
		return nil, err
	}
	b := e.buf.Bytes()
	return bytes.Clone(b[:len(b)-1]), nil
}

type stdEncoder struct {
	buf bytes.Buffer
	enc *json.Encoder
}

var stdPool = sync.Pool{New: func() any {
	e := &stdEncoder{}
	e.enc = json.NewEncoder(&e.buf)
	e.enc.SetEscapeHTML(false)
	return e
}}
