package telegram

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strconv"
)

// maxRequestBody bounds a request the hub makes; it sends text, never files.
const maxRequestBody = 4 << 20

// stringFields are the parameters the library writes as plain strings; every
// other form field holds a JSON value (json.Marshal output, quotes trimmed
// for strings).
var stringFields = map[string]bool{
	"text": true, "parse_mode": true, "callback_query_id": true, "name": true, "url": true,
	"caption": true, "description": true, "secret_token": true, "icon_custom_emoji_id": true,
	"inline_message_id": true, "language_code": true, "business_connection_id": true,
}

// asJSON re-encodes the library's multipart/form-data request as a JSON
// object. The Bot API takes either, but JSON is what every server parses:
// the telegram-test-api emulator ignores multipart bodies (each parameter
// lost, and sendMessage still answers ok). The hub never uploads a file, so
// a file part is an error.
func asJSON(req *http.Request) error {
	mt, params, err := mime.ParseMediaType(req.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" {
		return nil
	}
	var raw []byte
	if req.Body != nil {
		raw, err = io.ReadAll(io.LimitReader(req.Body, maxRequestBody+1))
		req.Body.Close()
		if err != nil {
			return fmt.Errorf("read the request: %w", err)
		}
		if len(raw) > maxRequestBody {
			return fmt.Errorf("request over %d MiB", maxRequestBody>>20)
		}
	}
	obj := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(raw)) > 0 {
		mr := multipart.NewReader(bytes.NewReader(raw), params["boundary"])
		for {
			p, err := mr.NextPart()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return fmt.Errorf("re-encode the request: %w", err)
			}
			if p.FileName() != "" {
				return errors.New("re-encode the request: file uploads are not supported")
			}
			v, err := io.ReadAll(p)
			if err != nil {
				return fmt.Errorf("re-encode the request: %w", err)
			}
			obj[p.FormName()] = jsonValue(p.FormName(), v)
		}
	}
	body, err := json.Marshal(obj)
	if err != nil {
		return fmt.Errorf("re-encode the request: %w", err)
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	req.ContentLength = int64(len(body))
	req.Header.Set("Content-Type", "application/json")
	return nil
}

// jsonValue is a form field as JSON: a string for the plain-string
// parameters, else the JSON the library marshalled (an id, a bool, a
// keyboard), else a string (a chat_id like @channel).
func jsonValue(name string, v []byte) json.RawMessage {
	if !stringFields[name] && json.Valid(v) {
		return json.RawMessage(v)
	}
	return json.RawMessage(strconv.Quote(string(v)))
}
