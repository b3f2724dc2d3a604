package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/agents-fleet/fleet/config"
	"github.com/agents-fleet/fleet/daemon"
	"github.com/agents-fleet/fleet/worktree"
)

func newSessionsCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "sessions",
		Short: "List saved fleet sessions",
		Long: `sessions lists the fleet sessions saved in <fleetHome>/state/fleet.db, newest
activity first: id, name, mode, when it started and was last active, its task
counts and the directory it ran in. Resume one with fleet run --resume ID (a
unique prefix of the id is enough).`,
		Example: "  fleet sessions\n  fleet sessions --json | jq '.[0].id'\n  fleet run --resume 3f2a",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			home, err := config.Home()
			if err != nil {
				return err
			}
			st, err := daemon.OpenExistingStore(home)
			if errors.Is(err, daemon.ErrNoStore) {
				if asJSON {
					fmt.Fprintln(cmd.OutOrStdout(), "[]")
				} else {
					fmt.Fprintln(cmd.OutOrStdout(), "no saved sessions")
				}
				return nil
			}
			if err != nil {
				return err
			}
			defer st.Close()
			list, err := st.Sessions(cmd.Context())
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				type row struct {
					ID         string `json:"id"`
					Name       string `json:"name"`
					Cwd        string `json:"cwd"`
					Mode       string `json:"mode"`
					StartedAt  int64  `json:"startedAt"`
					LastActive int64  `json:"lastActive"`
					Tasks      any    `json:"tasks"`
				}
				rows := make([]row, 0, len(list))
				for _, s := range list {
					rows = append(rows, row{s.ID, s.Name, s.Cwd, s.Mode, s.StartedAt, s.LastActive, map[string]int{
						"pending": s.Tasks.Pending, "running": s.Tasks.Running, "blocked": s.Tasks.Blocked,
						"done": s.Tasks.Done, "failed": s.Tasks.Failed, "total": s.Tasks.Total,
					}})
				}
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(rows)
			}
			if len(list) == 0 {
				fmt.Fprintln(out, "no saved sessions")
				return nil
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tNAME\tMODE\tSTARTED\tLAST ACTIVE\tTASKS (done/failed/total)\tCWD")
			for _, s := range list {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d/%d/%d\t%s\n", s.ID, s.Name, s.Mode,
					time.UnixMilli(s.StartedAt).Format("2006-01-02 15:04"), ago(s.LastActive),
					s.Tasks.Done, s.Tasks.Failed, s.Tasks.Total, s.Cwd)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func ago(ms int64) string {
	d := time.Since(time.UnixMilli(ms)).Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return fmt.Sprintf("%dd ago", int(d.Hours()/24))
}

func newWorktreesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "worktrees",
		Short: "Manage the git worktrees fleet workers leave for review",
	}
	var (
		opts    worktree.PruneOptions
		session string
	)
	prune := &cobra.Command{
		Use:   "prune",
		Short: "Remove fleet worktrees of this repository whose work is safe elsewhere",
		Long: `prune removes the worktrees that fleet workers created for the repository
containing the current directory, across sessions (or of one --session), and
their branches fleet/<session>/<worker>. It never loses work: a worktree with
uncommitted changes or untracked files is kept, and so is one whose branch has
commits that are on no other branch, tag or remote and were not merged
(fleet merge), unless --force. With --force the worktree goes but its branch
is kept, commits and all, unless --delete-branch. A worktree a running fleet
worker uses is always kept. Worktrees whose directory was deleted or moved by
hand lose only their registration; their branches follow the same rules.`,
		Example: `  fleet worktrees prune
  fleet worktrees prune --session 3f2a
  fleet worktrees prune --force
  fleet worktrees prune --force --delete-branch`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.DeleteBranch && !opts.Force {
				return usageErr("--delete-branch needs --force (without it, branches whose work is safe elsewhere are deleted anyway)")
			}
			home, err := config.Home()
			if err != nil {
				return err
			}
			cwd, err := os.Getwd()
			if err != nil {
				return err
			}
			if session != "" {
				if opts.Session, err = sessionOfPrefix(cmd.Context(), cwd, session); err != nil {
					return err
				}
			}
			removed, skipped, err := worktree.Prune(cmd.Context(), cwd, filepath.Join(home, "worktrees"), opts)
			out := cmd.OutOrStdout()
			for _, r := range removed {
				fmt.Fprintln(out, "removed", r)
			}
			for _, s := range skipped {
				fmt.Fprintln(out, "kept", s)
			}
			if err != nil {
				return err
			}
			if len(removed) == 0 && len(skipped) == 0 {
				fmt.Fprintln(out, "no fleet worktrees for this repository")
			}
			return nil
		},
	}
	prune.Flags().BoolVarP(&opts.Force, "force", "f", false, "also remove worktrees with uncommitted changes or unmerged commits (their branches are kept)")
	prune.Flags().BoolVar(&opts.DeleteBranch, "delete-branch", false, "with --force, delete the branches too")
	prune.Flags().StringVar(&session, "session", "", "only this session's worktrees (its id)")
	cmd.AddCommand(prune)
	return cmd
}

// sessionOfPrefix is the session of this repository's fleet branches that
// prefix names (an id or a unique prefix of one).
func sessionOfPrefix(ctx context.Context, dir, prefix string) (string, error) {
	_, branches, err := worktree.FleetBranches(ctx, dir)
	if err != nil {
		return "", err
	}
	found := map[string]bool{}
	for _, b := range branches {
		if strings.HasPrefix(b.Session, prefix) {
			found[b.Session] = true
		}
	}
	switch len(found) {
	case 0:
		return "", fmt.Errorf("no session %s has fleet branches in this repository", prefix)
	case 1:
		for s := range found {
			return s, nil
		}
	}
	return "", fmt.Errorf("%q names %d sessions; give more of the id", prefix, len(found))
}
