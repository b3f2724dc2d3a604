package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/agents-fleet/fleet/config"
	"github.com/agents-fleet/fleet/daemon"
	"github.com/agents-fleet/fleet/intel"
)

func newIntelCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "intel",
		Short: "Show what the fleet's intelligence store knows, without a running fleet",
		Long: `intel reads <fleetHome>/intel/fleet-intel.db, the record of every session's
agent runs (provider, model, task, outcome, tokens, tools), failures by class,
skills, operator steering and experiments, and prints what a console's
fleetIntel and fleetStore snapshots show: the summary, the top errors, the
suggestions with their evidence (accept or dismiss them in a fleet with
/fleet-intel accept|dismiss ID), skill use, entity counts, the sessions that
spent the most tokens and recent steering. docs/intel.md explains every
figure and rule.

--json prints {"fleetIntel", "fleetEvolution", "fleetStore",
"fleetExperiment", "suggestions"} as the socket carries them; before any
fleet has made the store, it prints those of an empty one.`,
		Example: "  fleet intel\n  fleet intel --json | jq '.suggestions[] | select(.state == \"pending\")'",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			snap, sugg, err := readIntel(cmd.Context(), asJSON)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return writeIntelJSON(out, snap, sugg)
			}
			writeIntel(out, snap, sugg)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the snapshots as JSON")

	var olderThan time.Duration
	prune := &cobra.Command{
		Use:   "prune",
		Short: "Delete sessions older than a retention period from the intel store",
		Long: `prune deletes the sessions that ended (or started, when they never ended)
longer ago than the retention period, with their runs, tools and steering.
The period is --older-than, else intel.retentionDays in config.json (default
180 days). Skills, their evolution, experiments and suggestion decisions are
kept. A running fleet prunes by intel.retentionDays when it starts.`,
		Example: "  fleet intel prune\n  fleet intel prune --older-than 2160h   # 90 days",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("older-than") && olderThan <= 0 {
				return usageErr("--older-than must be positive, e.g. 720h")
			}
			if olderThan <= 0 {
				_, file, err := config.LoadHome()
				if err != nil {
					return err
				}
				if olderThan = file.IntelRetention(); olderThan <= 0 {
					fmt.Fprintln(cmd.OutOrStdout(), "intel.retentionDays is 0 (keep everything): nothing pruned; --older-than prunes anyway")
					return nil
				}
			}
			home, err := config.Home()
			if err != nil {
				return err
			}
			st, err := daemon.OpenExistingIntel(home)
			if err != nil {
				return err
			}
			defer st.Close()
			res, err := st.Prune(cmd.Context(), time.Now().Add(-olderThan))
			if err != nil {
				return err
			}
			age := olderThan.String()
			if olderThan%(24*time.Hour) == 0 {
				age = fmt.Sprintf("%d days", olderThan/(24*time.Hour))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "pruned %d session(s), %d run(s), %d steering record(s) older than %s\n", res.Sessions, res.Runs, res.Steering, age)
			return nil
		},
	}
	prune.Flags().DurationVar(&olderThan, "older-than", 0, "delete sessions older than this (e.g. 2160h for 90 days; default intel.retentionDays)")
	cmd.AddCommand(prune)
	return cmd
}

// readIntel reads the snapshots and the suggestions from the fleet home's
// intel store. Without a store yet, JSON gets the snapshots of an empty
// one (a script asked for them); a person gets the hint that no fleet
// has run.
func readIntel(ctx context.Context, asJSON bool) (intel.Snapshots, []intel.Suggestion, error) {
	home, err := config.Home()
	if err != nil {
		return intel.Snapshots{}, nil, err
	}
	st, err := daemon.OpenExistingIntel(home)
	if errors.Is(err, daemon.ErrNoStore) && asJSON {
		return intel.EmptySnapshots(time.Now()), nil, nil
	}
	if err != nil {
		return intel.Snapshots{}, nil, err
	}
	defer st.Close()
	now := time.Now()
	snap, err := st.Snapshots(ctx, now)
	if err != nil {
		return intel.Snapshots{}, nil, err
	}
	sugg, err := st.Suggestions(ctx, now)
	if err != nil {
		return intel.Snapshots{}, nil, err
	}
	return snap, sugg, nil
}

