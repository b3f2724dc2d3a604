package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/agents-fleet/fleet/config"
	"github.com/agents-fleet/fleet/daemon"
	"github.com/agents-fleet/fleet/landing"
	"github.com/agents-fleet/fleet/protocol"
	"github.com/agents-fleet/fleet/worktree"
)

// workerArgHelp is the WORKER paragraph of the landing commands' help.
const workerArgHelp = `WORKER is a worker id (w3) of a fleet that ran in this repository,
SESSION/w3 with a unique prefix of the session id, or the branch
fleet/SESSION/w3. When several sessions have the worker, the most recently
active one is used (--session picks another). The repository is the one
containing the current directory; the fleet need not be running.`

// landFlags are the flags every landing command has.
type landFlags struct{ session string }

func (f *landFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.session, "session", "", "the session whose worker it is (an id or a unique prefix)")
}

// resolve finds WORKER in the repository containing the current directory.
func (f *landFlags) resolve(cmd *cobra.Command, spec string) (landing.Found, error) {
	cwd, err := os.Getwd()
	if err != nil {
		return landing.Found{}, err
	}
	found, err := landing.Resolve(cmd.Context(), cwd, spec, f.session, recentSessions(cmd.Context()))
	if err != nil {
		return landing.Found{}, err
	}
	if found.Chosen != "" {
		fmt.Fprintln(cmd.ErrOrStderr(), "fleet:", found.Chosen)
	}
	return found, nil
}

// recentSessions lists the saved sessions' ids, most recently active
// first; nil when there is no store (or it cannot be read).
func recentSessions(ctx context.Context) []string {
	home, err := config.Home()
	if err != nil {
		return nil
	}
	st, err := daemon.OpenExistingStore(home)
	if err != nil {
		return nil
	}
	defer st.Close()
	list, err := st.Sessions(ctx)
	if err != nil {
		return nil
	}
	ids := make([]string, len(list))
	for i, s := range list {
		ids[i] = s.ID
	}
	return ids
}

// refuseRunning refuses to land the work of a worker that is still running.
func refuseRunning(f landing.Found) error {
	if f.Running == "" {
		return nil
	}
	return fmt.Errorf("%s is still running (%s); wait for it to settle, or /cancel it in the fleet", f.Name, f.Running)
}

func newDiffCmd() *cobra.Command {
	var (
		lf   landFlags
		stat bool
	)
	cmd := &cobra.Command{
		Use:   "diff WORKER [PATH...]",
		Short: "Show a worker's change against its base branch",
		Long: `diff shows what a worker changed against the commit its branch started from
on the base branch (the merge-base): its commits and what its worktree has
uncommitted, untracked files included. PATHs limit it to those files.
Coloured on a terminal, plain when piped; --stat prints the summary only.

` + workerArgHelp,
		Example: `  fleet diff w3
  fleet diff w3 --stat
  fleet diff w3 src/main.go | less -R`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := lf.resolve(cmd, args[0])
			if err != nil {
				return err
			}
			return worktree.Diff(cmd.Context(), cmd.OutOrStdout(), f.Repo, f.Branch, f.Path, worktree.DiffOptions{
				Stat: stat, Color: colorOutput(cmd.OutOrStdout()), Paths: args[1:],
			})
		},
	}
	lf.add(cmd)
	cmd.Flags().BoolVar(&stat, "stat", false, "print the diff stat only")
	return cmd
}

func newLogCmd() *cobra.Command {
	var lf landFlags
	cmd := &cobra.Command{
		Use:   "log WORKER",
		Short: "Show the commits on a worker's branch that its base branch lacks",
		Long: `log shows the worker's commits since its branch left the base branch, each
with its files. Uncommitted work is not a commit: fleet diff shows it.

` + workerArgHelp,
		Example: "  fleet log w3",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := lf.resolve(cmd, args[0])
			if err != nil {
				return err
			}
			return worktree.Log(cmd.Context(), cmd.OutOrStdout(), f.Repo, f.Branch, colorOutput(cmd.OutOrStdout()))
		},
	}
	lf.add(cmd)
	return cmd
}

