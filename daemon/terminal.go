package daemon

import (
	"context"
	"errors"
	"io"
	"net"

	"github.com/agents-fleet/fleet/client"
	"github.com/agents-fleet/fleet/console"
	"github.com/agents-fleet/fleet/protocol"
)

// runTerminalConsole is the fleet's own terminal surface: the same line
// console as `fleet attach`, attached in-process over a pipe, so the
// terminal sees exactly what socket clients see. /quit or the end of input
// ends the session like a signal does.
func runTerminalConsole(ctx context.Context, nc net.Conn, token string, in io.Reader, out io.Writer, color bool) error {
	conn, err := client.Handshake(ctx, nc, token, client.Options{ClientKind: protocol.ClientREPL, ClientName: "terminal"})
	if err != nil {
		nc.Close()
		return err
	}
	repl := &console.REPL{In: in, Out: out, Conn: conn, Color: color}
	err = repl.Run(ctx)
	var closed *console.ClosedError
	if errors.As(err, &closed) && ctx.Err() != nil {
		return nil // the fleet is shutting down: not the console's failure
	}
	return err
}
