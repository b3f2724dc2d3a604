package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/agents-fleet/fleet/client"
	"github.com/agents-fleet/fleet/console"
	"github.com/agents-fleet/fleet/protocol"
)

// This file is fleet root: the native roots of a fleet (docs/native-roots.md),
// not to be confused with the cobra root command of cli/root.go.

// exitConflict is fleet root's exit code for revision_conflict or
// operation_id_reused: re-read the root's status and decide again (DESIGN
// §8; 0 success, 1 any other failure, exitUsage a usage error).
const exitConflict = 3

// nativeRootDefaultTimeout bounds one fleet root command by default.
const nativeRootDefaultTimeout = 30 * time.Second

// ackReminder follows every receipt: a receipt says the change was
// persisted, not that the fleet reached it.
const ackReminder = "acknowledged only: the change is recorded durably; follow 'fleet root status %s' for the phase the fleet actually reaches\n"

// optionality of a per-action flag.
type need int

const (
	unused need = iota
	optional
	required
)

// nativeRootAction describes one subcommand of fleet root: the action's
// request fields from the page's action table, as flags.
type nativeRootAction struct {
	name    string
	short   string
	long    string
	example string

	rootArg    bool // takes ROOT
	mutation   bool // needs --operation-id (generated if omitted) and --revision
	task       need
	holdHash   need
	rationale  need
	supersedes need
	proof      need
}

var nativeRootActions = []nativeRootAction{
	{
		name:  protocol.NativeList,
		short: "List the fleet's native roots",
		long: `list prints every root of the fleet: its id, revision, intent (what an
operator asked for), phase (what the fleet actually reached) and, for a root
opened by reclassify, the root it replaced.`,
		example: `  fleet root list
  fleet root list --fleet api-refactor --json`,
	},
	{
		name:    protocol.NativeStatus,
		short:   "Show a root's intent and phase, holds, decisions, tasks, effects and pending receipts",
		rootArg: true,
		long: `status prints the full state of a root: its revision (pass it as --revision to
the next mutation), its intent next to the phase the fleet actually reached,
its grant, then its holds (the hold hash release needs), evidence-pinned
decisions, tasks (with the evidence hash approve/deny pin), effects (with the
proof id reconcile accepts) and receipts still pending.`,
		example: `  fleet root status
  fleet root status ROOT_ID --json`,
	},
	pauseLike(protocol.NativePause, "Ask a root (or one of its tasks) to pause",
		`pause records pause intent: nothing new starts; work already running goes on.`),
	pauseLike(protocol.NativeResume, "Ask a paused root (or one of its tasks) to resume",
		`resume records run intent again after pause.`),
	pauseLike(protocol.NativeStop, "Ask a root (or one of its tasks) to stop",
		`stop records stop intent: nothing new starts and running work is asked to
finish; the phase says when the fleet has actually stopped.`),
	pauseLike(protocol.NativeAbort, "Ask a root (or one of its tasks) to abort",
		`abort records abort intent: running work is cancelled; the phase says when
the fleet has actually aborted.`),
	{
		name:     protocol.NativeRelease,
		short:    "Release a hold on a root's work",
		rootArg:  true,
		mutation: true,
		holdHash: required,
		long: `release lifts a hold (a failed task holds itself instead of retrying; an
operator can hold work with /hold). --hold-hash must be the hold's current hash
as shown by fleet root status.`,
		example: `  fleet root release ROOT_ID --revision 4 --hold-hash HOLD_HASH`,
	},
	{
		name:     protocol.NativeReclassify,
		short:    "Open a fresh, empty policy root in place of this one",
		rootArg:  true,
		mutation: true,
		long: `reclassify opens a fresh empty policy root. The old root, its work and its
uncertainty are left unchanged and stay addressable by id. The answer says
whether the session's default root now resolves to the new root
(sessionRebound).`,
		example: `  fleet root reclassify ROOT_ID --revision 7`,
	},
	approveLike(protocol.NativeApprove, "Approve a task that waits for a decision"),
	approveLike(protocol.NativeDeny, "Deny a task that waits for a decision"),
	{
		name:     protocol.NativeManualStart,
		short:    "Start a planned task that has not been attempted yet",
		rootArg:  true,
		mutation: true,
		task:     required,
		long: `manual-start releases an exact reservation that has zero attempts, for example
a task planned while plan mode was on.`,
		example: `  fleet root manual-start ROOT_ID --revision 2 --task t3`,
	},
	{
		name:     protocol.NativeReconcile,
		short:    "Reconcile uncertain work with a worker-settlement proof",
		rootArg:  true,
		mutation: true,
		task:     optional,
		proof:    required,
		long: `reconcile settles uncertainty with --proof, the id of a worker-settlement record
the fleet wrote when a worker settled (see the effects in fleet root status).
Files, claims and Git SHAs are not proof.`,
		example: `  fleet root reconcile ROOT_ID --revision 5 --proof PROOF_ID --task t2`,
	},
	{
		name:     protocol.NativeAbandon,
		short:    "Abandon a root's work (or one task): records stop intent",
		rootArg:  true,
		mutation: true,
		task:     optional,
		long: `abandon records stop intent for the root or one task. It does not claim that
any process has gone; follow the phase and effects in fleet root status.`,
		example: `  fleet root abandon ROOT_ID --revision 6 --task t4`,
	},
}