func newMergeCmd() *cobra.Command {
	var (
		lf             landFlags
		squash, rebase bool
		into           string
	)
	cmd := &cobra.Command{
		Use:   "merge WORKER [--squash|--rebase] [--into BRANCH]",
		Short: "Merge a worker's branch into its base branch",
		Long: `merge lands a settled worker's work on the base branch (the branch the fleet
started on), or on --into BRANCH. By default it makes a merge commit naming
the task; --squash makes one commit of the whole change; --rebase replays the
worker's commits on top of the target and fast-forwards it. Uncommitted work
in the worker's worktree is committed on its branch first.

It refuses, and changes nothing, when the target branch is checked out with
uncommitted changes, when the merge would conflict (it lists the files), or
when the worker is still running. The dry run and the merge never touch your
work tree except to move the checked-out target forward once the result is
made; your repository is never left half-merged. The worker is then shown as
merged, and its worktree can be cleaned up.

` + workerArgHelp,
		Example: `  fleet merge w3
  fleet merge w3 --squash
  fleet merge w3 --rebase --into release`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if squash && rebase {
				return usageErr("choose one of --squash and --rebase")
			}
			mode := worktree.MergeCommit
			if squash {
				mode = worktree.Squash
			} else if rebase {
				mode = worktree.Rebase
			}
			f, err := lf.resolve(cmd, args[0])
			if err != nil {
				return err
			}
			if err := refuseRunning(f); err != nil {
				return err
			}
			msg, err := landing.Merge(cmd.Context(), f.Worker, mode, into)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), msg)
			return nil
		},
	}
	lf.add(cmd)
	cmd.Flags().BoolVar(&squash, "squash", false, "squash the worker's change into one commit")
	cmd.Flags().BoolVar(&rebase, "rebase", false, "rebase the worker's commits onto the target and fast-forward it")
	cmd.Flags().StringVar(&into, "into", "", "the branch to merge into (default: the worker's base branch)")
	return cmd
}

func newApplyCmd() *cobra.Command {
	var lf landFlags
	cmd := &cobra.Command{
		Use:   "apply WORKER [PATH...]",
		Short: "Put a worker's change into your working tree, uncommitted",
		Long: `apply copies a worker's change (its commits and its uncommitted work) into the
work tree containing the current directory, as uncommitted and unstaged
changes, so you can adjust and commit it yourself. PATHs take only those
files. When the change does not apply cleanly nothing is changed and the
files in the way are listed.

` + workerArgHelp,
		Example: `  fleet apply w3
  fleet apply w3 src/parser.go docs/parser.md`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := lf.resolve(cmd, args[0])
			if err != nil {
				return err
			}
			if err := refuseRunning(f); err != nil {
				return err
			}
			cwd, err := os.Getwd()
			if err != nil {
				return err
			}
			msg, err := landing.Apply(cmd.Context(), cwd, f.Worker, args[1:])
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), msg)
			return nil
		},
	}
	lf.add(cmd)
	return cmd
}

