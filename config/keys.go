package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/agents-fleet/fleet/internal/suggest"
)

// unknownKeys reports every key of data, a config file that decodes into
// File, that File does not have, nested objects included, each with the
// closest known key. Keys match as encoding/json matches them (exactly,
// else ignoring case), so any key it reports is one the decoder dropped.
// The values of maps keyed by a name (providers, prices, env) are checked;
// their names are not.
func unknownKeys(data []byte) error {
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	var found []string
	walkKeys(v, reflect.TypeFor[File](), "", &found)
	if len(found) == 0 {
		return nil
	}
	slices.Sort(found)
	return errors.New(strings.Join(found, "; "))
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// walkKeys checks the JSON value v against type t; path is v's dotted key
// path ("" at the top). Values of the wrong kind were refused by the
// decoder already and are skipped here.
func walkKeys(v any, t reflect.Type, path string, found *[]string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		return // decodes itself (EnvMap): its keys are names
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			return
		}
		fields := jsonFields(t)
		names := make([]string, 0, len(fields))
		for name := range fields {
			names = append(names, name)
		}
		slices.Sort(names)
		for key, val := range obj {
			ft, ok := fields[key]
			if !ok {
				for name, f := range fields {
					if strings.EqualFold(name, key) {
						ft, ok = f, true
						break
					}
				}
			}
			if !ok {
				msg := fmt.Sprintf("unknown key %q", join(path, key))
				if near := suggest.Closest(key, names); near != "" {
					msg += fmt.Sprintf(" (did you mean %q?)", join(path, near))
				}
				*found = append(*found, msg)
				continue
			}
			walkKeys(val, ft, join(path, key), found)
		}
	case reflect.Map:
		obj, ok := v.(map[string]any)
		if !ok {
			return
		}
		for key, val := range obj {
			walkKeys(val, t.Elem(), join(path, key), found)
		}
	case reflect.Slice, reflect.Array:
		arr, ok := v.([]any)
		if !ok {
			return
		}
		for i, val := range arr {
			walkKeys(val, t.Elem(), fmt.Sprintf("%s[%d]", path, i), found)
		}
	}
}

// jsonFields maps the JSON key of each field of struct type t to the
// field's type.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := make(map[string]reflect.Type, t.NumField())
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
