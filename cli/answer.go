package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agents-fleet/fleet/client"
	"github.com/agents-fleet/fleet/console"
	"github.com/agents-fleet/fleet/protocol"
)

// Exit codes of fleet answer beyond 0 and 1.
const (
	// exitNoRequest: the fleet has no request with that id (a usage error:
	// nothing was answered).
	exitNoRequest = 2
)

// pendingRequest is a confirmRequest or askRequest as the fleet replayed
// it: raw is the frame exactly as received.
type pendingRequest struct {
	client.Request
	raw json.RawMessage
}

// readPending reads the replay up to replayEnd and returns the requests
// still waiting, in the order the fleet replayed them (creation order).
func readPending(conn *client.Conn) ([]pendingRequest, error) {
	if !slices.Contains(conn.Welcome().Capabilities, protocol.CapReplayEnd) {
		return nil, errors.New("the fleet does not replay its waiting requests (its welcome has no replayEnd capability); use fleet attach and /pending")
	}
	var out []pendingRequest
	for {
		m, raw, _, err := conn.Next()
		if _, bad := errors.AsType[*client.FrameError](err); bad {
			continue
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil, errors.New("the fleet closed the connection during its replay")
			}
			return nil, fmt.Errorf("reading the fleet's replay: %w", err)
		}
		switch m := m.(type) {
		case *protocol.ConfirmRequest:
			out = append(out, pendingRequest{Request: client.Request{Confirm: m}, raw: json.RawMessage(slices.Clone(raw))})
		case *protocol.AskRequest:
			out = append(out, pendingRequest{Request: client.Request{Ask: m}, raw: json.RawMessage(slices.Clone(raw))})
		case *protocol.Error:
			return nil, fmt.Errorf("the fleet reported an error: %s", console.Sanitize(m.Message))
		case *protocol.ReplayEnd:
			return out, nil
		}
	}
}

// withTimeout bounds ctx by timeout (0: no bound).
func withTimeout(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	if timeout > 0 {
		return context.WithTimeout(ctx, timeout)
	}
	return context.WithCancel(ctx)
}

func newPendingCmd() *cobra.Command {
	var (
		asJSON  bool
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "pending [FLEET]",
		Short: "List the confirmations and questions a fleet waits for",
		Long: `pending lists the requests a fleet waits for an operator to answer, as the
fleet replays them to a console that attaches: confirmations (yes or no) and
questions (a choice, or free text), oldest first. Each one shows its id, its
kind, how long it has waited, the summary or question and, for a question,
its choices numbered from 1. Answer one with fleet answer ID ANSWER.

With nothing waiting it prints "no requests waiting" (on stdout) and exits 0.
--json prints a JSON array of the request frames exactly as the fleet sent
them (confirmRequest and askRequest objects), [] when none waits.

` + fleetArgHelp,
		Example: `  fleet pending
  fleet pending api-refactor --json | jq -r '.[].id'`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if timeout < 0 {
				return commandUsageErr(cmd, "--timeout must not be negative")
			}
			ctx, cancel := withTimeout(cmd.Context(), timeout)
			defer cancel()
			conn, err := dialFleet(ctx, args, "other", "pending")
			if err != nil {
				return timeoutError(ctx, timeout, "connecting", err)
			}
			defer conn.Close()
			stop := context.AfterFunc(ctx, func() { conn.Close() })
			defer stop()
			reqs, err := readPending(conn)
			if err != nil {
				return timeoutError(ctx, timeout, "reading the fleet's replay", err)
			}
			if asJSON {
				return writePendingJSON(cmd.OutOrStdout(), reqs)
			}
			return writePending(cmd.OutOrStdout(), reqs, time.Now())
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the request frames as a JSON array")
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Second, "give up after this long (0: no limit)")
	return cmd
}

