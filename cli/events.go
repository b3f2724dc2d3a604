package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/spf13/cobra"

	"github.com/agents-fleet/fleet/client"
	"github.com/agents-fleet/fleet/protocol"
)

func newEventsCmd() *cobra.Command {
	var (
		types []string
		live  bool
		count int
	)
	cmd := &cobra.Command{
		Use:   "events [FLEET]",
		Short: "Stream a fleet's control-socket frames to stdout as NDJSON",
		Long: `events attaches to a fleet and writes every frame it receives to stdout exactly
as received, one JSON object per line: welcome, the replay up to replayEnd,
then live events until the fleet closes the connection.

--type keeps only frames of the given types (repeat it, or separate types with
commas). --live skips the replay: everything up to and including replayEnd.
--count stops after that many frames were printed.

A fleet replays its recent hub events inside the hydrate frame (hydrate.hub),
not as hubEvent frames. So that --type hubEvent sees the fleet's history, each
of them is printed as a hubEvent line of its own, oldest first, when hubEvent
is selected and hydrate is not; they count for --count.

The exit status is 0 when the fleet closes the connection (for example when it
shuts down) and 1 when the connection breaks or the fleet drops this client
with an error.

` + fleetArgHelp,
		Example: `  fleet events
  fleet events --live --type toolCall --type hubEvent
  fleet events api-refactor --type fleetState --count 1 | jq .tasks
  fleet events --type confirmRequest,askRequest`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if count < 0 {
				return fmt.Errorf("--count must be 0 (no limit) or more, got %d", count)
			}
			for _, t := range types {
				if !slices.Contains(protocol.Types(), t) {
					fmt.Fprintf(cmd.ErrOrStderr(), "fleet events: warning: %q is not a message type this version knows\n", t)
				}
			}
			conn, err := dialFleet(cmd.Context(), args, "other", "events")
			if err != nil {
				return err
			}
			defer conn.Close()
			return streamEvents(cmd.Context(), conn, cmd.OutOrStdout(), eventFilter{types: types, live: live, count: count})
		},
	}
	cmd.Flags().StringSliceVarP(&types, "type", "t", nil, "print only frames of this `TYPE` (repeatable)")
	cmd.Flags().BoolVar(&live, "live", false, "skip the replay (frames up to and including replayEnd)")
	cmd.Flags().IntVarP(&count, "count", "n", 0, "exit after printing `N` frames (0: no limit)")
	return cmd
}

type eventFilter struct {
	types []string // empty: all
	live  bool
	count int // 0: no limit
}

// streamEvents copies conn's frames to w until the stream ends, ctx ends or
// f.count frames were written.
func streamEvents(ctx context.Context, conn *client.Conn, w io.Writer, f eventFilter) error {
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()

	printed := 0
	var line []byte
	// emit writes one frame with its newline in one write, so lines from
	// this and other writers to the same pipe do not interleave.
	emit := func(typ string, raw []byte) (done bool, err error) {
		if len(f.types) > 0 && !slices.Contains(f.types, typ) {
			return false, nil
		}
		line = append(append(line[:0], raw...), '\n')
		if _, err := w.Write(line); err != nil {
			return true, fmt.Errorf("write: %w", err)
		}
		printed++
		return f.count > 0 && printed >= f.count, nil
	}

	// emitHub writes the hub entries of a hydrate frame as hubEvent lines.
	emitHub := func(hydrate []byte) (done bool, err error) {
		for _, ev := range hubEntries(hydrate) {
			if done, err := emit(protocol.TypeHubEvent, ev); done || err != nil {
				return done, err
			}
		}
		return false, nil
	}

	welcomeReplay := slices.Contains(conn.Welcome().Capabilities, protocol.CapReplayEnd)
	if !f.live || !welcomeReplay {
		if done, err := emit(protocol.TypeWelcome, conn.WelcomeFrame()); done || err != nil {
			return err
		}
	}
	lastErr := "" // the last frame, when it was an error frame
	for {
		m, raw, replay, err := conn.Next()
		var fe *client.FrameError
		switch {
		case errors.As(err, &fe):
			// Not decodable, but still a frame: print it as received.
			typ, _ := protocol.PeekType(raw)
			if typ == protocol.TypeHydrate && f.expandHub() && !(f.live && replay) {
				// One bad entry must not hide the others.
				if done, err := emitHub(raw); done || err != nil {
					return err
				}
				continue
			}
			if !(f.live && replay) {
				if done, err := emit(typ, raw); done || err != nil {
					return err
				}
			}
			continue
		case err != nil && ctx.Err() != nil:
			return nil // interrupted
		case errors.Is(err, io.EOF):
			if lastErr != "" {
				return fmt.Errorf("the fleet closed the connection: %s", lastErr)
			}
			return nil
		case err != nil:
			return fmt.Errorf("connection to the fleet lost: %w", err)
		}
		lastErr = ""
		if e, ok := m.(*protocol.Error); ok {
			lastErr = e.Message
		}
		if f.live && replay {
			continue
		}
		if m.MessageType() == protocol.TypeHydrate && f.expandHub() {
			if done, err := emitHub(raw); done || err != nil {
				return err
			}
			continue
		}
		if done, err := emit(m.MessageType(), raw); done || err != nil {
			return err
		}
	}
}

// expandHub reports whether hydrate's hub entries are printed as hubEvent
// lines: hubEvent is selected and hydrate itself is not.
func (f eventFilter) expandHub() bool {
	return slices.Contains(f.types, protocol.TypeHubEvent) && !slices.Contains(f.types, protocol.TypeHydrate)
}

// hubEntries returns the hubEvent objects in a hydrate frame's hub, each
// as a hubEvent frame (an entry may leave its type out; one of another
// type is skipped).
func hubEntries(hydrate []byte) [][]byte {
	var h struct {
		Hub []json.RawMessage `json:"hub"`
	}
	if json.Unmarshal(hydrate, &h) != nil {
		return nil
	}
	out := make([][]byte, 0, len(h.Hub))
	for _, e := range h.Hub {
		e = bytes.TrimSpace(e)
		if len(e) < 2 || e[0] != '{' {
			continue
		}
		var keys map[string]json.RawMessage
		if json.Unmarshal(e, &keys) != nil {
			continue
		}
		typ, ok := keys["type"]
		switch {
		case ok && string(typ) == `"hubEvent"`:
			out = append(out, e)
		case ok:
			continue // another type: not a hub event
		default: // no type key: add it
			body := bytes.TrimSpace(e[1:])
			ev := []byte(`{"type":"hubEvent"`)
			if len(body) > 0 && body[0] != '}' {
				ev = append(ev, ',')
			}
			out = append(out, append(ev, body...))
		}
	}
	return out
}
