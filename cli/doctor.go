package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/charmbracelet/x/ansi"
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
			} else if err := writeDoctor(out, r); err != nil {
				return err
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

// doctorWidth is the width fleet doctor's report fits in.
const doctorWidth = 100

// writeDoctor writes the report as labelled lines, one block per provider,
// every line at most doctorWidth columns: long values (paths, problems)
// wrap under their value's column.
func writeDoctor(w io.Writer, r daemon.Report) error {
	var b strings.Builder
	field := func(indent, label string, labelWidth int, value string) {
		lead := indent + label + strings.Repeat(" ", max(1, labelWidth-len(label)))
		for i, line := range wrapText(value, doctorWidth-len(lead)) {
			if i > 0 {
				lead = strings.Repeat(" ", len(lead))
			}
			b.WriteString(lead + line + "\n")
		}
	}
	field("", "fleet home", 13, r.Home.Path)
	field("", "config.json", 13, r.Home.Config)
	field("", "fleets", 13, fmt.Sprintf("%d live, %d stale descriptors", r.Home.LiveFleets, r.Home.StaleFleets))
	for _, p := range r.Home.Problems {
		field("", "problem", 13, p)
	}
	b.WriteString("\n")
	field("", "default provider:", 18, r.Default)
	for _, p := range r.Providers {
		b.WriteString("\n")
		status := "ok"
		switch {
		case p.Problem != "":
			status = "not ready: " + p.Problem
		case !p.Verified:
			status = "ok (version not verified: docs/providers.md)"
		}
		field("", p.Name, 9, status)
		field("  ", "cli", 13, dash(p.Path))
		field("  ", "version", 13, dash(p.Version))
		field("  ", "endpoint", 13, dash(p.Endpoint))
		field("  ", "credentials", 13, dash(p.Credentials))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// wrapText breaks s into lines of at most width columns at spaces; a word
// longer than a line (a path) is broken after a "/" where it can be, else
// where it must.
func wrapText(s string, width int) []string {
	width = max(width, 20)
	var lines []string
	line := ""
	for _, word := range strings.Fields(s) {
		switch {
		case line == "":
		case ansi.StringWidth(line)+1+ansi.StringWidth(word) <= width:
			line += " " + word
			continue
		default:
			lines = append(lines, line)
		}
		for ansi.StringWidth(word) > width {
			head := ansi.Truncate(word, width, "")
			if i := strings.LastIndex(head, "/"); i > 0 {
				head = head[:i+1]
			}
			lines = append(lines, head)
			word = word[len(head):]
		}
		line = word
	}
	if line != "" || len(lines) == 0 {
		lines = append(lines, line)
	}
	return lines
}
