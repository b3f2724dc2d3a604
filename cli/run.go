package cli

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"runtime/pprof"
	"runtime/trace"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/agents-fleet/fleet/config"
	"github.com/agents-fleet/fleet/daemon"
)

type runOptions struct {
	controlSocket bool
	hub           bool
	nativeRoot    bool
	noNativeRoot  bool
	provider      string
	model         string
	workers       int
	name          string
	resume        string
	headless      bool
	statusEvery   time.Duration
	requestTTL    time.Duration
	logLevel      string
	cpuProfile    string
	memProfile    string
	traceFile     string
	hostsListen   string
}

func newRunCmd() *cobra.Command {
	var o runOptions
	cmd := &cobra.Command{
		Use:   "run [PROMPT]",
		Short: "Start a fleet session in the current directory",
		Long: `Start a fleet session in the current directory with the embedded local
provider: a prompt line "$ <command>" becomes a task that a worker runs with
sh -c. Up to --workers tasks run at once; the rest wait.

With --control-socket (or AGENTS_FLEET_CONTROL_SOCKET=1, or "controlSocket": true
in <fleetHome>/config.json) the session listens on a token-protected Unix
socket and registers itself so that "fleet ls" finds it and "fleet attach",
"fleet events" and "fleet send" can talk to it. --hub also marks the fleet
for the Telegram hub (and implies the socket). With --hosts-listen it also
listens for worker hosts (fleet hosts, fleet join; docs/hosts.md).

In a terminal, run is an interactive console of its own; with --headless, or
when stdin is not a terminal, it runs without one until SIGINT or SIGTERM.
On shutdown running tasks are stopped, pending questions resolve as
"cancelled", and the socket, token and descriptor are removed.`,
		Example: `  # a fleet that consoles can attach to, running two tasks at first
  fleet run --control-socket --workers 2 '$ go test ./...'

  # in another terminal
  fleet ls
  fleet attach`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			prompt := ""
			if len(args) == 1 {
				prompt = args[0]
			}
			return runFleet(cmd, o, prompt)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.controlSocket, "control-socket", false, "listen on a control socket that consoles attach to")
	f.BoolVar(&o.hub, "hub", false, "opt in to the Telegram hub (implies --control-socket)")
	f.BoolVar(&o.nativeRoot, "native-root", false, "start a native-root session (durable operator controls)")
	f.BoolVar(&o.noNativeRoot, "no-native-root", false, "start a legacy session (the default)")
	f.StringVar(&o.provider, "provider", "", "provider: local (shell commands), claude, codex or copilot (agent CLIs); default config.json \"provider\", else local")
	f.StringVar(&o.model, "model", "", "the agent provider's model (default providers.<name>.model, else the CLI's own)")
	f.IntVar(&o.workers, "workers", config.DefaultWorkers, "how many tasks run at once")
	f.StringVar(&o.name, "name", "", "session name (default: the directory's name)")
	f.StringVar(&o.resume, "resume", "", "resume a saved session")
	f.StringVar(&o.hostsListen, "hosts-listen", "", "listen for worker hosts on HOST:PORT (TLS; docs/hosts.md); default hosts.listen in config.json, else none")
	f.BoolVar(&o.headless, "headless", false, "run without the terminal console (implied when stdin is not a terminal)")
	f.DurationVar(&o.statusEvery, "status-interval", time.Second, "how often status and fleetState are sent when something changed")
	f.DurationVar(&o.requestTTL, "request-ttl", 30*time.Minute, "how long a confirm or ask waits before it expires")
	f.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	f.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the run to this file (for performance work)")
	f.MarkHidden("status-interval")
	f.StringVar(&o.traceFile, "trace", "", "write a Go execution trace of the run to this file (for performance work)")
	f.StringVar(&o.memProfile, "memprofile", "", "write an allocation profile of the run to this file when it ends (for performance work)")
	f.MarkHidden("cpuprofile")
	f.MarkHidden("memprofile")
	f.MarkHidden("trace")
	cmd.MarkFlagsMutuallyExclusive("native-root", "no-native-root")
	return cmd
}