// writePendingJSON writes the frames as an array, one frame a line, each
// byte for byte as the fleet sent it.
func writePendingJSON(w io.Writer, reqs []pendingRequest) error {
	if len(reqs) == 0 {
		_, err := io.WriteString(w, "[]\n")
		return err
	}
	var b strings.Builder
	b.WriteString("[\n")
	for i, r := range reqs {
		b.Write(r.raw)
		if i < len(reqs)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString("]\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// writePending writes one block per request.
func writePending(w io.Writer, reqs []pendingRequest, now time.Time) error {
	if len(reqs) == 0 {
		_, err := io.WriteString(w, "no requests waiting\n")
		return err
	}
	var b strings.Builder
	for i, r := range reqs {
		if i > 0 {
			b.WriteByte('\n')
		}
		ts, text := r.Ts(), r.Text()
		fmt.Fprintf(&b, "%s  %s", console.Sanitize(r.ID()), r.Kind())
		if ts > 0 {
			fmt.Fprintf(&b, ", waiting %s", formatAge(now.Sub(time.UnixMilli(ts))))
		}
		b.WriteByte('\n')
		for line := range strings.SplitSeq(strings.TrimRight(text, "\n"), "\n") {
			fmt.Fprintf(&b, "  %s\n", console.Sanitize(line))
		}
		switch {
		case r.Confirm != nil:
			fmt.Fprintf(&b, "  answer: fleet answer %s yes|no\n", console.Sanitize(r.ID()))
		case len(r.Ask.Choices) > 0:
			for n, c := range r.Ask.Choices {
				fmt.Fprintf(&b, "  %d) %s", n+1, console.Sanitize(c.Label))
				if c.Value != c.Label {
					fmt.Fprintf(&b, " [%s]", console.Sanitize(c.Value))
				}
				if c.Description != "" {
					fmt.Fprintf(&b, " - %s", console.Sanitize(c.Description))
				}
				b.WriteByte('\n')
			}
			how := "a number, label or value"
			if r.Freeform() {
				how += ", or free text"
			}
			fmt.Fprintf(&b, "  answer: fleet answer %s ANSWER (%s)\n", console.Sanitize(r.ID()), how)
		default:
			fmt.Fprintf(&b, "  answer: fleet answer %s TEXT (free text)\n", console.Sanitize(r.ID()))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// confirmWord reads a yes or no: y, yes, approve or n, no, deny, in any case.
func confirmWord(s string) (approve, ok bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "y", "yes", "approve":
		return true, true
	case "n", "no", "deny":
		return false, true
	}
	return false, false
}

// askAnswer is the text an askResponse to ask carries for what the
// operator typed: a choice's value for a value, a number from 1 or a label
// (any case); otherwise the text itself when the ask takes free text.
func askAnswer(ask *protocol.AskRequest, typed string) (string, bool) {
	for _, c := range ask.Choices {
		if c.Value == typed {
			return c.Value, true
		}
	}
	if n, err := strconv.Atoi(strings.TrimSpace(typed)); err == nil && n >= 1 && n <= len(ask.Choices) {
		return ask.Choices[n-1].Value, true
	}
	for _, c := range ask.Choices {
		if c.Label != "" && strings.EqualFold(c.Label, strings.TrimSpace(typed)) {
			return c.Value, true
		}
	}
	return typed, client.Request{Ask: ask}.Freeform()
}

// choiceList lists ask's choices: 1) label [value], …
func choiceList(ask *protocol.AskRequest) string {
	parts := make([]string, len(ask.Choices))
	for i, c := range ask.Choices {
		parts[i] = fmt.Sprintf("%d) %s", i+1, console.Sanitize(c.Label))
		if c.Value != c.Label {
			parts[i] += " [" + console.Sanitize(c.Value) + "]"
		}
	}
	return strings.Join(parts, ", ")
}

func newAnswerCmd() *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "answer [FLEET] ID ANSWER",
		Short: "Answer a confirmation or question a fleet waits for",
		Long: `answer answers the request ID (see fleet pending; a unique prefix of a
waiting request's id will do) and waits until the fleet has resolved it.

A confirmation takes yes or no: y, yes or approve; n, no or deny (any case).
A question takes one of its choices, by number (from 1), label (any case) or
value, or, when it allows free text (or is a free-text question), any text.
An answer that does not fit is refused before anything is sent, listing the
choices.

Exit status: 0 when the fleet resolved the request with this answer; 1 when
it was already resolved (answered from another console or the fleet's
terminal, expired or cancelled: the reason is printed), including when
another console answered it first, or on any other failure; 2 when the fleet
has no such request or the answer does not fit it (usage).

--timeout bounds the whole command (default 30s; 0 waits forever).

` + fleetArgHelp,
		Example: `  fleet answer ask-51cac9-1 2
  fleet answer ask-51cac9-1 prod
  fleet answer confirm-51cac9-3 yes
  fleet answer api-refactor ask-51cac9-4 "use the staging database"`,
		Args: cobra.RangeArgs(2, 3),
		RunE: func(cmd *cobra.Command, args []string) error {
			if timeout < 0 {
				return commandUsageErr(cmd, "--timeout must not be negative")
			}
			id, typed := args[len(args)-2], args[len(args)-1]
			if strings.TrimSpace(id) == "" {
				return commandUsageErr(cmd, "ID must not be empty")
			}
			ctx, cancel := withTimeout(cmd.Context(), timeout)
			defer cancel()
			conn, err := dialFleet(ctx, args[:len(args)-2], "other", "answer")
			if err != nil {
				return timeoutError(ctx, timeout, "connecting", err)
			}
			defer conn.Close()
			stop := context.AfterFunc(ctx, func() { conn.Close() })
			defer stop()
			out, err := answerRequest(ctx, cmd, conn, id, typed)
			if err != nil {
				return timeoutError(ctx, timeout, "waiting for the fleet", err)
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), out)
			return err
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "give up after this long (0: no limit)")
	return cmd
}

// answerRequest answers request id with what the operator typed and
// returns what to print once the fleet resolved it with this answer.
//
// The fleet handles one connection's frames in order and refuses an answer
// it does not take with an error frame (code request_resolved,
// request_unknown or answer_invalid) before it handles the next frame. So
// the answer is followed by a ping: an error before the pong is the
// refusal; a pong without one means the fleet took this answer, and its
// confirmResolved follows (docs/protocol-decisions.md).
func answerRequest(ctx context.Context, cmd *cobra.Command, conn *client.Conn, id, typed string) (string, error) {
	reqs, err := readPending(conn)
	if err != nil {
		return "", err
	}
	var match []pendingRequest
	for _, r := range reqs {
		if r.ID() == id {
			match = []pendingRequest{r}
			break
		}
		if strings.HasPrefix(r.ID(), id) {
			match = append(match, r)
		}
	}
	if len(match) > 1 {
		ids := make([]string, len(match))
		for i, r := range match {
			ids[i] = console.Sanitize(r.ID())
		}
		return "", commandUsageErr(cmd, "%q matches %d waiting requests (%s); give more of the id", id, len(match), strings.Join(ids, ", "))
	}

	var (
		msg  protocol.Message
		done string // what resolving with this answer means
	)
	switch {
	case len(match) == 1 && match[0].Confirm != nil:
		id = match[0].ID()
		approve, ok := confirmWord(typed)
		if !ok {
			return "", commandUsageErr(cmd, "%s is a confirmation: answer yes or no (y, yes, approve; n, no, deny), not %q", console.Sanitize(id), typed)
		}
		msg = &protocol.ConfirmResponse{ID: id, Approve: approve}
		done = console.Sanitize(id) + " denied"
		if approve {
			done = console.Sanitize(id) + " approved"
		}
	case len(match) == 1:
		ask := match[0].Ask
		id = ask.ID
		text, ok := askAnswer(ask, typed)
		if !ok {
			return "", commandUsageErr(cmd, "%s takes one of its choices, by number, label or value: %s; got %q", console.Sanitize(id), choiceList(ask), typed)
		}
		msg = &protocol.AskResponse{ID: id, Text: text}
		done = console.Sanitize(id) + " answered: " + console.Sanitize(text)
	default:
		// Not waiting: the fleet says whether it resolved it earlier or
		// never had it. It refuses whatever is sent, so no request is
		// answered by this; a request raised since the replay (an id
		// guessed ahead) would get the answer as typed.
		if approve, ok := confirmWord(typed); ok {
			msg = &protocol.ConfirmResponse{ID: id, Approve: approve}
		} else {
			msg = &protocol.AskResponse{ID: id, Text: typed}
		}
		done = console.Sanitize(id) + " answered"
	}

	if err := conn.Send(msg); err != nil {
		return "", err
	}
	if err := conn.Send(&protocol.Ping{}); err != nil {
		return "", err
	}
	taken, resolved := false, false
	for !taken || !resolved {
		m, _, _, err := conn.Next()
		if _, bad := errors.AsType[*client.FrameError](err); bad {
			continue
		}
		if err != nil {
			if ctx.Err() != nil {
				if taken {
					return "", fmt.Errorf("the fleet took the answer, but its resolution of %s did not arrive: %w", console.Sanitize(id), ctx.Err())
				}
				return "", ctx.Err()
			}
			if taken {
				// Taken means resolved with this answer: the broadcast
				// was lost with the connection, not the answer.
				return done + " (the connection closed before the fleet's confirmation arrived)", nil
			}
			if errors.Is(err, io.EOF) {
				return "", errors.New("the fleet closed the connection before taking the answer")
			}
			return "", fmt.Errorf("connection to the fleet lost: %w", err)
		}
		switch m := m.(type) {
		case *protocol.Error:
			if taken {
				continue // not about the answer: that was taken
			}
			return "", refusal(cmd, id, m)
		case *protocol.Pong:
			taken = true
		case *protocol.ConfirmResolved:
			if m.ID == id {
				resolved = true
			}
		}
	}
	return done, nil
}

// refusal is the command's error for the fleet's refusal e of an answer
// to id.
func refusal(cmd *cobra.Command, id string, e *protocol.Error) error {
	text := console.Sanitize(e.Message)
	switch e.Code {
	case protocol.ErrCodeRequestUnknown:
		return &exitError{code: exitNoRequest, err: fmt.Errorf("no request %s: the fleet has none with that id (fleet pending lists the waiting ones)", console.Sanitize(id))}
	case protocol.ErrCodeAnswerInvalid:
		return commandUsageErr(cmd, "%s", text)
	}
	// request_resolved, and a fleet that does not send codes.
	return &exitError{code: 1, err: errors.New(text)}
}
