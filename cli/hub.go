package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/agents-fleet/fleet/config"
	"github.com/agents-fleet/fleet/console"
	"github.com/agents-fleet/fleet/hub"
)

func newHubCmd() *cobra.Command {
	var (
		fl         hub.Flags
		chats      []int64
		logLevel   string
		cpuProfile string
	)
	cmd := &cobra.Command{
		Use:   "hub",
		Short: "Run the Telegram hub for every fleet on this machine that opted in",
		Long: `fleet hub is a Telegram bot that attaches to the fleets started with --hub
(after you approve each one in the chat), posts their confirmations and
questions with buttons, their failures and replies, and sends your answers
and prompts back. It is configured by the telegramHub object of config.json
(botTokenFile, allowedChatIds, allowedUserIds, apiBaseUrl, verbosity); the
flags win over it. See docs/hub.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var level slog.Level
			if err := level.UnmarshalText([]byte(logLevel)); err != nil {
				return fmt.Errorf("--log-level %q: use debug, info, warn or error", logLevel)
			}
			home, file, err := config.LoadHome()
			if err != nil {
				return err
			}
			fl.AllowedChats = chats
			cfg, err := hub.Resolve(home, file, fl)
			if err != nil {
				return err
			}
			cfg.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
			stopProfile, err := startCPUProfile(cpuProfile)
			if err != nil {
				return err
			}
			defer stopProfile()
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return hub.Run(ctx, cfg)
		},
	}
	f := cmd.Flags()
	f.StringVar(&fl.BotTokenFile, "bot-token-file", "", "file with the bot token (mode 0600, yours); default telegramHub.botTokenFile")
	f.Int64SliceVar(&chats, "allowed-chat-id", nil, "a chat the hub talks to (repeatable); default telegramHub.allowedChatIds")
	f.StringVar(&fl.APIBaseURL, "api-base-url", "", "Bot API server (default telegramHub.apiBaseUrl, else "+hub.DefaultAPIBaseURL+")")
	f.StringVar(&fl.Verbosity, "verbosity", "", "quiet, normal or verbose (default telegramHub.verbosity, else normal)")
	f.StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn or error")
	f.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the hub to this file (for performance work)")
	cmd.AddCommand(newHubStatusCmd())
	return cmd
}

func newHubStatusCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the running hub's fleets and the health of its Bot API link",
		Long: `fleet hub status asks the hub running for this fleet home for the fleets it
knows (id, name, folder, state) and the health of its Telegram link (last
successful poll, last error). It exits 0 when a hub runs, 1 when none does.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			home, err := config.Home()
			if err != nil {
				return err
			}
			s, err := hub.QueryStatus(cmd.Context(), home)
			if err != nil {
				if errors.Is(err, hub.ErrNoHub) {
					return &exitError{code: 1, err: err}
				}
				return err
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(s)
			}
			return printHubStatus(cmd.OutOrStdout(), s, time.Now())
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the status as JSON")
	return cmd
}

func printHubStatus(w io.Writer, s *hub.Status, now time.Time) error {
	ago := func(ms int64) string {
		if ms == 0 {
			return "never"
		}
		return now.Sub(time.UnixMilli(ms)).Round(time.Second).String() + " ago"
	}
	t := s.Telegram
	health := "healthy"
	switch {
	case t.Conflict:
		health = "CONFLICT (409: another process polls with this token, or a webhook is set)"
	case t.Deaf:
		health = "DEAF (getUpdates has not succeeded for a while)"
	case !t.Healthy:
		health = "not healthy"
	}
	fmt.Fprintf(w, "hub pid %d, up %s, verbosity %s, chats %s\n", s.PID, now.Sub(time.UnixMilli(s.StartedAt)).Round(time.Second), s.Verbosity, joinInts(s.Chats))
	fmt.Fprintf(w, "telegram: %s; last successful poll %s; %d polls", health, ago(t.LastPoll), t.Polls)
	if t.LastError != "" {
		fmt.Fprintf(w, "; last error %s: %s", ago(t.LastErrorAt), console.Sanitize(t.LastError))
	}
	fmt.Fprintf(w, "\nsent %d, edited %d, dropped %d, slowed down %d times\n", s.Outbox.Sent, s.Outbox.Edited, s.Outbox.Dropped, s.Outbox.RetryAfter)
	if len(s.Fleets) == 0 {
		fmt.Fprintln(w, "no fleets (a fleet started with --hub asks to attach)")
		return nil
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tCWD\tSTATE\tPENDING")
	for _, f := range s.Fleets {
		state := f.State
		if f.Detail != "" {
			state += " (" + f.Detail + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", console.Sanitize(f.ID), console.Sanitize(f.Name), console.Sanitize(f.Cwd), console.Sanitize(state), f.Pending)
	}
	return tw.Flush()
}

func joinInts(v []int64) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, ",")
}
