package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/agents-fleet/fleet/config"
	"github.com/agents-fleet/fleet/console"
	"github.com/agents-fleet/fleet/registry"
)

func newLsCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the running fleets that consoles can attach to",
		Long: `ls lists the fleets running with their control socket enabled, read from the
registry directory ($AGENTS_FLEET_REGISTRY_DIR, else <fleetHome>/sockets).
Descriptors left behind by fleets that are no longer running are hidden.

Columns: ID (use it, a unique prefix of it or NAME as the FLEET argument of
attach, events and send), NAME, PID, AGE since start, CWD, and HUB ("yes" when
the fleet opted in to the Telegram hub).`,
		Example: `  fleet ls
  fleet ls --json | jq -r '.[].id'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			home, err := config.Home()
			if err != nil {
				return err
			}
			entries, err := registry.Live(config.RegistryDir(home))
			if err != nil {
				return err
			}
			if asJSON {
				return writeFleetsJSON(cmd.OutOrStdout(), entries)
			}
			return writeFleetsTable(cmd.OutOrStdout(), entries, time.Now())
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array of descriptors ([] when none runs)")
	return cmd
}

func writeFleetsJSON(w io.Writer, entries []registry.Entry) error {
	ds := make([]registry.Descriptor, len(entries))
	for i, e := range entries {
		ds[i] = e.Descriptor
	}
	b, err := json.MarshalIndent(ds, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

func writeFleetsTable(w io.Writer, entries []registry.Entry, now time.Time) error {
	if len(entries) == 0 {
		_, err := fmt.Fprintln(w, "no fleets running")
		return err
	}
	home, _ := os.UserHomeDir()
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tPID\tAGE\tCWD\tHUB")
	for _, e := range entries {
		name := console.Sanitize(e.Name)
		if name == "" {
			name = "-"
		}
		hub := "-"
		if e.HubAttach {
			hub = "yes"
		}
		age := now.Sub(time.UnixMilli(e.StartedAt))
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n",
			console.Sanitize(e.ID), name, e.PID, formatAge(age), console.Sanitize(shortenHome(e.Cwd, home)), hub)
	}
	return tw.Flush()
}

// formatAge formats how long a fleet has run, to the two largest units:
// 42s, 5m, 3h12m, 2d4h.
func formatAge(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	s := int64(d / time.Second)
	switch {
	case s < 60:
		return strconv.FormatInt(s, 10) + "s"
	case s < 3600:
		return strconv.FormatInt(s/60, 10) + "m"
	case s < 86400:
		h, m := s/3600, s%3600/60
		if m == 0 {
			return strconv.FormatInt(h, 10) + "h"
		}
		return fmt.Sprintf("%dh%dm", h, m)
	}
	dd, h := s/86400, s%86400/3600
	if h == 0 {
		return strconv.FormatInt(dd, 10) + "d"
	}
	return fmt.Sprintf("%dd%dh", dd, h)
}

// shortenHome writes a path under the user's home directory as ~/….
func shortenHome(p, home string) string {
	if home == "" || p == "" {
		return p
	}
	if p == home {
		return "~"
	}
	if rest, ok := strings.CutPrefix(p, home+string(filepath.Separator)); ok {
		return "~" + string(filepath.Separator) + rest
	}
	return p
}
