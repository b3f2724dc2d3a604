package intel

import (
	"path"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/agents-fleet/fleet/intel/record"
)

// Failure classes, as Classify returns them. Each failed run has exactly one.
//
//	cancelled          the operator cancelled the run (Cause cancelled, or
//	                   Outcome cancelled with no other cause)
//	shutdown           the fleet stopped while the run was going
//	stall              no activity for limits.agentStallTimeoutMs
//	budget             stopped by a token budget that was not raised
//	permission-denied  an operator denied a tool or command the run needed
//	workspace          the worktree could not be prepared
//	cli-start          the provider's CLI could not be started
//	exit-code:<n>      a command or CLI exited with status n (a local
//	                   shell task, or an agent CLI whose text shows no API
//	                   error)
//	api-error          the model API failed: an HTTP 4xx/5xx status, a rate
//	                   limit, "overloaded", an exhausted quota, a rejected
//	                   key, read from the error text
//	timeout            the text says the run or a request timed out
//	agent-error        the CLI reported an error that is none of the above
//	unknown            no cause, no exit status and no text that says more
//
// Classes cancelled and shutdown say nothing about the provider, the task
// or the skill: the store keeps those runs out of every success rate and
// every rule ("judged" runs are the others).
const (
	ClassCancelled  = "cancelled"
	ClassShutdown   = "shutdown"
	ClassStall      = "stall"
	ClassBudget     = "budget"
	ClassPermission = "permission-denied"
	ClassWorkspace  = "workspace"
	ClassStart      = "cli-start"
	ClassAPIError   = "api-error"
	ClassAgentError = "agent-error"
	ClassTimeout    = "timeout"
	ClassUnknown    = "unknown"
	// classExitPrefix starts "exit-code:<n>".
	classExitPrefix = "exit-code:"
)

// Classify returns the failure class of a run that did not complete, from
// its Cause, ExitCode and Error text; "" for a completed run. It is the one
// place that decides a class: the store calls it for every run it writes.
func Classify(r record.Run) string {
	if r.Outcome == record.OutcomeCompleted {
		return ""
	}
	switch r.Cause {
	case record.CauseCancelled:
		return ClassCancelled
	case record.CauseShutdown:
		return ClassShutdown
	case record.CauseStall:
		return ClassStall
	case record.CauseBudget:
		return ClassBudget
	case record.CausePermission:
		return ClassPermission
	case record.CauseWorkspace:
		return ClassWorkspace
	case record.CauseStart:
		return ClassStart
	case record.CauseExit:
		// A shell command's output may well mention "HTTP 500"; only an
		// agent CLI's exit is read as an API failure.
		if r.Provider != "local" && r.Provider != "" && isAPIError(r.Error) {
			return ClassAPIError
		}
		return exitClass(r.ExitCode)
	case record.CauseAgentError:
		switch {
		case isAPIError(r.Error):
			return ClassAPIError
		case isTimeout(r.Error):
			return ClassTimeout
		}
		return ClassAgentError
	}
	// No cause (or one this binary does not know): the text and the exit
	// status are all there is.
	switch {
	case r.Outcome == record.OutcomeCancelled:
		return ClassCancelled
	case isAPIError(r.Error):
		return ClassAPIError
	case isTimeout(r.Error):
		return ClassTimeout
	case r.ExitCode != 0:
		return exitClass(r.ExitCode)
	}
	return ClassUnknown
}

func exitClass(code int) string { return classExitPrefix + strconv.Itoa(code) }

var (
	// apiStatus is an HTTP status the text attributes to a request.
	apiStatus = regexp.MustCompile(`(?i)\b(?:http(?:/[0-9.]+)?|status(?:\s*code)?|error(?:\s*code)?|api\s*error|code)\s*[:=]?\s*[45][0-9]{2}\b`)
	apiWords  = regexp.MustCompile(`(?i)rate[ _-]?limit|too many requests|overloaded|insufficient[ _]quota|quota exceeded|api[ _]error|invalid[ _]api[ _]key|authentication[ _]error|service unavailable|bad gateway|internal server error`)
	timeoutRe = regexp.MustCompile(`(?i)timed? ?out|deadline exceeded`)
)

