package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agents-fleet/fleet/client"
	"github.com/agents-fleet/fleet/protocol"
)

// maxSendStdin bounds a prompt read from stdin (TEXT "-").
const maxSendStdin = 1 << 20

func newSendCmd() *cobra.Command {
	var (
		waitReply bool
		timeout   time.Duration
	)
	cmd := &cobra.Command{
		Use:   "send [FLEET] TEXT",
		Short: "Send one prompt to a running fleet",
		Long: `send sends TEXT to a fleet as a prompt, as if typed in a console, and waits
until the fleet has accepted it (its echo of the prompt came back). It prints
nothing on success and exits non-zero with the fleet's error message if the
prompt was refused.

TEXT "-" reads the prompt from stdin (at most 1 MiB). A prompt may be up to
983,040 bytes once JSON-encoded (quotes, backslashes and control characters
count twice or more); a longer one is refused. Slash commands such as
/pause or /tasks are prompts too: the fleet answers them.

--wait-reply also waits for the fleet's next reply after the prompt and prints
its text. When the fleet marks that reply as an error (an unknown command,
task or worker, bad arguments, a refusal: reply.isError), its text goes to
stderr instead and the exit status is 1. /answer, /yes and /no are the line
console's commands, not the fleet's: fleet answer ID ANSWER answers a request.
--timeout bounds the whole command (connecting, acceptance and the reply); 0
waits forever.

Exit status: 0 when the fleet accepted the prompt (and, with --wait-reply,
did not reply with an error), 1 otherwise, 2 for a usage error.

` + fleetArgHelp,
		Example: `  fleet send "run the test suite and fix what fails"
  fleet send api-refactor /pause
  fleet send --wait-reply /tasks
  git diff | fleet send -`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if timeout < 0 {
				return commandUsageErr(cmd, "--timeout must not be negative")
			}
			text := args[len(args)-1]
			if text == "-" {
				var err error
				if text, err = readPrompt(cmd.InOrStdin()); err != nil {
					return err
				}
			}
			if strings.TrimSpace(text) == "" {
				return commandUsageErr(cmd, "the prompt is empty")
			}
			// The fleet would refuse it: say so before connecting.
			if err := protocol.CheckPromptText(text); err != nil {
				return fmt.Errorf("%w; nothing was sent", err)
			}
			ctx := cmd.Context()
			if timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, timeout)
				defer cancel()
			}
			conn, err := dialFleet(ctx, args[:len(args)-1], "other", "send")
			if err != nil {
				return timeoutError(ctx, timeout, "connecting", err)
			}
			defer conn.Close()
			reply, err := sendPrompt(ctx, conn, text, waitReply, timeout)
			if err != nil || !waitReply {
				return err
			}
			if reply.IsError != nil && *reply.IsError {
				return &exitError{code: 1, err: errors.New(strings.TrimRight(reply.Text, "\n"))}
			}
			out := reply.Text
			if !strings.HasSuffix(out, "\n") {
				out += "\n"
			}
			_, err = io.WriteString(cmd.OutOrStdout(), out)
			return err
		},
	}
	cmd.Flags().BoolVar(&waitReply, "wait-reply", false, "wait for the fleet's next reply and print it")
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Second, "give up after this long (0: no limit)")
	return cmd
}

// readPrompt reads a prompt from r, at most maxSendStdin bytes, without its
// trailing newline.
func readPrompt(r io.Reader) (string, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxSendStdin+1))
	if err != nil {
		return "", fmt.Errorf("read the prompt from stdin: %w", err)
	}
	if len(b) > maxSendStdin {
		return "", fmt.Errorf("the prompt on stdin is over the limit of %d bytes", maxSendStdin)
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}

// sendPrompt sends text and waits for its echo, then, with waitReply, for the
// next live reply, which it returns (nil without waitReply). An error frame
// is returned as an error with the fleet's message. timeout is only for
// messages: ctx carries it.
func sendPrompt(ctx context.Context, conn *client.Conn, text string, waitReply bool, timeout time.Duration) (*protocol.Reply, error) {
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()

	id := client.NewRequestID()
	if err := conn.Send(&protocol.Prompt{Text: text, RequestID: id}); err != nil {
		return nil, timeoutError(ctx, timeout, "sending the prompt", err)
	}
	accepted := false
	for {
		m, _, replay, err := conn.Next()
		var fe *client.FrameError
		if errors.As(err, &fe) {
			continue
		}
		if err != nil {
			what, before := "for the prompt to be accepted", "before accepting the prompt"
			if accepted {
				what, before = "for the reply", "before replying"
			}
			if ctx.Err() != nil {
				return nil, timeoutError(ctx, timeout, "waiting "+what, ctx.Err())
			}
			if errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("the fleet closed the connection %s", before)
			}
			return nil, fmt.Errorf("connection to the fleet lost while waiting %s: %w", what, err)
		}
		switch m := m.(type) {
		case *protocol.Error:
			if !accepted {
				return nil, fmt.Errorf("prompt refused: %s", m.Message)
			}
			return nil, fmt.Errorf("the fleet reported an error: %s", m.Message)
		case *protocol.UserMessage:
			if m.RequestID == id {
				if !waitReply {
					return nil, nil
				}
				accepted = true
			}
		case *protocol.Reply:
			if accepted && !replay {
				return m, nil
			}
		}
	}
}

// timeoutError rewords err when ctx ran out of time during what.
func timeoutError(ctx context.Context, timeout time.Duration, what string, err error) error {
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return err
	}
	if timeout > 0 {
		return fmt.Errorf("timed out after %s %s (see --timeout)", timeout, what)
	}
	return fmt.Errorf("timed out %s", what)
}