func pauseLike(name, short, long string) nativeRootAction {
	return nativeRootAction{
		name: name, short: short, rootArg: true, mutation: true, task: optional,
		long:    long + "\n\nWith --task only that task is addressed.",
		example: fmt.Sprintf("  fleet root %s ROOT_ID --revision 3\n  fleet root %s --revision 3 --task t2 --operation-id op-1234", name, name),
	}
}

func approveLike(name, short string) nativeRootAction {
	return nativeRootAction{
		name: name, short: short, rootArg: true, mutation: true,
		task: required, rationale: required, supersedes: optional,
		long: name + ` records an evidence-pinned human decision on a task that waits for one
(not a task status update): it pins the task's current evidence hash and needs a
non-empty --rationale. To replace an earlier decision name it with
--supersedes; a consumed approval can't be rewritten.`,
		example: fmt.Sprintf(`  fleet root %s ROOT_ID --revision 3 --task t2 --rationale "reviewed the command"
  fleet root %s ROOT_ID --revision 4 --task t2 --rationale "changed my mind" --supersedes DECISION_ID`, name, name),
	}
}

const nativeRootCommonHelp = `The fleet is chosen with --fleet: a fleet id, a unique prefix of one, or a
fleet name (see fleet ls); it may be omitted when exactly one fleet is running.`

const nativeRootMutationHelp = `ROOT is the root id (see fleet root list). When it is omitted the fleet's only
root is used; with several roots the command fails and lists them.

--revision is the root's revision you observed (fleet root status); a stale one
is refused as a conflict (exit 3). Without --operation-id a fresh one is
generated and printed on stderr: if the result is uncertain (timeout, lost
connection), retry with that operation id, the same revision and the same
flags, never with a fresh revision. Reusing an operation id for a different
request is refused (exit 3).

The answer is a receipt: the change was persisted durably, which is not the
same as executed, accepted, drained or cancelled. Follow fleet root status for
the phase the fleet actually reaches.

Exit status: 0 success, 1 failure (including a legacy session started without
--native-root), 2 usage error, 3 revision conflict or reused operation id.`

func newNativeRootCmd() *cobra.Command {
	var names []string
	for _, a := range nativeRootActions {
		names = append(names, a.name)
	}
	cmd := &cobra.Command{
		Use:   "root ACTION [ROOT] [flags]",
		Short: "Inspect and control a native fleet's roots",
		Long: `root reads and changes the native roots of a fleet started with --native-root:
durable policy scopes with a revision, an intent (run, pause, stop, abort) and
the phase the fleet actually reached, their tasks, holds, decisions, effects
and pending receipts. Mutations are answered with a durable receipt: persisted,
not completed; follow fleet root status for what actually happens.

A legacy session (started without --native-root) refuses every action.

Actions: ` + strings.Join(names, ", ") + `.

` + nativeRootCommonHelp + `

Exit status: 0 success, 1 failure, 2 usage error, 3 revision conflict or
reused operation id (re-read the root's status and decide again).`,
		Example: `  fleet root list
  fleet root status
  fleet root stop ROOT_ID --revision 3
  fleet root approve ROOT_ID --revision 4 --task t2 --rationale "command reviewed"`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageErr("unknown root action %q (actions: %s)", args[0], strings.Join(names, ", "))
			}
			cmd.SetOut(cmd.ErrOrStderr())
			cmd.Help()
			return usageErr("missing root action (actions: %s)", strings.Join(names, ", "))
		},
	}
	cmd.SetFlagErrorFunc(flagUsageErr)
	for _, a := range nativeRootActions {
		cmd.AddCommand(newNativeRootActionCmd(a))
	}
	return cmd
}

