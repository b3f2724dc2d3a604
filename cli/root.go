// Package cli is the fleet command line: one cobra command per subcommand.
// cmd/fleet only calls Execute.
package cli

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
)

// Version is set at build time with -ldflags "-X github.com/agents-fleet/fleet/cli.Version=…".
var Version = "dev"

// exitError carries a process exit code through cobra.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// NewRootCmd builds the fleet command tree.
func NewRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "fleet",
		Short: "Run a fleet of coding agents and attach consoles to it",
		Long: `fleet runs a fleet session: a coordinator that turns prompts into tasks and
workers that run them in parallel. With --control-socket the session listens
on a local, token-protected socket that consoles attach to (fleet attach,
fleet events, fleet send, or any program that speaks NDJSON).`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newRunCmd(), newLsCmd(), newAttachCmd(), newEventsCmd(), newSendCmd(), newSessionsCmd(), newWorktreesCmd(), newWorkersCmd(), newDiffCmd(), newLogCmd(), newMergeCmd(), newApplyCmd(), newPRCmd(), newIntelCmd(), newExperimentCmd(), newRootCmd(), newHubCmd(), newConsoleCmd(), newDoctorCmd(), newVersionCmd())
	return root
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the fleet version and the protocol version it speaks",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fmt.Fprintf(cmd.OutOrStdout(), "fleet %s (control socket protocol 1)\n", Version)
			return nil
		},
	}
}

// Execute runs the command line and returns the process exit code.
func Execute(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := NewRootCmd()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	fmt.Fprintln(stderr, "fleet:", err)
	if ee, ok := err.(*exitError); ok {
		return ee.code
	}
	return 1
}

// Main is the binary's entry point.
func Main() {
	os.Exit(Execute(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
