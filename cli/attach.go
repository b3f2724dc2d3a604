package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/agents-fleet/fleet/client"
	"github.com/agents-fleet/fleet/console"
	"github.com/agents-fleet/fleet/protocol"
)

// fleetArgHelp is the FLEET paragraph shared by the consoles' help.
const fleetArgHelp = `FLEET is a fleet id, a unique prefix of one, or a fleet name (see fleet ls);
it may be omitted when exactly one fleet is running.`

func newAttachCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "attach [FLEET]",
		Short: "Attach a line console to a running fleet",
		Long: `attach connects to a fleet's control socket and runs a line console: events
are printed as they happen (worker output, tool calls, replies, questions) and
every line you type is sent to the fleet as a prompt.

Local commands, not sent to the fleet:
  /yes [id], /no [id]     answer a pending confirmation
  /answer [id] <text|n>   answer a pending question (n picks choice n)
  /pending                list the confirmations and questions still open
  /status                 summarise the latest fleet status
  /quit                   detach (so does end of input, Ctrl-D)
The id may be left out when only one request of its kind is pending. Any other
slash command (/help, /tasks, /workers, /pause, /resume, /cancel, ...) is sent
to the fleet, which answers it.

Frames replayed on attach (open requests, recent conversation) are marked with
"·" and followed by "── live ──". Detaching leaves the fleet running: Ctrl-C
(or SIGTERM) detaches too, says "detached; the fleet keeps running" and exits
0. Exit status 1 when the fleet closed the connection or could not be reached.

` + fleetArgHelp,
		Example: `  fleet attach
  fleet attach api-refactor`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// Ctrl-C is a deliberate detach, not a failure.
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			conn, err := dialFleet(ctx, args, "repl", attachClientName())
			if err != nil {
				return err
			}
			r := &console.REPL{
				In:    cmd.InOrStdin(),
				Out:   cmd.OutOrStdout(),
				Conn:  conn,
				Color: colorOutput(cmd.OutOrStdout()),
			}
			err = r.Run(ctx)
			if err == nil && ctx.Err() != nil && cmd.Context().Err() == nil {
				fmt.Fprintln(cmd.ErrOrStderr(), "detached; the fleet keeps running")
			}
			return err
		},
	}
}

// attachClientName is the attach console's clientName: attach@<hostname>.
func attachClientName() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		return "attach"
	}
	return "attach@" + host
}

// dialFleet finds the fleet named by the optional FLEET argument and dials it.
func dialFleet(ctx context.Context, args []string, kind protocol.ClientKind, name string) (*client.Conn, error) {
	selector := ""
	if len(args) > 0 {
		selector = args[0]
	}
	e, err := client.Find(selector)
	if err != nil {
		return nil, err
	}
	return client.Dial(ctx, e.Descriptor, client.Options{ClientKind: kind, ClientName: name})
}

// colorOutput reports whether w is a terminal that should get colours
// (NO_COLOR unset, TERM not dumb).
func colorOutput(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return false
	}
	return os.Getenv("NO_COLOR") == "" && os.Getenv("TERM") != "dumb"
}