// nativeRootFlags holds one subcommand's flag values.
type nativeRootFlags struct {
	fleet       string
	operationID string
	revision    string
	task        string
	holdHash    string
	rationale   string
	supersedes  string
	proof       string
	asJSON      bool
	timeout     time.Duration
}

func newNativeRootActionCmd(a nativeRootAction) *cobra.Command {
	var f nativeRootFlags
	use := a.name
	if a.rootArg {
		use += " [ROOT]"
	}
	long := a.long + "\n\n"
	if a.mutation {
		long += nativeRootMutationHelp + "\n\n"
	} else if a.rootArg {
		long += "ROOT is the root id (see fleet root list); when it is omitted the fleet's only\nroot is used.\n\n"
	}
	long += nativeRootCommonHelp + "\n\n--json prints the fleet's result object as received."
	cmd := &cobra.Command{
		Use:     use,
		Short:   a.short,
		Long:    long,
		Example: a.example,
		Args: func(cmd *cobra.Command, args []string) error {
			max := 0
			if a.rootArg {
				max = 1
			}
			if len(args) > max {
				if max == 0 {
					return usageErr("%s takes no arguments, got %q", a.name, args)
				}
				return usageErr("%s takes at most one ROOT, got %q", a.name, args)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runNativeRootAction(cmd, a, f, args)
		},
	}
	cmd.SetFlagErrorFunc(flagUsageErr)
	fl := cmd.Flags()
	fl.StringVar(&f.fleet, "fleet", "", "the `FLEET` to talk to (id, unique id prefix or name)")
	if a.mutation {
		fl.StringVar(&f.operationID, "operation-id", "", "durable operation `ID` (1-128 characters; generated and printed when omitted; reuse it to retry)")
		fl.StringVar(&f.revision, "revision", "", "the root's revision `N` you observed (required)")
	}
	stringFlag := func(p *string, n need, name, usage string) {
		switch n {
		case required:
			fl.StringVar(p, name, "", usage+" (required)")
		case optional:
			fl.StringVar(p, name, "", usage)
		}
	}
	stringFlag(&f.task, a.task, "task", "the task `ID` to address")
	stringFlag(&f.holdHash, a.holdHash, "hold-hash", "the hold's current `HASH` (see fleet root status)")
	stringFlag(&f.rationale, a.rationale, "rationale", "why: the decision's non-empty `TEXT`")
	stringFlag(&f.supersedes, a.supersedes, "supersedes", "the `DECISION` id this one replaces")
	stringFlag(&f.proof, a.proof, "proof", "the worker-settlement record `ID` (see the effects in fleet root status)")
	fl.BoolVar(&f.asJSON, "json", false, "print the fleet's result object as JSON")
	fl.DurationVar(&f.timeout, "timeout", nativeRootDefaultTimeout, "give up after this long (0: no limit)")
	return cmd
}

// parseRevision converts the --revision string to expectedRevision: a
// non-negative decimal integer.
func parseRevision(s string) (int64, error) {
	if s == "" {
		return 0, usageErr("--revision is required: pass the root's current revision (see fleet root status)")
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, usageErr("--revision %q is not a revision: want a non-negative integer such as 3", s)
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, usageErr("--revision %q is out of range", s)
	}
	return n, nil
}

// buildNativeRootRequest checks the flags of a and builds its request,
// without rootId when root is empty. Every error is a usage error.
func buildNativeRootRequest(a nativeRootAction, f nativeRootFlags, root string) (*protocol.NativeRequest, error) {
	req := &protocol.NativeRequest{Action: a.name, RootID: root}
	if a.mutation {
		rev, err := parseRevision(f.revision)
		if err != nil {
			return nil, err
		}
		req.ExpectedRevision = &rev
		req.OperationID = f.operationID
	}
	for _, c := range []struct {
		n     need
		name  string
		value string
		dst   *string
	}{
		{a.task, "task", f.task, &req.TaskID},
		{a.holdHash, "hold-hash", f.holdHash, &req.HoldHash},
		{a.rationale, "rationale", f.rationale, &req.Rationale},
		{a.supersedes, "supersedes", f.supersedes, &req.Supersedes},
		{a.proof, "proof", f.proof, &req.ProofID},
	} {
		if c.n == required && strings.TrimSpace(c.value) == "" {
			return nil, usageErr("%s needs a non-empty --%s", a.name, c.name)
		}
		*c.dst = c.value
	}
	// Validate what can be validated before the root and operation id are
	// known, with placeholders for them.
	check := *req
	if check.RootID == "" && a.rootArg {
		check.RootID = "ROOT"
	}
	if check.OperationID == "" && a.mutation {
		check.OperationID = "op-0"
	}
	if err := check.Validate(); err != nil {
		return nil, usageErr("invalid request: %s", strings.TrimPrefix(err.Error(), "nativeRoot: "))
	}
	return req, nil
}

func runNativeRootAction(cmd *cobra.Command, a nativeRootAction, f nativeRootFlags, args []string) error {
	if f.timeout < 0 {
		return usageErr("--timeout must not be negative")
	}
	root := ""
	if len(args) > 0 {
		root = args[0]
		if strings.TrimSpace(root) == "" {
			return usageErr("ROOT must not be empty")
		}
	}
	req, err := buildNativeRootRequest(a, f, root)
	if err != nil {
		return err
	}
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()

	ctx := cmd.Context()
	if f.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.timeout)
		defer cancel()
	}
	e, err := client.Find(f.fleet)
	if err != nil {
		return err
	}
	nc := client.NewNativeClient("root-", func(ctx context.Context) (*client.Conn, error) {
		return client.Dial(ctx, e.Descriptor, client.Options{ClientKind: "other", ClientName: "root"})
	})
	defer nc.Close()
	if err := nc.Connect(ctx); err != nil {
		return timeoutError(ctx, f.timeout, "connecting", err)
	}

	if a.rootArg && req.RootID == "" {
		res, _, err := nativeDo(ctx, nc, protocol.NativeRequest{Action: protocol.NativeList}, f.timeout, "")
		if err != nil {
			return err
		}
		if err := resultError(res); err != nil {
			return err
		}
		if res.Kind != protocol.NativeKindRoots {
			return fmt.Errorf("unexpected %q result to list", res.Kind)
		}
		switch len(res.Roots) {
		case 0:
			return errors.New("the fleet has no roots")
		case 1:
			req.RootID = res.Roots[0].ID
			fmt.Fprintf(stderr, "fleet root: using root %s, the fleet's only root\n", console.Sanitize(req.RootID))
		default:
			var ids []string
			for _, r := range res.Roots {
				ids = append(ids, fmt.Sprintf("%s (revision %d)", console.Sanitize(r.ID), r.Revision))
			}
			return usageErr("the fleet has %d roots; name one as ROOT: %s", len(res.Roots), strings.Join(ids, ", "))
		}
	}
	retry := ""
	if a.mutation {
		given := req.OperationID != ""
		*req = client.NativeMutation("", *req, *req.ExpectedRevision)
		if !given {
			fmt.Fprintf(stderr, "fleet root: operation id %s; retry with --operation-id %s --revision %d if the result is uncertain\n",
				req.OperationID, req.OperationID, *req.ExpectedRevision)
		}
		retry = fmt.Sprintf("; the result is uncertain: retry with the same flags, ROOT %s, --operation-id %s and --revision %d",
			req.RootID, req.OperationID, *req.ExpectedRevision)
		nc.OnRetry = func(r protocol.NativeRequest, why error) {
			fmt.Fprintf(stderr, "fleet root: %v; sending operation %s again with revision %d\n", why, r.OperationID, *r.ExpectedRevision)
		}
	}
	if err := req.Validate(); err != nil {
		return usageErr("invalid request: %s", strings.TrimPrefix(err.Error(), "nativeRoot: "))
	}
	res, raw, err := nativeDo(ctx, nc, *req, f.timeout, retry)
	if err != nil {
		return err
	}
	if f.asJSON {
		if _, err := stdout.Write(append(raw, '\n')); err != nil {
			return err
		}
	}
	if err := resultError(res); err != nil {
		return err
	}
	if f.asJSON {
		return nil
	}
	return renderNativeResult(stdout, a.name, res)
}