// runFleet is `fleet run`: resolve settings, start the engine and (when
// enabled) the control socket, serve until a signal, shut down cleanly.
func runFleet(cmd *cobra.Command, o runOptions, prompt string) error {
	flags := cmd.Flags()
	if o.statusEvery < 10*time.Millisecond {
		return fmt.Errorf("--status-interval %s: must be at least 10ms", o.statusEvery)
	}
	if o.requestTTL <= 0 {
		return fmt.Errorf("--request-ttl %s: must be positive", o.requestTTL)
	}
	stopProfile, err := startCPUProfile(o.cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	if o.memProfile != "" {
		mf, err := os.Create(o.memProfile)
		if err != nil {
			return fmt.Errorf("--memprofile: %w", err)
		}
		defer mf.Close()
		defer pprof.Lookup("allocs").WriteTo(mf, 0)
	}
	if o.traceFile != "" {
		tf, err := os.Create(o.traceFile)
		if err != nil {
			return fmt.Errorf("--trace: %w", err)
		}
		defer tf.Close()
		if err := trace.Start(tf); err != nil {
			return fmt.Errorf("--trace: %w", err)
		}
		defer trace.Stop()
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		// A soft heap target: the fan-out's garbage is short-lived frames,
		// and without it the heap doubles past the live set during bursts.
		// GOMEMLIMIT overrides it; Go caps GC work if the live set is larger.
		debug.SetMemoryLimit(defaultMemoryLimit)
	}
	if os.Getenv("GOGC") == "" {
		// Collect at 3× the live heap rather than 2× (the memory limit
		// above still caps it): the live set is small and a burst's frames
		// are garbage within milliseconds, so at the default GC took a
		// tenth of the fan-out's CPU (docs/performance.md).
		debug.SetGCPercent(defaultGCPercent)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return fmt.Errorf("--log-level %q: use debug, info, warn or error", o.logLevel)
	}

	home, file, err := config.LoadHome()
	if err != nil {
		return err
	}
	var fl config.Flags
	if flags.Changed("control-socket") {
		fl.ControlSocket = &o.controlSocket
	}
	if flags.Changed("hub") {
		fl.Hub = &o.hub
	}
	if flags.Changed("workers") {
		fl.Workers = &o.workers
	}
	if flags.Changed("name") {
		fl.Name = &o.name
	}
	if flags.Changed("hosts-listen") {
		fl.HostsListen = &o.hostsListen
	}
	sw, err := config.Resolve(fl, file, nil)
	if err != nil {
		return err
	}
	cwd, err := os.Getwd()
	if err != nil {
		return fmt.Errorf("working directory: %w", err)
	}
	name := sw.Name
	if name == "" {
		name = filepath.Base(cwd)
	}

	opts := daemon.Options{
		Home: home, File: file, Switches: sw, Cwd: cwd, Name: name, NameGiven: flags.Changed("name"),
		Provider: o.provider, Model: o.model, Resume: o.resume,
		NativeRoot: o.nativeRoot, NoNativeRoot: o.noNativeRoot, Prompt: prompt,
		RequestTTL: o.requestTTL, StatusEvery: o.statusEvery, LogLevel: level,
		Stdout: cmd.OutOrStdout(), Stderr: cmd.ErrOrStderr(),
	}
	if stdinFile, isFile := cmd.InOrStdin().(*os.File); !o.headless && isFile && term.IsTerminal(int(stdinFile.Fd())) {
		opts.Terminal = stdinFile
	}
	return daemon.Run(cmd.Context(), opts)
}

// defaultMemoryLimit is the soft heap limit of `fleet run` (GOMEMLIMIT
// overrides it).
const defaultMemoryLimit = 48 << 20

// defaultGCPercent is the GOGC of `fleet run` (the GOGC variable overrides
// it).
const defaultGCPercent = 200
