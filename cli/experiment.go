package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/agents-fleet/fleet/config"
	"github.com/agents-fleet/fleet/daemon"
	"github.com/agents-fleet/fleet/experiment"
	"github.com/agents-fleet/fleet/intel"
	"github.com/agents-fleet/fleet/skill"
	"github.com/agents-fleet/fleet/worktree"
)

// saveTimeout bounds saving a run into the intel store.
const saveTimeout = 30 * time.Second

func newExperimentCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "experiment",
		Short: "Run A/B experiments on agent configurations",
	}
	var (
		asJSON   bool
		parallel int
		keep     bool
	)
	run := &cobra.Command{
		Use:   "run FILE [--json] [--parallel N] [--keep]",
		Short: "Run an experiment file and say which variant, if any, passes more often",
		Long: `run runs the experiment FILE describes (JSON; docs/experiments.md has the
format): every task, samples times, by every variant (2 to 8 arms of
provider, model, prompt template and skill; the first is the control). Each
sample runs in a fresh git worktree of the repository containing the current
directory, which is removed afterwards (--keep leaves them, with their
branches, under <fleetHome>/worktrees/exp-<run>). After the task, the file's
check runs with sh -c in the worktree: exit 0 is a pass. Task and check see
FLEET_EXPERIMENT_ID, FLEET_EXPERIMENT_VARIANT, FLEET_EXPERIMENT_SAMPLE and
FLEET_EXPERIMENT_TASK.

The report gives each variant's samples, passes, pass rate, mean duration,
mean tokens and lift against the control, then the stated test: Fisher's
exact test (two-sided) of the arm with the highest pass rate against the next
highest; the best arm wins when p < 0.05, otherwise the data cannot tell. The
run is saved in the intel store (fleet intel shows it); when the store is
unavailable the report says so on stderr and is printed all the same.

Samples run one at a time unless --parallel. Ctrl-C stops the run: running
sessions are closed and their worktrees removed. Exit status 0 when every
sample ran (whatever passed), 1 when a sample could not be run at all (no
worktree, a provider that did not start) or the run was interrupted, 2 when
the file is invalid.`,
		Example: `  fleet experiment run docs/examples/experiment-local.json
  fleet experiment run prompts.json --parallel 4
  fleet experiment run prompts.json --json | jq '.run.variants[] | {variant, passRate}'
  fleet experiment run prompts.json --keep   # inspect the samples' worktrees`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErr("want one argument, the experiment FILE; got %d", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if parallel < 1 || parallel > experiment.MaxParallel {
				return usageErr("--parallel %d: want 1..%d", parallel, experiment.MaxParallel)
			}
			f, err := experiment.Load(args[0])
			if err != nil {
				if errors.Is(err, experiment.ErrInvalid) {
					return usageErr("%w", err)
				}
				return err
			}
			return runExperiment(cmd, f, parallel, keep, asJSON)
		},
	}
	run.Flags().BoolVar(&asJSON, "json", false, "print the experiment and its run as JSON")
	run.Flags().IntVar(&parallel, "parallel", 1, "how many samples run at once")
	run.Flags().BoolVar(&keep, "keep", false, "keep the samples' worktrees and branches")
	run.SetFlagErrorFunc(flagUsageErr)
	cmd.AddCommand(run)
	return cmd
}

func runExperiment(cmd *cobra.Command, f *experiment.File, parallel int, keep, asJSON bool) error {
	home, file, err := config.LoadHome()
	if err != nil {
		return err
	}
	// Every provider, as a fleet builds them: the variants name theirs.
	sel, err := daemon.SelectProvider("local", "", file)
	if err != nil {
		return err
	}
	ps, err := daemon.BuildProviders(sel, file, nil)
	if err != nil {
		return err
	}
	cwd, err := os.Getwd()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	stderr := cmd.ErrOrStderr()
	var mu sync.Mutex // Progress and Warn may be called concurrently
	say := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintln(stderr, "fleet:", s)
	}
	res, err := experiment.Run(ctx, f, experiment.Options{
		Dir:       cwd,
		FleetHome: home,
		Providers: ps.All(),
		Parallel:  parallel,
		Keep:      keep,
		Skills:    experimentSkills(ctx, cwd, home),
		Progress:  func(s experiment.Sample) { say(experiment.SampleLine(s)) },
		Warn:      say,
	})
	if err != nil {
		return err
	}
	saved := saveExperimentRun(ctx, home, f, res, say)
	out := cmd.OutOrStdout()
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false) // task texts are shell: keep their > and && readable
		err = enc.Encode(struct {
			Experiment *experiment.File   `json:"experiment"`
			Run        *experiment.Result `json:"run"`
			Saved      bool               `json:"saved"`
		}{f, res, saved})
	} else {
		err = experiment.WriteReport(out, f, res)
	}
	if err != nil {
		return err
	}
	if res.SetupErrors > 0 {
		return &exitError{code: 1, err: fmt.Errorf("%d of %d sample(s) could not be run; the figures count only the others", res.SetupErrors, len(res.Samples))}
	}
	return nil
}

// experimentSkills reads skills as a fleet in cwd's repository does; the
// version is the intel store's (0 when it is unavailable).
func experimentSkills(ctx context.Context, cwd, home string) func(string) (string, int, error) {
	return func(name string) (string, int, error) {
		repo := ""
		if r, err := worktree.TopLevel(ctx, cwd); err == nil {
			repo = r
		}
		sk, err := skill.Find(skill.Dirs(repo, home), name)
		if err != nil {
			return "", 0, err
		}
		st, err := daemon.OpenIntel(home)
		if err != nil {
			return sk.Content, 0, nil
		}
		defer st.Close()
		v, err := st.RegisterSkill(ctx, name, sk.Content)
		if err != nil {
			return sk.Content, 0, nil
		}
		return sk.Content, v.Version, nil
	}
}

// saveExperimentRun saves the run into the intel store and reports whether
// it did; when it could not, say tells why (the report is printed anyway).
func saveExperimentRun(ctx context.Context, home string, f *experiment.File, res *experiment.Result, say func(string)) bool {
	st, err := daemon.OpenIntel(home)
	if err != nil {
		say(fmt.Sprintf("the run is not saved: %v", err))
		return false
	}
	defer st.Close()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), saveTimeout)
	defer cancel()
	run := intel.ExperimentRun{
		ID: res.ID, ExperimentID: f.ID, StartedAt: res.StartedAt, CompletedAt: res.CompletedAt,
		Winner: res.Winner, Test: res.Test, PValue: res.PValue,
	}
	for _, v := range res.Variants {
		run.Variants = append(run.Variants, intel.VariantResult{
			Variant: v.Variant, Samples: v.Samples, Passed: v.Passed, MeanDurationMs: v.MeanDurationMs,
			MeanTokens: v.MeanTokens, Mean: v.Mean, PassRate: v.PassRate, Lift: v.Lift,
		})
	}
	e := intel.Experiment{ID: f.ID, Name: f.Name, Hypothesis: f.Hypothesis, Variants: f.VariantNames(), CreatedAt: res.StartedAt}
	if err := st.SaveExperiment(ctx, e, run); err != nil {
		say(fmt.Sprintf("the run is not saved: %v", err))
		return false
	}
	return true
}
