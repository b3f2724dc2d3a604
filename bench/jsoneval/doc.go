// Package jsoneval benchmarks alternative JSON libraries against
// encoding/json and protocol.Decode/Encode on the protocol golden corpus.
// It is a separate module so that none of these libraries enters the main
// module's go.mod; see README.md.
package jsoneval