// writeIntelJSON prints the snapshots as the socket carries them, and the
// suggestions (every state).
func writeIntelJSON(out io.Writer, snap intel.Snapshots, sugg []intel.Suggestion) error {
	type suggestion struct {
		ID         string  `json:"id"`
		Rule       string  `json:"rule"`
		Title      string  `json:"title"`
		Evidence   string  `json:"evidence"`
		Confidence float64 `json:"confidence"`
		State      string  `json:"state"`
		CreatedAt  int64   `json:"createdAt"`
	}
	rows := make([]suggestion, 0, len(sugg))
	for _, s := range sugg {
		rows = append(rows, suggestion{s.ID, s.Rule, s.Title, s.Evidence, s.Confidence, s.State, s.CreatedAt})
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(map[string]any{
		"fleetIntel": snap.Intel, "fleetEvolution": snap.Evolution, "fleetStore": snap.Store,
		"fleetExperiment": snap.Experiment, "suggestions": rows,
	})
}

func writeIntel(out io.Writer, snap intel.Snapshots, sugg []intel.Suggestion) {
	ev, ex, xp := snap.Evolution, snap.Store, snap.Experiment
	s := snap.Intel.Summary
	fmt.Fprintf(out, "%d session(s), %d agent run(s), %d failed, success rate %.1f%%, %d tokens", s.SessionCount, s.TotalAgentRuns, s.FailedRuns, s.SuccessRate*100, s.TotalTokens)
	if s.AvgSessionDurationMs > 0 {
		fmt.Fprintf(out, ", %s per session on average", time.Duration(s.AvgSessionDurationMs*float64(time.Millisecond)).Round(time.Second))
	}
	fmt.Fprintln(out)
	if len(s.TopErrors) > 0 {
		fmt.Fprintln(out, "\nTop errors:")
		for _, e := range s.TopErrors {
			fmt.Fprintf(out, "  %4d× %s\n", e.Count, e.Message)
		}
	}
	fmt.Fprintln(out, "\nSuggestions:")
	if len(sugg) == 0 {
		fmt.Fprintln(out, "  none: no rule fires on the data so far")
	}
	for _, sg := range sugg {
		fmt.Fprintf(out, "  %s  %-9s %-20s %.2f  %s\n      evidence: %s\n", sg.ID, sg.State, sg.Rule, sg.Confidence, sg.Title, sg.Evidence)
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	if len(ev.Skills) > 0 {
		fmt.Fprintln(tw, "\nSKILL\tUSES\tSUCCESS\tEVOLUTIONS")
		for _, sk := range ev.Skills {
			fmt.Fprintf(tw, "%s\t%d\t%.0f%%\t%d\n", sk.Name, sk.Uses, sk.SuccessRate*100, sk.EvolutionCount)
		}
	}
	for _, sh := range ev.Shadows {
		fmt.Fprintf(tw, "shadow %s of %s\t%s\n", sh.ID, sh.Skill, sh.Summary)
	}
	fmt.Fprintln(tw, "\nSESSION\tSTARTED\tTOKENS\tRUNS\tFAILED")
	for _, se := range ex.Sessions {
		failed := int64(0)
		if se.FailedRuns != nil {
			failed = *se.FailedRuns
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\n", se.ID, time.UnixMilli(se.StartedAt).Format("2006-01-02 15:04"), se.TotalTokens, se.AgentRuns, failed)
	}
	tw.Flush()
	var counts []string
	for _, c := range ex.Counts {
		counts = append(counts, fmt.Sprintf("%s %d", c.Name, c.Count))
	}
	fmt.Fprintf(out, "\nStored: %s\n", strings.Join(counts, ", "))
	if len(ex.Steering) > 0 {
		fmt.Fprintln(out, "\nRecent steering:")
		for _, st := range ex.Steering {
			fmt.Fprintf(out, "  %s  %-8s %s\n", time.UnixMilli(st.CreatedAt).Format("01-02 15:04"), st.Source, oneLine(st.Text, 100))
		}
	}
	for _, e := range xp.Experiments {
		fmt.Fprintf(out, "\nExperiment %s (%s): %s", e.ID, e.Status, e.Name)
		if e.LatestRun != nil {
			if e.LatestRun.Winner != "" {
				fmt.Fprintf(out, ", winner %s", e.LatestRun.Winner)
			} else {
				fmt.Fprint(out, ", no winner")
			}
		}
		fmt.Fprintln(out)
	}
}

func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > max {
		return string(r[:max-1]) + "…"
	}
	return s
}
