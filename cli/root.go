// Package cli is the fleet command line: one cobra command per subcommand.
// cmd/fleet only calls Execute.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"

	"github.com/spf13/cobra"

	"github.com/agents-fleet/fleet/config"
)

// Version is set at build time with -ldflags "-X github.com/agents-fleet/fleet/cli.Version=…".
var Version = "dev"

// exitError carries a process exit code through cobra.
type exitError struct {
	code int
	err  error
	// cmd, when set, makes it a usage error of cmd: Execute prints the
	// command's path, the error and its usage line.
	cmd *cobra.Command
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
	root.AddCommand(newRunCmd(), newLsCmd(), newAttachCmd(), newEventsCmd(), newSendCmd(), newPendingCmd(), newAnswerCmd(), newSessionsCmd(), newWorktreesCmd(), newWorkersCmd(), newDiffCmd(), newLogCmd(), newMergeCmd(), newApplyCmd(), newPRCmd(), newIntelCmd(), newExperimentCmd(), newNativeRootCmd(), newHubCmd(), newConsoleCmd(), newWebCmd(), newDoctorCmd(), newHostsCmd(), newJoinCmd(), newVersionCmd())
	argsWithUsage(root)
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

// unknownCommand is cobra's error for a subcommand fleet does not have.
var unknownCommand = regexp.MustCompile(`^unknown command "(.*?)" for "fleet"`)

// Execute runs the command line and returns the process exit code: 0
// success, 2 a usage error (a bad flag, argument or config.json, refused
// before anything started), 1 any other failure; some commands document
// more (fleet root, fleet answer).
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
	if m := unknownCommand.FindStringSubmatch(err.Error()); m != nil {
		err = unknownCommandErr(root, m[1])
	}
	var ee *exitError
	if errors.As(err, &ee) && ee.cmd != nil {
		fmt.Fprintf(stderr, "%s: %v\nusage: %s\n", ee.cmd.CommandPath(), ee.err, usageLine(ee.cmd))
		return ee.code
	}
	fmt.Fprintln(stderr, "fleet:", err)
	switch {
	case ee != nil:
		return ee.code
	case errors.As(err, new(*config.FileError)):
		return exitUsage
	}
	return 1
}

// usageLine is cmd's usage line; a group of subcommands shows [command].
func usageLine(cmd *cobra.Command) string {
	if !cmd.Runnable() && cmd.HasAvailableSubCommands() {
		return cmd.CommandPath() + " [command]"
	}
	return cmd.UseLine()
}

// Main is the binary's entry point.
func Main() {
	exit(Execute(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
