package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/agents-fleet/fleet/config"
	"github.com/agents-fleet/fleet/daemon"
)

func newDoctorCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check the fleet home and each provider's CLI",
		Long: `doctor reports what a fleet needs: the fleet home (config.json, directory
modes, live and stale fleets) and, for each provider, the CLI it would run
(path, version, whether that version was verified with the fleet), where the
CLI will send model requests and which credential it will use (never the
secret itself).

Exit status: 0 when the default provider can run and the home is sound, 1
otherwise.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			home, err := config.Home()
			if err != nil {
				return err
			}
			r := daemon.Doctor(cmd.Context(), home, os.Environ())
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				if err := enc.Encode(r); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(out, "fleet home   %s\nconfig.json  %s\nfleets       %d live, %d stale descriptors\n",
					r.Home.Path, r.Home.Config, r.Home.LiveFleets, r.Home.StaleFleets)
				for _, p := range r.Home.Problems {
					fmt.Fprintf(out, "problem      %s\n", p)
				}
				fmt.Fprintf(out, "\ndefault provider: %s\n\n", r.Default)
				tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "PROVIDER\tCLI\tVERSION\tENDPOINT\tCREDENTIALS\tSTATUS")
				for _, p := range r.Providers {
					status := "ok"
					switch {
					case p.Problem != "":
						status = p.Problem
					case !p.Verified:
						status = "ok (version not verified: docs/providers.md)"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", p.Name, dash(p.Path), dash(p.Version), dash(p.Endpoint), dash(p.Credentials), status)
				}
				tw.Flush()
			}
			if !r.OK() {
				return &exitError{code: 1, err: errors.New(r.Why())}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}