// nativeDo makes one call through nc (which retries a mutation's uncertain
// attempts itself) and words its failure for the operator. retry is added
// to errors that leave the outcome of a sent mutation unknown.
func nativeDo(ctx context.Context, nc *client.NativeClient, req protocol.NativeRequest, timeout time.Duration, retry string) (protocol.NativeResult, json.RawMessage, error) {
	res, raw, err := nc.Do(ctx, req)
	switch {
	case err == nil:
		return res, raw, nil
	case errors.Is(err, protocol.ErrFrameTooLarge):
		return res, nil, usageErr("%v", err)
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return res, nil, timeoutError(ctx, timeout, "waiting for the result"+retry, err)
	case ctx.Err() != nil:
		return res, nil, fmt.Errorf("interrupted while waiting for the result%s", retry)
	}
	return res, nil, fmt.Errorf("%w%s", err, retry)
}

// resultError turns a kind error result into the command's error with its
// exit code; other results give nil.
func resultError(res protocol.NativeResult) error {
	if res.Kind != protocol.NativeKindError {
		return nil
	}
	msg := console.Sanitize(res.Message)
	detail := res.Code
	if msg != "" {
		detail += ": " + msg
	}
	switch res.Code {
	case "native_mode_required":
		return &exitError{code: 1, err: fmt.Errorf("the fleet is a legacy session started without --native-root, so it has no native roots to control; start a session with fleet run --native-root (a saved session keeps its mode) (%s)", detail)}
	case "revision_conflict":
		return &exitError{code: exitConflict, err: fmt.Errorf("revision conflict: the root changed since the revision you passed; re-read it with fleet root status and decide again (%s)", detail)}
	case "operation_id_reused":
		return &exitError{code: exitConflict, err: fmt.Errorf("operation id reused: that operation id was already used for a different request; re-read the root with fleet root status and decide again (%s)", detail)}
	}
	return &exitError{code: 1, err: fmt.Errorf("the fleet refused the request: %s", detail)}
}