func newPRCmd() *cobra.Command {
	var (
		lf     landFlags
		draft  bool
		remote string
	)
	cmd := &cobra.Command{
		Use:   "pr WORKER [--draft]",
		Short: "Push a worker's branch and open a pull request",
		Long: `pr hands a worker's work on for review: it pushes the branch to the remote and
opens a pull request with gh (title from the task, body from the task and the
diff stat), when gh is installed and authenticated. Without gh it pushes
nothing and prints the exact commands to run. With landing.prCommand set in
config.json it pushes and runs that command instead of gh, with the pull
request in its environment (FLEET_PR_BRANCH, FLEET_PR_BASE, FLEET_PR_REMOTE,
FLEET_PR_TITLE, FLEET_PR_BODY, FLEET_PR_DRAFT, FLEET_WORKER, FLEET_SESSION).

Running fleet pr is your decision to push. A push a worker or a console asks
for (/pr in a fleet) goes through the fleet's confirm policy instead.

` + workerArgHelp,
		Example: `  fleet pr w3
  fleet pr w3 --draft --remote upstream`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, file, err := config.LoadHome()
			if err != nil {
				return err
			}
			f, err := lf.resolve(cmd, args[0])
			if err != nil {
				return err
			}
			if err := refuseRunning(f); err != nil {
				return err
			}
			if remote == "" {
				remote = file.Landing.Remote
			}
			return landing.PR(cmd.Context(), f.Worker, landing.PROptions{
				Draft: draft, Remote: remote, Hook: file.Landing.PRCommand, Out: cmd.OutOrStdout(),
			})
		},
	}
	lf.add(cmd)
	cmd.Flags().BoolVar(&draft, "draft", false, "open the pull request as a draft")
	cmd.Flags().StringVar(&remote, "remote", "", "the remote to push to (default landing.remote, else origin)")
	return cmd
}

func newWorkersCmd() *cobra.Command {
	var (
		lf     landFlags
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "workers",
		Short: "List the fleet workers' branches in this repository with their git state",
		Long: `workers lists every fleet worker branch of the repository containing the
current directory (or of one --session): its worktree, commits ahead of and
behind its base branch, uncommitted files, changed files with line counts,
whether it merges cleanly now, and whether it was merged. A running fleet
shows the same state live in fleetState (workers[].git) and /workers.`,
		Example: `  fleet workers
  fleet workers --json | jq '.[] | select(.git.mergeable == false)'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cwd, err := os.Getwd()
			if err != nil {
				return err
			}
			repo, branches, err := worktree.FleetBranches(cmd.Context(), cwd)
			if err != nil {
				return err
			}
			type row struct {
				Session      string              `json:"session"`
				Worker       string              `json:"worker"`
				Branch       string              `json:"branch"`
				WorktreePath string              `json:"worktreePath,omitempty"`
				Running      bool                `json:"running"`
				Task         string              `json:"task,omitempty"`
				Git          *protocol.WorkerGit `json:"git"`
			}
			rows := []row{}
			for _, b := range branches {
				if lf.session != "" && !strings.HasPrefix(b.Session, lf.session) {
					continue
				}
				w := landing.Of(repo, b)
				st, err := worktree.ReadState(cmd.Context(), repo, b.Branch, w.Path)
				if err != nil {
					return fmt.Errorf("%s: %w", b.Branch, err)
				}
				rows = append(rows, row{b.Session, b.Worker, b.Branch, b.Path, b.Running != "", b.Task, landing.Wire(st)})
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(rows)
			}
			if len(rows) == 0 {
				fmt.Fprintln(out, "no fleet workers in", repo)
				return nil
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "WORKER\tSESSION\tFILES\t+/-\tAHEAD/BEHIND\tUNCOMMITTED\tSTATE\tTASK")
			for _, r := range rows {
				g := r.Git
				fmt.Fprintf(tw, "%s\t%s\t%d\t+%d -%d\t%d/%d %s\t%d\t%s\t%s\n", r.Worker, r.Session, g.FilesChanged,
					g.LinesAdded, g.LinesRemoved, g.Ahead, g.Behind, g.BaseBranch, g.Uncommitted, landState(r.Running, g), r.Task)
			}
			return tw.Flush()
		},
	}
	lf.add(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// landState is one word or two on where a worker's work stands.
func landState(running bool, g *protocol.WorkerGit) string {
	switch {
	case running:
		return "running"
	case g.Merged:
		return "merged into " + g.MergedInto
	case g.WorktreeMissing && g.Ahead == 0:
		return "worktree gone"
	case g.FilesChanged == 0 && g.Ahead == 0:
		return "no changes"
	case g.Mergeable == nil:
		return "unknown"
	case *g.Mergeable:
		return "mergeable"
	}
	return "conflicts"
}
