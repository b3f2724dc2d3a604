package engine

import (
	"fmt"
	"strings"

	"github.com/agents-fleet/fleet/protocol"
)

// command is one slash command of the catalog.
type command struct {
	name, usage, description, category string
	// run returns the reply, "" when the command replies later from the
	// background, or an error whose text is the reply, marked isError.
	run func(e *Engine, args string) (string, error)
}

// failure is a command's answer when it did not do what was asked (an
// unknown command, task or worker, bad arguments, a refusal): a reply
// marked isError, so that scripts can tell (fleet send --wait-reply exits 1).
type failure string

func (f failure) Error() string { return string(f) }

// failf formats a failure.
func failf(format string, args ...any) error { return failure(fmt.Sprintf(format, args...)) }

// consoleCommands are the line console's local commands that are not fleet
// commands, with where a script finds the same.
var consoleCommands = map[string]string{
	"/answer": "use `fleet answer ID ANSWER`",
	"/yes":    "use `fleet answer ID yes`",
	"/no":     "use `fleet answer ID no`",
	"/status": "use `fleet events --type fleetState --count 1`",
	"/quit":   "it detaches a console",
}

// commands is the catalog, in the order /help shows it. Only commands that
// work are listed. Set in init: /help reads it.
var commands []command

func init() {
	commands = []command{
		{"/help", "/help", "List the commands and how to start tasks.", "general", (*Engine).cmdHelp},
		{"/tasks", "/tasks", "List tasks with their status and worker.", "tasks", (*Engine).cmdTasks},
		{"/workers", "/workers", "List workers with their status and task.", "workers", (*Engine).cmdWorkers},
		{"/pending", "/pending", "List confirm and ask requests waiting for an answer.", "tasks", (*Engine).cmdPending},
		{"/cancel", "/cancel <task|worker>", "Stop a task (its whole process group) or drop it from the queue.", "tasks", (*Engine).cmdCancel},
		{"/pause", "/pause", "Stop starting queued tasks; running tasks go on.", "dispatch", (*Engine).cmdPause},
		{"/resume", "/resume", "Start queued tasks again.", "dispatch", (*Engine).cmdResume},
		{"/plan", "/plan on|off", "Plan mode: new tasks are created but wait for /go.", "dispatch", (*Engine).cmdPlan},
		{"/go", "/go [task...]", "Start planned tasks (all, or the ones named).", "dispatch", (*Engine).cmdGo},
		{"/loop", "/loop [N] <command>", "Repeat a command until it exits 0, at most N attempts (default 5).", "tasks", (*Engine).cmdLoop},
		{"/clean", "/clean [worker...] [--force [--delete-branch]]", "Remove finished workers' worktrees; unmerged or dirty ones only with --force, which keeps the branch.", "workers", (*Engine).cmdClean},
		{"/spawn", spawnUsage, "Start a worker on TEXT directly, without the coordinator (following skill NAME; on worker host NAME or a host with label L).", "workers", (*Engine).cmdSpawn},
		{"/retry", "/retry TASK", "Start a failed task again, on its worker from that worker's branch (placed afresh).", "tasks", (*Engine).cmdRetry},
		{"/tell", "/tell WORKER TEXT", "Send a follow-up turn to a worker (resuming its agent session if it settled).", "workers", (*Engine).cmdTell},
		{"/diff", "/diff WORKER [--stat] [PATH...]", "Show a worker's change against its base branch (committed and uncommitted).", "workers", (*Engine).cmdDiff},
		{"/merge", "/merge WORKER [--squash|--rebase] [--into BRANCH]", "Merge a settled worker's branch into its base branch (refused, changing nothing, on conflicts or a dirty target).", "workers", (*Engine).cmdMerge},
		{"/apply", "/apply WORKER [PATH...]", "Put a worker's change (or the named files) into the repository's work tree, uncommitted and unstaged (refused, changing nothing, when it does not apply cleanly).", "workers", (*Engine).cmdApply},
		{"/pr", "/pr WORKER [--draft]", "Push a settled worker's branch and open a pull request (gh, or the configured hook); the push is confirmed first.", "workers", (*Engine).cmdPR},
		{"/fleet-intel", "/fleet-intel [accept|dismiss ID]", "What past runs say: success rates, top errors, suggestions (accept or dismiss them).", "intel", intelCmd("/fleet-intel")},
		{"/learn", "/learn [SKILL [--from FILE]] | /learn apply|reject SHADOW", "Propose a shadow version of a skill from its failures, A/B it on real tasks, apply or reject it.", "intel", intelCmd("/learn")},
		{"/limits", "/limits [NAME VALUE]", "List the session's limits, or change one for the session (minFreeMemoryMiB, workerMemoryMiB, stallRetries, rateLimitMaxWaitMs).", "dispatch", (*Engine).cmdLimits},
		{"/budget", "/budget [session|worker|WORKER] [N|off]", "Token budgets: use against them (and cost where prices are set), or set them.", "workers", (*Engine).cmdBudget},
		{"/hold", "/hold <task> <reason>", "Native sessions: hold a task in the root until an operator releases it.", "tasks", (*Engine).cmdHold},
	}
}

