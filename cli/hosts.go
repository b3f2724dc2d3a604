package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/agents-fleet/fleet/config"
	"github.com/agents-fleet/fleet/hosts"
	"github.com/agents-fleet/fleet/hosts/naming"
)

// appliedWait bounds how long a hosts command waits for the running fleet
// to take its change in.
const appliedWait = 10 * time.Second

func newHostsCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "hosts",
		Short: "List the worker hosts enrolled with this fleet home, and enrol, drain or remove them",
		Long: `hosts lists the machines enrolled to run this fleet's workers (fleet hosts add),
with their state: up (heard from within the lease, hosts.leaseMs), lost (not
heard from for the lease, or no fleet listens for hosts), draining (up, takes
no new workers) or never-joined. It reads <fleetHome>/hosts: hosts.json, and
status.json, which the fleet that listens for hosts (fleet run --hosts-listen)
keeps current; no fleet needs to run. See docs/hosts.md.

--json prints an array of {name, state, slots, labels, running, lastSeenMs,
address, providers: [{name, version, verified}]}.`,
		Example: `  fleet hosts add gpu1 --slots 8 --labels gpu --advertise fleet.example:7422
  fleet hosts
  fleet hosts --json | jq -r '.[] | select(.state == "up") | .name'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			home, err := config.Home()
			if err != nil {
				return err
			}
			list, err := hosts.List(hosts.Dir(home), time.Now())
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(list)
			}
			return writeHostsTable(cmd.OutOrStdout(), list, time.Now())
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON array ([] when none is enrolled)")
	cmd.AddCommand(newHostsAddCmd(), newHostsDrainCmd(), newHostsRemoveCmd())
	return cmd
}

func writeHostsTable(w io.Writer, list []hosts.HostStatus, now time.Time) error {
	if len(list) == 0 {
		_, err := fmt.Fprintln(w, "no hosts enrolled (fleet hosts add NAME)")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATE\tSLOTS\tRUNNING\tLABELS\tADDRESS\tLAST SEEN\tPROVIDERS")
	for _, h := range list {
		seen := "-"
		if h.LastSeenMs != 0 {
			seen = now.Sub(time.UnixMilli(h.LastSeenMs)).Round(time.Second).String() + " ago"
		}
		provs := make([]string, len(h.Providers))
		for i, p := range h.Providers {
			provs[i] = p.Name
			if v := shortVersion(p.Version); v != "" {
				provs[i] += " " + v
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\n", h.Name, h.State, h.Slots, h.Running,
			orDash(strings.Join(h.Labels, ",")), orDash(h.Address), seen, orDash(strings.Join(provs, ", ")))
	}
	return tw.Flush()
}

// shortVersion is the version number in what a CLI printed ("codex-cli
// 0.171.0" is 0.171.0, "2.1.197 (Claude Code)" is 2.1.197): its first word
// that starts with a digit, else all of it.
func shortVersion(v string) string {
	for _, w := range strings.Fields(v) {
		if w[0] >= '0' && w[0] <= '9' {
			return w
		}
	}
	return v
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newHostsAddCmd() *cobra.Command {
	var (
		slots     int
		labels    string
		out       string
		advertise string
	)
	cmd := &cobra.Command{
		Use:   "add NAME",
		Short: "Enrol a worker host and write its join file",
		Long: `add enrols NAME (1-63 of a-z, 0-9 and '-') and writes its join file: the
address hosts dial, this fleet's CA certificate (the host trusts nothing
else), and a credential minted for NAME alone, whose only copy is that file
(the fleet keeps its public key). The file is 0600; copy it to the host, run
"fleet join FILE" there, and delete this copy. The first add makes the CA and
the hub's certificate in <fleetHome>/hosts.