func isAPIError(text string) bool {
	return text != "" && (apiStatus.MatchString(text) || apiWords.MatchString(text))
}

func isTimeout(text string) bool { return text != "" && timeoutRe.MatchString(text) }

// errorKeyMax bounds an error key (and a denial key), in bytes.
const errorKeyMax = 160

// Replacements that turn one failure's first line into the key it shares
// with its repetitions: the parts that differ between two occurrences of
// the same failure (times, URLs, paths, ids, numbers) become placeholders.
// Order matters: a time or URL contains numbers and slashes.
var (
	timeRe = regexp.MustCompile(`\b[0-9]{4}-[0-9]{2}-[0-9]{2}(?:[T ][0-9]{2}:[0-9]{2}(?::[0-9]{2})?(?:[.,][0-9]+)?(?:Z|[+-][0-9]{2}:?[0-9]{2})?)?`)
	urlRe  = regexp.MustCompile(`\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s'"<>()]+`)
	uuidRe = regexp.MustCompile(`\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b`)
	pathRe = regexp.MustCompile(`(?:[A-Za-z]:)?[\w.~@+-]*(?:[/\\][\w.~@+-]+)+[/\\]?`)
	hexRe  = regexp.MustCompile(`\b(?:0x[0-9a-fA-F]+|[0-9a-fA-F]{7,})\b`)
	numRe  = regexp.MustCompile(`\b[0-9]+(?:\.[0-9]+)*`)
	wsRe   = regexp.MustCompile(`\s+`)
)

// normalise returns the key of a text: its first non-empty line with times,
// URLs, paths, ids and numbers replaced, spaces collapsed, at most
// errorKeyMax bytes.
func normalise(text string) string {
	line := firstLine(text)
	if line == "" {
		return ""
	}
	line = timeRe.ReplaceAllString(line, "<time>")
	line = urlRe.ReplaceAllString(line, "<url>")
	line = uuidRe.ReplaceAllString(line, "<id>")
	line = pathRe.ReplaceAllString(line, "<path>")
	line = hexRe.ReplaceAllStringFunc(line, func(h string) string {
		if strings.HasPrefix(h, "0x") || strings.ContainsAny(h, "abcdefABCDEF") {
			return "<id>"
		}
		return h // all digits: a number, below
	})
	line = numRe.ReplaceAllString(line, "<n>")
	line = wsRe.ReplaceAllString(line, " ")
	return clip(strings.TrimSpace(line), errorKeyMax)
}

// errorKey is how failures are grouped (topErrors, recurring-error): the
// normalised first line of the error, or "<class> (no message)" when the
// run failed without one. "" for a completed run.
func errorKey(r record.Run, class string) string {
	if class == "" {
		return ""
	}
	if k := normalise(r.Error); k != "" {
		return k
	}
	return class + " (no message)"
}

// firstLine returns the first line of s that is not blank, trimmed.
func firstLine(s string) string {
	for s != "" {
		var line string
		line, s, _ = strings.Cut(s, "\n")
		if line = strings.TrimSpace(line); line != "" {
			return line
		}
	}
	return ""
}

// kindMax bounds a task kind, in bytes.
const kindMax = 40

// taskKind is what the provider-failure-rate rule compares providers on:
// the skill's name when the run used one, else the task's first word,
// lower-cased, skipping a leading "$ " and VAR=value assignments, and a
// command given by path reduced to its base name ("./scripts/test.sh" →
// "test.sh"). "(empty)" for an empty task.
func taskKind(task, skill string) string {
	if skill != "" {
		return clip(skill, kindMax)
	}
	fields := strings.Fields(firstLine(task))
	for len(fields) > 0 {
		w := strings.Trim(fields[0], "$`\"'()[]{},.:;!?")
		fields = fields[1:]
		if w == "" || (strings.Contains(w, "=") && len(fields) > 0 && !strings.HasPrefix(w, "=")) {
			continue
		}
		if strings.ContainsAny(w, "/\\") {
			if b := path.Base(strings.ReplaceAll(w, "\\", "/")); b != "." && b != "/" {
				w = b
			}
		}
		return clip(strings.ToLower(w), kindMax)
	}
	return "(empty)"
}

// clip cuts s to at most n bytes without splitting a UTF-8 sequence.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