func commandCatalog() *protocol.CommandCatalog {
	cc := &protocol.CommandCatalog{Commands: make([]protocol.CommandCatalogEntry, 0, len(commands))}
	for _, c := range commands {
		cc.Commands = append(cc.Commands, protocol.CommandCatalogEntry{
			Name: c.name, Description: c.description, Kind: "builtin", Category: c.category,
		})
	}
	return cc
}

const shellPrefix = "$ "

// handlePromptLocked turns a prompt into tasks, runs a slash command, or
// explains what the local provider understands.
func (e *Engine) handlePromptLocked(source, text string) {
	trimmed := strings.TrimSpace(text)
	if strings.HasPrefix(trimmed, "/") && !strings.Contains(trimmed, "\n") {
		name, args, _ := strings.Cut(trimmed, " ")
		for _, c := range commands {
			if c.name == name {
				// A command that works in the background replies when done
				// (one reply, so fleet send --wait-reply prints the result).
				r, err := c.run(e, strings.TrimSpace(args))
				switch {
				case err != nil:
					e.replyErrorLocked(err.Error())
				case r != "":
					e.replyLocked(r)
				}
				return
			}
		}
		msg := fmt.Sprintf("Unknown command %s. /help lists the commands.", name)
		if hint, ok := consoleCommands[name]; ok {
			msg += fmt.Sprintf(" (%s is a console command: %s)", name, hint)
		}
		e.replyErrorLocked(msg)
		return
	}
	if strings.TrimSpace(text) != "" {
		e.steerLocked("prompt", text, "")
	}
	if e.cfg.Coordinator != nil {
		if strings.TrimSpace(text) == "" {
			return
		}
		e.coordinatorPromptLocked(text)
		return
	}
	var cmds []string
	ignored := 0
	for line := range strings.SplitSeq(text, "\n") {
		line = strings.TrimRight(line, "\r")
		cmd, ok := strings.CutPrefix(strings.TrimLeft(line, " \t"), shellPrefix)
		if ok && strings.TrimSpace(cmd) != "" {
			cmds = append(cmds, strings.TrimSpace(cmd))
		} else if strings.TrimSpace(line) != "" {
			ignored++
		}
	}
	if len(cmds) > maxTasksPerPrompt {
		e.replyErrorLocked(fmt.Sprintf("This prompt has %d task lines; one prompt makes at most %d tasks. Nothing was queued: "+
			"send them in smaller prompts, or put them in a script and run that.", len(cmds), maxTasksPerPrompt))
		return
	}
	created := make([]*task, 0, len(cmds))
	for _, cmd := range cmds {
		created = append(created, e.addTaskLocked(cmd))
	}
	if len(created) == 0 {
		e.replyErrorLocked("This fleet runs the local provider: a line starting with \"$ \" is a task " +
			"(for example \"$ make test\"); several such lines make several tasks. /help lists the commands.")
		return
	}
	var b strings.Builder
	if len(created) == 1 {
		fmt.Fprintf(&b, "Queued %s: %s", created[0].id, protocol.CutText(created[0].command, maxSubject))
	} else {
		fmt.Fprintf(&b, "Queued %d tasks:", len(created))
		for _, t := range created {
			fmt.Fprintf(&b, "\n  %s: %s", t.id, protocol.CutText(t.command, maxSubject))
		}
	}
	if ignored > 0 {
		fmt.Fprintf(&b, "\n(%d line(s) without \"$ \" were not tasks.)", ignored)
	}
	if e.planMode {
		b.WriteString("\nPlan mode is on: /go starts them.")
	} else if e.paused {
		b.WriteString("\nDispatch is paused: /resume starts them.")
	}
	e.replyLocked(b.String())
	e.dispatchLocked()
}

