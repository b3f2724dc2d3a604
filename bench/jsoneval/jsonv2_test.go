//go:build goexperiment.jsonv2

package jsoneval

import (
	jsonv1 "encoding/json"
	"encoding/json/jsontext"
	jsonv2 "encoding/json/v2"
)

// Under GOEXPERIMENT=jsonv2, encoding/json itself (and so the
// encoding_json and protocol rows) runs on the v2 implementation with
// DefaultOptionsV1. These rows call encoding/json/v2 directly:
//   - jsonv2: v2 defaults (case-sensitive names, duplicate names and
//     invalid UTF-8 are errors, omitempty omits only empty JSON values);
//   - jsonv2_v1opts: v2 with the v1 options, HTML escaping off.
func init() {
	v1opts := jsonv2.JoinOptions(jsonv1.DefaultOptionsV1(), jsontext.EscapeForHTML(false))
	codecs = append(codecs,
		codec{"jsonv2", func(data []byte, v any) error { return jsonv2.Unmarshal(data, v) },
			func(v any) ([]byte, error) { return jsonv2.Marshal(v) }},
		codec{"jsonv2_v1opts", func(data []byte, v any) error { return jsonv2.Unmarshal(data, v, v1opts) },
			func(v any) ([]byte, error) { return jsonv2.Marshal(v, v1opts) }},
	)
}
