package cli

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agents-fleet/fleet/client"
	"github.com/agents-fleet/fleet/protocol"
)

func TestSend(t *testing.T) {
	home := testHome(t)
	tf := startFleet(t, home, "alpha", "a1")

	// Success prints nothing.
	out, stderr, err := runCmd(t, newSendCmd(), nil, "quiet please")
	if err != nil || out != "" || stderr != "" {
		t.Fatalf("send = %q, %q, %v", out, stderr, err)
	}
	tf.waitPrompt(t, "send: quiet please")

	out, _, err = runCmd(t, newSendCmd(), nil, "alpha", "--wait-reply", "/tasks")
	if err != nil || out != "echo: /tasks\n" {
		t.Fatalf("send --wait-reply = %q, %v", out, err)
	}

	// TEXT "-" reads stdin.
	_, _, err = runCmd(t, newSendCmd(), strings.NewReader("quiet\nmulti-line\n"), "-")
	if err != nil {
		t.Fatal(err)
	}
	tf.waitPrompt(t, "send: quiet\nmulti-line")
}

func TestSendWaitReplyTimeout(t *testing.T) {
	home := testHome(t)
	startFleet(t, home, "alpha", "a1")
	_, _, err := runCmd(t, newSendCmd(), nil, "--wait-reply", "--timeout", "200ms", "quiet, no reply")
	if err == nil || !strings.Contains(err.Error(), "timed out after 200ms waiting for the reply") {
		t.Fatalf("send --wait-reply without a reply = %v", err)
	}
}

func TestSendErrors(t *testing.T) {
	home := testHome(t)
	tf := startFleet(t, home, "alpha", "a1")

	if _, _, err := runCmd(t, newSendCmd(), nil, "  "); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("empty prompt: %v", err)
	}
	big := strings.NewReader(strings.Repeat("x", maxSendStdin+1))
	if _, _, err := runCmd(t, newSendCmd(), big, "-"); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Errorf("oversized stdin: %v", err)
	}
	if _, _, err := runCmd(t, newSendCmd(), nil, "beta", "hi"); err == nil || !strings.Contains(err.Error(), "beta") {
		t.Errorf("unknown fleet: %v", err)
	}

	// The server's error message surfaces: replace the token so the fleet
	// refuses the hello.
	if err := os.Remove(tf.desc.TokenPath); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tf.desc.TokenPath, []byte(strings.Repeat("0", 64)), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err := runCmd(t, newSendCmd(), nil, "hi")
	if err == nil || !strings.Contains(err.Error(), "authentication failed") {
		t.Fatalf("send with a wrong token = %v, want the fleet's error", err)
	}
	if len(tf.Prompts()) != 0 {
		t.Errorf("prompts = %q", tf.Prompts())
	}
}

func TestReadPrompt(t *testing.T) {
	got, err := readPrompt(strings.NewReader("hello\r\n\n"))
	if err != nil || got != "hello" {
		t.Fatalf("readPrompt = %q, %v", got, err)
	}
}

// TestSendPromptRefused drives sendPrompt against a scripted server that
// answers the prompt with an error frame.
func TestSendPromptRefused(t *testing.T) {
	dir, err := os.MkdirTemp("", "fl")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "s.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	served := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			served <- err
			return
		}
		defer c.Close()
		r := protocol.NewReader(c, 0)
		if _, err := r.ReadFrame(); err != nil { // hello
			served <- err
			return
		}
		io.WriteString(c, `{"type":"welcome","protocolVersion":1,"capabilities":["replayEnd"]}`+"\n"+`{"type":"replayEnd"}`+"\n")
		if _, err := r.ReadFrame(); err != nil { // prompt
			served <- err
			return
		}
		io.WriteString(c, `{"type":"error","message":"prompt: text too long"}`+"\n")
		for {
			if _, err := r.ReadFrame(); err != nil {
				served <- nil
				return
			}
		}
	}()
	conn, err := client.DialSocket(t.Context(), path, "tok", client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = sendPrompt(t.Context(), conn, "hi", false, 0)
	conn.Close()
	if err == nil || err.Error() != "prompt refused: prompt: text too long" {
		t.Fatalf("sendPrompt = %v", err)
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
}

// TestSendRefusesAPromptOverTheLimit: a prompt under 1 MiB of text but
// over protocol.MaxPromptText once its quotes are escaped is refused by
// send itself, with the reason, and nothing reaches the fleet; one at the
// limit goes through.
func TestSendRefusesAPromptOverTheLimit(t *testing.T) {
	home := testHome(t)
	tf := startFleet(t, home, "alpha", "a1")
	over := strings.Repeat(`"`, protocol.MaxPromptText/2+1)
	_, _, err := runCmd(t, newSendCmd(), strings.NewReader(over), "-")
	if err == nil || !strings.Contains(err.Error(), "over the limit of 983040 bytes") || !strings.Contains(err.Error(), "nothing was sent") {
		t.Fatalf("send over the limit: %v", err)
	}
	at := strings.Repeat(`"`, protocol.MaxPromptText/2)
	if _, _, err := runCmd(t, newSendCmd(), strings.NewReader(at), "-"); err != nil {
		t.Fatalf("send at the limit: %v", err)
	}
	tf.waitPrompt(t, "send: "+at)
	if got := tf.Prompts(); len(got) != 1 {
		t.Fatalf("%d prompts reached the fleet", len(got))
	}
}