// maxTasksPerPrompt bounds the tasks one prompt makes: a prompt at the size
// limit of nothing but "$ x" lines would otherwise queue a quarter of a
// million tasks, each saved and listed.
const maxTasksPerPrompt = 200

func (e *Engine) cmdHelp(string) (string, error) {
	var b strings.Builder
	b.WriteString("Start a task with a line beginning \"$ \", e.g. \"$ go test ./...\". A task may ask the operator:\n" +
		"  a line ::ask::{\"question\":\"…\",\"choices\":[\"a\",\"b\"]} raises a question; the answer arrives on stdin;\n" +
		"  a line ::confirm::<summary> asks for approval; \"yes\" or \"no\" arrives on stdin.\nCommands:")
	for _, c := range commands {
		fmt.Fprintf(&b, "\n  %-22s %s", c.usage, c.description)
	}
	return b.String(), nil
}

func (e *Engine) cmdTasks(string) (string, error) {
	if len(e.tasks) == 0 {
		return "No tasks yet. Start one with \"$ <command>\".", nil
	}
	var b strings.Builder
	c := e.countTasksLocked()
	fmt.Fprintf(&b, "%d tasks: %d done, %d failed, %d running, %d blocked, %d pending", c.total, c.done, c.failed, c.running, c.blocked, c.pending)
	for _, t := range e.tasks {
		status := t.status
		if t.planned && t.status == taskPending {
			status = "planned"
		}
		fmt.Fprintf(&b, "\n  %-5s %-8s %-5s %s", t.id, status, t.worker, protocol.CutText(t.command, maxSubject))
		if t.loopID != "" {
			fmt.Fprintf(&b, "  [%s attempt %d]", t.loopID, t.attempt)
		}
		if t.reason != "" {
			fmt.Fprintf(&b, "  (%s)", t.reason)
		} else if t.waitReason != "" && t.status == taskPending {
			fmt.Fprintf(&b, "  (waits: %s)", t.waitReason)
		}
	}
	return b.String(), nil
}

