package cli

import (
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/agents-fleet/fleet/config"
	"github.com/agents-fleet/fleet/web"
)

func newWebCmd() *cobra.Command {
	var (
		addr, fleet, logLevel string
		openIt                bool
	)
	cmd := &cobra.Command{
		Use:   "web",
		Short: "Serve the operator console in a browser, on loopback",
		Long: `fleet web serves the operator console to a browser: every fleet on this
machine (a picker; --fleet preselects one), live over Server-Sent Events, with
its workers, transcripts, conversation, requests (approve, deny, answer) and a
prompt box. It listens on loopback only (default ` + web.DefaultAddr + `; port 0
picks one; config.json web.addr) and prints one URL with a fresh token: the first
request trades the token for a cookie. To use it from another machine, forward a
port over SSH. See docs/web.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var level slog.Level
			if err := level.UnmarshalText([]byte(logLevel)); err != nil {
				return usageErr("--log-level %q: use debug, info, warn or error", logLevel)
			}
			home, file, err := config.LoadHome()
			if err != nil {
				return err
			}
			if addr == "" && file.Web != nil {
				addr = file.Web.Addr
			}
			if addr == "" {
				addr = web.DefaultAddr
			}
			if err := web.CheckAddr(addr); err != nil {
				return usageErr("%v", err)
			}
			out := cmd.OutOrStdout()
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return web.Serve(ctx, web.Config{
				Addr: addr, RegistryDir: config.RegistryDir(home), Fleet: fleet,
				Logger: slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level})),
				Ready: func(url string) {
					fmt.Fprintln(out, url)
					if openIt {
						if err := openBrowser(url); err != nil {
							fmt.Fprintf(cmd.ErrOrStderr(), "fleet web: could not open a browser (%v); open the URL above\n", err)
						}
					}
				},
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&addr, "addr", "", "where to listen, on loopback (default web.addr of config.json, else "+web.DefaultAddr+"; port 0 picks one)")
	f.BoolVar(&openIt, "open", false, "open the URL in the default browser")
	f.StringVar(&fleet, "fleet", "", "the fleet to show first (id or name)")
	f.StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn or error")
	return cmd
}

// openBrowser opens url in the user's browser.
func openBrowser(url string) error {
	var c *exec.Cmd
	switch runtime.GOOS {
	case "windows":
		c = exec.Command("rundll32", "url.dll,FileProtocolHandler", url)
	case "darwin":
		c = exec.Command("open", url)
	default:
		c = exec.Command("xdg-open", url)
	}
	if err := c.Start(); err != nil {
		return err
	}
	go c.Wait() // reaped; the browser outlives it
	return nil
}
