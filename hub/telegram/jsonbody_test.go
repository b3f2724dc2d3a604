package telegram

import (
	"bytes"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
)

func multipartRequest(t *testing.T, fields [][2]string, file bool) *http.Request {
	t.Helper()
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	for _, f := range fields {
		w.WriteField(f[0], f[1])
	}
	if file {
		fw, _ := w.CreateFormFile("document", "x.txt")
		fw.Write([]byte("data"))
	}
	w.Close()
	req, err := http.NewRequest(http.MethodPost, "http://127.0.0.1/bot1:x/sendMessage", &b)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", w.FormDataContentType())
	return req
}

// The library's form fields become a JSON object with the types the Bot
// API expects: text stays text even when it looks like a number.
func TestAsJSON(t *testing.T) {
	req := multipartRequest(t, [][2]string{
		{"chat_id", "42"}, {"text", "42"}, {"parse_mode", "HTML"}, {"message_thread_id", "7"},
		{"reply_markup", `{"inline_keyboard":[[{"text":"Yes","callback_data":"a"}]]}`},
		{"link_preview_options", `{"is_disabled":true}`}, {"show_alert", "true"},
	}, false)
	if err := asJSON(req); err != nil {
		t.Fatal(err)
	}
	if ct := req.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("content type %q", ct)
	}
	body, _ := io.ReadAll(req.Body)
	var got map[string]any
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	if got["chat_id"] != 42.0 || got["text"] != "42" || got["parse_mode"] != "HTML" || got["message_thread_id"] != 7.0 || got["show_alert"] != true {
		t.Errorf("scalars: %s", body)
	}
	kb, ok := got["reply_markup"].(map[string]any)
	if !ok || kb["inline_keyboard"] == nil {
		t.Errorf("reply_markup is not an object: %s", body)
	}
	if req.ContentLength != int64(len(body)) {
		t.Errorf("content length %d for %d bytes", req.ContentLength, len(body))
	}

	// A chat given by @username is not JSON: it stays a string.
	req = multipartRequest(t, [][2]string{{"chat_id", "@channel"}}, false)
	if err := asJSON(req); err != nil {
		t.Fatal(err)
	}
	if body, _ := io.ReadAll(req.Body); !strings.Contains(string(body), `"chat_id":"@channel"`) {
		t.Errorf("@channel: %s", body)
	}
	// No parameters at all (the library sends an empty body): {}.
	req, _ = http.NewRequest(http.MethodPost, "http://127.0.0.1/bot1:x/getMe", strings.NewReader(""))
	req.Header.Set("Content-Type", "multipart/form-data; boundary=x")
	if err := asJSON(req); err != nil {
		t.Fatal(err)
	}
	if body, _ := io.ReadAll(req.Body); string(body) != "{}" {
		t.Errorf("empty form: %q", body)
	}
	// The hub never uploads; a file is refused rather than dropped.
	if err := asJSON(multipartRequest(t, [][2]string{{"chat_id", "1"}}, true)); err == nil {
		t.Error("a file part was accepted")
	}
}
