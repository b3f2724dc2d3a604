package cli

import (
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/agents-fleet/fleet/config"
	"github.com/agents-fleet/fleet/daemon"
	"github.com/agents-fleet/fleet/hostagent"
	"github.com/agents-fleet/fleet/hosts"
	"github.com/agents-fleet/fleet/hosts/naming"
)

func newJoinCmd() *cobra.Command {
	var (
		slots    int
		labels   string
		workDir  string
		logLevel string
	)
	cmd := &cobra.Command{
		Use:   "join FILE",
		Short: "Run this machine as a worker host of the fleet whose join file FILE is",
		Long: `join makes this machine a worker host of a fleet: it dials the fleet's hub at
the address in FILE (written by fleet hosts add on the fleet's machine), with
TLS checked against the fleet's CA alone and the host's own credential, and
tries again for ever while the link is down. It tells the fleet its slots,
labels and the providers it can run (the local shell, and claude, codex and
copilot when their CLIs are found, as config.json's providers on this
machine say), every third of the fleet's lease. It runs the workers the
fleet places on it, each in a worktree under --work-dir, and sends their
work back by git after every turn. SIGINT or SIGTERM stop it once its
workers are stopped and their last work and output are sent.

FILE must be readable by you alone (chmod 600): it holds the credential. See
docs/hosts.md.`,
		Example: `  fleet join h1.join
  fleet join gpu1.join --slots 4 --labels gpu --work-dir /srv/fleet-work`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var level slog.Level
			if err := level.UnmarshalText([]byte(logLevel)); err != nil {
				return usageErr("--log-level %q: use debug, info, warn or error", logLevel)
			}
			j, err := hosts.ReadJoinFile(args[0])
			if err != nil {
				return err
			}
			cfg := hostagent.Config{Join: j, Version: Version, Env: os.Environ()}
			if cmd.Flags().Changed("slots") {
				if err := naming.CheckSlots(slots); err != nil {
					return usageErr("--slots: %v", err)
				}
				cfg.Slots = slots
			}
			if cmd.Flags().Changed("labels") {
				if cfg.Labels, err = naming.ParseLabels(labels); err != nil {
					return usageErr("--labels: %v", err)
				}
				if cfg.Labels == nil {
					cfg.Labels = []string{} // --labels "": none, not the file's
				}
			}
			home, file, err := config.LoadHome()
			if err != nil {
				return err
			}
			// The same adapters, settings and probes as a fleet on this
			// machine would use.
			provs, err := daemon.BuildProviders(daemon.Selection{Provider: "local"}, file, nil)
			if err != nil {
				return err
			}
			cfg.Providers = provs.All()
			cfg.WorkDir = workDir
			if cfg.WorkDir == "" {
				cfg.WorkDir = filepath.Join(home, "host", j.Name)
			}
			if cfg.WorkDir, err = filepath.Abs(cfg.WorkDir); err != nil {
				return err
			}
			cfg.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if err := hostagent.Run(ctx, cfg); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "fleet join: %s stopped\n", j.Name)
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&slots, "slots", 0, "how many workers this host runs at once (default: the join file's)")
	f.StringVar(&labels, "labels", "", "labels for placement, comma-separated (default: the join file's)")
	f.StringVar(&workDir, "work-dir", "", "where this host keeps its work (default <fleetHome>/host/NAME)")
	f.StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn or error")
	return cmd
}
