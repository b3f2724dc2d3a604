package cli

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/agents-fleet/fleet/config"
	"github.com/agents-fleet/fleet/console/tui"
)

func newConsoleCmd() *cobra.Command {
	var (
		noColor bool
		notify  string
	)
	cmd := &cobra.Command{
		Use:   "console [FLEET]",
		Short: "Open the operator console (a full-screen terminal UI) on a fleet",
		Long: `fleet console is the operator's full-screen view of a fleet: workers with
their git state, tasks, the live feed, a timeline, the pending requests (always
visible when there are any), the conversation, native roots and intel, and a
prompt line. Every action is a key away; ? lists them. FLEET is an id, an id
prefix or a name; with several live fleets and none named, it starts in the
fleet picker. See docs/console.md.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			home, err := config.Home()
			if err != nil {
				return err
			}
			mode, err := consoleNotify(home, cmd.Flags().Changed("notify"), notify)
			if err != nil {
				return err
			}
			cfg := tui.Config{
				RegistryDir: config.RegistryDir(home),
				In:          cmd.InOrStdin(), Out: cmd.OutOrStdout(),
				NoColor: noColor || os.Getenv("NO_COLOR") != "",
				Notify:  mode,
			}
			if len(args) == 1 {
				cfg.Selector = args[0]
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM)
			defer stop()
			return tui.Run(ctx, cfg)
		},
	}
	cmd.Flags().BoolVar(&noColor, "no-color", false, "no colours (also when NO_COLOR is set)")
	cmd.Flags().StringVar(&notify, "notify", defaultNotify, "how a waiting request is signalled when you are not looking: bell, osc9, osc777, any of them comma-separated, or off; default console.notify in config.json, else "+defaultNotify)
	return cmd
}

const defaultNotify = "bell,osc9"

// consoleNotify is the --notify flag when given, else config.json's
// console.notify, else the default; a bad value names where it came from.
func consoleNotify(home string, flagSet bool, flag string) (tui.NotifyMode, error) {
	if flagSet {
		mode, err := tui.ParseNotify(flag)
		if err != nil {
			return 0, fmt.Errorf("--notify: %w", err)
		}
		return mode, nil
	}
	file, err := config.Load(home)
	if err != nil {
		return 0, err
	}
	if file.Console.Notify == "" {
		return tui.ParseNotify(defaultNotify)
	}
	mode, err := tui.ParseNotify(file.Console.Notify)
	if err != nil {
		return 0, fmt.Errorf("%s: field \"console.notify\": %w", config.Path(home), err)
	}
	return mode, nil
}