func (e *Engine) cmdWorkers(string) (string, error) {
	if len(e.workers) == 0 {
		return fmt.Sprintf("No workers yet (up to %d run at once).", e.cfg.Workers), nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d workers, %d active, cap %d", len(e.workers), e.activeWorkersLocked(), e.cfg.Workers)
	for _, w := range e.shownWorkersLocked() {
		fmt.Fprintf(&b, "\n  %-5s %-10s %-5s", w.id, w.status, w.taskID)
		if w.hostName != "" {
			b.WriteString("  @" + w.hostName)
		}
		if n := w.tokens.total(); n > 0 {
			fmt.Fprintf(&b, "  %s tokens", commas(n))
			if c, ok := e.costLocked(w.model, w.tokens); ok {
				b.WriteString(" " + dollars(c))
			}
		}
		if g := gitSummary(w.git); g != "" {
			b.WriteString("  " + g)
		}
		if w.rss > 0 {
			b.WriteString("  " + mib(w.rss))
		}
		// The state when it says more than the status does.
		if st, why := e.workerStateLocked(w); st != protocol.WorkerStateWorking && st != protocol.WorkerStateDone {
			b.WriteString("  [" + st)
			if st == protocol.WorkerStateRateLimited {
				b.WriteString(" until " + w.rateUntil.Format("15:04"))
			}
			if why != "" {
				b.WriteString(": " + protocol.CutText(why, maxSubject))
			}
			b.WriteString("]")
		}
	}
	return b.String(), nil
}

func (e *Engine) cmdPending(string) (string, error) {
	p := e.broker.pendingLocked()
	if len(p) == 0 {
		return "Nothing is waiting for an answer.", nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d waiting:", len(p))
	for _, r := range p {
		if r.kind == kindConfirm {
			fmt.Fprintf(&b, "\n  %s (%s) confirm: %s", r.id, r.taskID, protocol.CutText(r.summary, maxSubject))
		} else {
			fmt.Fprintf(&b, "\n  %s (%s) ask: %s", r.id, r.taskID, protocol.CutText(r.question.Text, maxSubject))
		}
	}
	return b.String(), nil
}

func (e *Engine) cmdCancel(args string) (string, error) {
	if args == "" {
		return "", failure("Usage: /cancel <task|worker>, e.g. /cancel t3")
	}
	return e.cancelLocked(args)
}

func (e *Engine) cmdPause(string) (string, error) {
	if e.paused {
		return "Dispatch is already paused.", nil
	}
	e.paused = true
	e.changedLocked()
	return "Dispatch paused: running tasks go on, queued ones wait for /resume.", nil
}

func (e *Engine) cmdPlan(args string) (string, error) {
	switch strings.ToLower(args) {
	case "on":
		if e.planMode {
			return "Plan mode is already on.", nil
		}
		e.planMode = true
		e.changedLocked()
		return "Plan mode on: new tasks wait for /go.", nil
	case "off":
		if !e.planMode {
			return "Plan mode is already off.", nil
		}
		e.planMode = false
		e.changedLocked()
		if n := e.plannedCountLocked(); n > 0 {
			return fmt.Sprintf("Plan mode off: new tasks start as usual; %d planned task(s) still wait for /go.", n), nil
		}
		return "Plan mode off.", nil
	case "":
		state := "off"
		if e.planMode {
			state = "on"
		}
		return fmt.Sprintf("Plan mode is %s; %d planned task(s) wait for /go. Usage: /plan on|off", state, e.plannedCountLocked()), nil
	}
	return "", failure("Usage: /plan on|off")
}

func (e *Engine) plannedCountLocked() int {
	n := 0
	for _, t := range e.tasks {
		if t.planned && t.status == taskPending {
			n++
		}
	}
	return n
}

func (e *Engine) cmdGo(args string) (string, error) {
	want := map[string]bool{}
	for _, id := range strings.Fields(args) {
		if t := e.taskByID[id]; t == nil || !t.planned || t.status != taskPending {
			return "", failf("%s is not a planned task. /tasks lists them.", id)
		}
		want[id] = true
	}
	var started []string
	for _, t := range e.tasks {
		if t.planned && t.status == taskPending && (len(want) == 0 || want[t.id]) {
			t.planned = false
			e.saveTaskLocked(t)
			started = append(started, t.id)
			if e.cfg.Governor != nil {
				e.releasePlannedNative(t.id)
			}
		}
	}
	if len(started) == 0 {
		return "No planned tasks.", nil
	}
	e.changedLocked()
	e.dispatchLocked()
	msg := fmt.Sprintf("Released %d planned task(s): %s", len(started), strings.Join(started, ", "))
	if e.paused {
		msg += " (dispatch is paused: /resume starts them)"
	}
	return msg, nil
}

func (e *Engine) cmdResume(string) (string, error) {
	if !e.paused {
		return "Dispatch is not paused.", nil
	}
	e.paused = false
	e.changedLocked()
	e.dispatchLocked()
	return "Dispatch resumed.", nil
}