func renderNativeResult(w io.Writer, action string, res protocol.NativeResult) error {
	switch res.Kind {
	case protocol.NativeKindRoots:
		return renderNativeRoots(w, res.Roots)
	case protocol.NativeKindStatus:
		if res.Root == nil {
			return errors.New("the fleet sent a status result without a root")
		}
		return renderNativeRootStatus(w, res.Root)
	case protocol.NativeKindReceipt:
		if res.Receipt == nil {
			return errors.New("the fleet sent a receipt result without a receipt")
		}
		return renderReceipt(w, res.Receipt)
	case protocol.NativeKindPolicyAdmission:
		return renderPolicyAdmission(w, res)
	}
	return fmt.Errorf("the fleet sent a result of unknown kind %q to %s", console.Sanitize(string(res.Kind)), action)
}

func dash(s string) string {
	s = console.Sanitize(s)
	if s == "" {
		return "-"
	}
	return s
}

func yesNo(b *bool) string {
	switch {
	case b == nil:
		return "unknown"
	case *b:
		return "yes"
	}
	return "no"
}

func renderNativeRoots(w io.Writer, roots []protocol.NativeRootInfo) error {
	if len(roots) == 0 {
		_, err := fmt.Fprintln(w, "no roots")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ROOT\tREVISION\tINTENT\tPHASE\tPREVIOUS")
	for _, r := range roots {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", dash(r.ID), r.Revision, dash(r.Intent), dash(r.Phase)+reachedNote(r.Intent, r.Phase), dash(r.PreviousRootID))
	}
	return tw.Flush()
}

// intentPhase is the phase each intent aims at.
var intentPhase = map[string]string{
	"run":   "running",
	"pause": "paused",
	"stop":  "stopped",
	"abort": "aborted",
}

// reachedNote says whether phase is what intent aims at.
func reachedNote(intent, phase string) string {
	want, ok := intentPhase[intent]
	switch {
	case !ok:
		return ""
	case phase == want:
		return " (reached)"
	}
	return " (not reached yet)"
}

func renderNativeRootStatus(w io.Writer, r *protocol.NativeRootStatus) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "root %s, revision %d\n", dash(r.ID), r.Revision)
	fmt.Fprintf(tw, "intent %s, phase %s%s\n", dash(r.Intent), dash(r.Phase), reachedNote(r.Intent, r.Phase))
	fmt.Fprintf(tw, "grant: session %s, policy %s\n", dash(r.Grant.SessionID), dash(r.Grant.PolicyVersion))
	if r.PreviousRootID != "" {
		fmt.Fprintf(tw, "previous root: %s\n", dash(r.PreviousRootID))
	}
	section := func(name string, n int, header string) bool {
		if n == 0 {
			fmt.Fprintf(tw, "%s: none\n", name)
			return false
		}
		fmt.Fprintf(tw, "%s (%d):\n  %s\n", name, n, header)
		return true
	}
	if section("holds", len(r.Holds), "HASH\tTASK\tREASON") {
		for _, h := range r.Holds {
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", dash(h.HoldHash), dash(h.TaskID), dash(h.Reason))
		}
	}
	if section("decisions", len(r.Decisions), "ID\tVERDICT\tTASK\tCONSUMED\tSUPERSEDES\tRATIONALE") {
		for _, d := range r.Decisions {
			consumed := "no"
			if d.Consumed {
				consumed = "yes"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", dash(d.ID), dash(d.Verdict), dash(d.TaskID), consumed, dash(d.Supersedes), dash(d.Rationale))
		}
	}
	if section("tasks", len(r.Tasks), "ID\tSTATE\tATTEMPTS\tEVIDENCE\tSUBJECT") {
		for _, t := range r.Tasks {
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\t%s\n", dash(t.ID), dash(t.State), t.Attempts, dash(t.EvidenceHash), dash(t.Subject))
		}
	}
	if section("effects", len(r.Effects), "ID\tTASK\tKIND\tSTATE\tPROOF") {
		for _, e := range r.Effects {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", dash(e.ID), dash(e.TaskID), dash(e.Kind), dash(e.State), dash(e.ProofID))
		}
	}
	if section("pending receipts", len(r.PendingReceipts), "OPERATION\tACTION\tREVISION\tSTATUS") {
		for _, p := range r.PendingReceipts {
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\n", dash(p.OperationID), dash(p.Action), p.Revision, dash(p.Status))
		}
	}
	return tw.Flush()
}