The address is --advertise, else hosts.advertise in config.json, else the
one the running fleet listens on for hosts, else hosts.listen when it names
one address. A running fleet takes the new host in at once.`,
		Example: `  fleet hosts add h1 --advertise 10.0.0.1:7422
  fleet hosts add gpu1 --slots 8 --labels gpu,big --out - | ssh gpu1 'umask 077; cat > fleet.join'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if err := naming.CheckName(name); err != nil {
				return usageErr("%v", err)
			}
			if err := naming.CheckSlots(slots); err != nil {
				return usageErr("--slots: %v", err)
			}
			ls, err := naming.ParseLabels(labels)
			if err != nil {
				return usageErr("--labels: %v", err)
			}
			home, file, err := config.LoadHome()
			if err != nil {
				return err
			}
			dir := hosts.Dir(home)
			addr, err := hubAddress(advertise, file, dir)
			if err != nil {
				return err
			}
			if out == "" {
				out = name + ".join"
			}
			path := out
			if out != "-" {
				if path, err = filepath.Abs(out); err != nil {
					return err
				}
			}
			gen, err := hosts.Enrol(dir, hosts.Enrolment{Name: name, Slots: slots, Labels: ls, Hub: addr}, func(j hosts.JoinFile) error {
				if out == "-" {
					data, err := j.Encode()
					if err != nil {
						return err
					}
					_, err = cmd.OutOrStdout().Write(data)
					return err
				}
				return hosts.WriteJoinFile(path, j)
			})
			if err != nil {
				return err
			}
			stderr := cmd.ErrOrStderr()
			fmt.Fprintf(stderr, "enrolled %s: %d slots, labels %s, dialling %s\n", name, slots, orDash(strings.Join(ls, ",")), addr)
			if out != "-" {
				fmt.Fprintf(stderr, "join file: %s (0600: it holds %s's credential). Copy it to the host, run `fleet join %s` there, and delete this copy.\n",
					path, name, filepath.Base(path))
			}
			reportApplied(stderr, dir, gen, name+" can join the running fleet now", "")
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&slots, "slots", naming.DefaultSlots, "how many workers the host runs at once (the host's --slots overrides it)")
	f.StringVar(&labels, "labels", "", "labels for placement, comma-separated (a-z, 0-9, '.', '_', '-')")
	f.StringVar(&out, "out", "", "where to write the join file: a new file, or - for stdout (default NAME.join here)")
	f.StringVar(&advertise, "advertise", "", "the host:port hosts dial (default hosts.advertise, else the running fleet's, else hosts.listen)")
	return cmd
}

// hubAddress is the address a new host dials: --advertise, else
// hosts.advertise, else the running hub's, else hosts.listen when it names
// one host.
func hubAddress(flag string, file config.File, dir string) (string, error) {
	if flag != "" {
		if err := config.CheckHostsAdvertise(flag); err != nil {
			return "", usageErr("--advertise %v", err)
		}
		return flag, nil
	}
	if a := file.Hosts.Advertise; a != "" {
		return a, nil
	}
	if st, err := hosts.ReadStatus(dir); err == nil && st.Live() && st.Advertise != "" {
		return st.Advertise, nil
	}
	if l := file.Hosts.Listen; l != "" && config.CheckHostsAdvertise(l) == nil {
		return l, nil
	}
	return "", usageErr("fleet hosts add needs the address hosts dial: give --advertise HOST:PORT, or set hosts.advertise (or hosts.listen) in %s", config.Path(filepath.Dir(dir)))
}

// reportApplied says whether the running fleet has taken change gen in.
func reportApplied(w io.Writer, dir string, gen int64, applied, none string) {
	running, ok := hosts.WaitApplied(dir, gen, appliedWait)
	switch {
	case ok:
		fmt.Fprintln(w, applied)
	case running:
		fmt.Fprintf(w, "warning: the running fleet has not taken the change in after %v; its log says why\n", appliedWait)
	case none != "":
		fmt.Fprintln(w, none)
	}
}

func newHostsDrainCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "drain NAME",
		Short: "Give a host no new workers; the ones it runs finish",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return changeHost(cmd, args[0], hosts.Drain, "draining: it takes no new workers", "")
		},
	}
}

func newHostsRemoveCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "remove NAME",
		Short: "Remove a host: its credential stops working and a connected host is cut off",
		Long: `remove removes NAME from the fleet home: its credential stops working, the
running fleet cuts it off at once, and its data on the fleet's side (its
streams and buckets) is deleted. Enrol it again with fleet hosts add for a
new join file.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return changeHost(cmd, args[0], hosts.Remove, "removed; the running fleet has cut it off",
				"removed; its credential is refused from the next fleet run on")
		},
	}
}

// changeHost applies change to host name and reports whether the running
// fleet took it in.
func changeHost(cmd *cobra.Command, name string, change func(dir, name string) (int64, error), applied, none string) error {
	home, err := config.Home()
	if err != nil {
		return err
	}
	dir := hosts.Dir(home)
	gen, err := change(dir, name)
	if err != nil {
		return err
	}
	if none == "" {
		none = applied
	}
	reportApplied(cmd.OutOrStdout(), dir, gen, name+" "+applied, name+" "+none)
	return nil
}