func renderReceipt(w io.Writer, r *protocol.NativeReceipt) error {
	_, err := fmt.Fprintf(w, "receipt %s: %s on root %s, revision %d, operation %s\n"+ackReminder,
		dash(r.Status), dash(r.Action), dash(r.RootID), r.Revision, dash(r.OperationID), dash(r.RootID))
	return err
}

func renderPolicyAdmission(w io.Writer, res protocol.NativeResult) error {
	fmt.Fprintf(w, "new root %s, previous root %s (previous root unchanged: %s)\n",
		dash(res.RootID), dash(res.PreviousRootID), yesNo(res.PreviousRootUnchanged))
	if res.SessionRebound != nil && *res.SessionRebound {
		fmt.Fprintf(w, "session rebound: yes, the session's default root is now %s\n", dash(res.RootID))
	} else {
		fmt.Fprintf(w, "session rebound: %s, the session's default root did not move; address %s explicitly\n", yesNo(res.SessionRebound), dash(res.RootID))
	}
	if res.Receipt == nil {
		return errors.New("the fleet sent a policy-admission result without a receipt")
	}
	_, err := fmt.Fprintf(w, "receipt %s: %s on root %s, revision %d, operation %s\n"+ackReminder,
		dash(res.Receipt.Status), dash(res.Receipt.Action), dash(res.Receipt.RootID), res.Receipt.Revision, dash(res.Receipt.OperationID), dash(res.RootID))
	return err
}
