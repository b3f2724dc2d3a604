package intel

import (
	"strings"
	"testing"

	"github.com/agents-fleet/fleet/intel/record"
)

func TestClassify(t *testing.T) {
	failed := func(provider, cause string, code int, text string) record.Run {
		return record.Run{Provider: provider, Outcome: record.OutcomeFailed, Cause: cause, ExitCode: code, Error: text}
	}
	for _, tc := range []struct {
		name string
		run  record.Run
		want string
	}{
		{"completed", record.Run{Outcome: record.OutcomeCompleted, Cause: record.CauseExit, ExitCode: 1}, ""},
		{"cancel cause", failed("claude", record.CauseCancelled, 0, ""), ClassCancelled},
		{"cancelled outcome, no cause", record.Run{Outcome: record.OutcomeCancelled}, ClassCancelled},
		{"cancelled outcome, shutdown", record.Run{Outcome: record.OutcomeCancelled, Cause: record.CauseShutdown}, ClassShutdown},
		{"stall", failed("codex", record.CauseStall, 0, "no output for 600s"), ClassStall},
		{"budget", failed("codex", record.CauseBudget, 0, ""), ClassBudget},
		{"permission", failed("claude", record.CausePermission, 0, "denied"), ClassPermission},
		{"workspace", failed("local", record.CauseWorkspace, 0, "git worktree add: exit status 128"), ClassWorkspace},
		{"cli start", failed("copilot", record.CauseStart, 0, "exec: copilot: not found"), ClassStart},
		{"local exit ignores API-looking output", failed("local", record.CauseExit, 2, "HTTP 500 from the test server"), "exit-code:2"},
		{"agent CLI exit after an API error", failed("claude", record.CauseExit, 1, `API Error: 529 {"type":"overloaded_error"}`), ClassAPIError},
		{"agent CLI exit", failed("codex", record.CauseExit, 1, "something broke"), "exit-code:1"},
		{"agent rate limit", failed("codex", record.CauseAgentError, 0, "stream error: rate limit exceeded"), ClassAPIError},
		{"agent 401", failed("claude", record.CauseAgentError, 0, "status code: 401 invalid x-api-key"), ClassAPIError},
		{"agent timeout", failed("claude", record.CauseAgentError, 0, "Request timed out."), ClassTimeout},
		{"agent error", failed("claude", record.CauseAgentError, 0, "tool crashed"), ClassAgentError},
		{"no cause, deadline", failed("codex", "", 0, "context deadline exceeded"), ClassTimeout},
		{"no cause, 429", failed("codex", "", 0, "429 Too Many Requests"), ClassAPIError},
		{"no cause, exit status", failed("local", "", 3, ""), "exit-code:3"},
		{"no cause, nothing", failed("local", "", 0, ""), ClassUnknown},
		{"unknown cause", failed("local", "from-the-future", 0, ""), ClassUnknown},
		{"a bare number is not a status", failed("claude", record.CauseAgentError, 0, "ran 500 tests, 3 failed"), ClassAgentError},
	} {
		if got := Classify(tc.run); got != tc.want {
			t.Errorf("%s: Classify = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestErrorKey(t *testing.T) {
	for _, tc := range []struct{ text, class, want string }{
		{"FAIL ./pkg/foo 0.123s", "exit-code:1", "FAIL <path> <n>s"},
		{"open /home/u/.fleet/x.json: no such file or directory", "agent-error", "open <path>: no such file or directory"},
		{"\n\n  panic: runtime error at 0xc000123abc\ngoroutine 1 [running]:", "exit-code:2", "panic: runtime error at <id>"},
		{"request 3f2a9c1d8e7b failed after 3 retries", "api-error", "request <id> failed after <n> retries"},
		{"2025-06-01T10:00:00Z connection to https://api.example.com/v1/messages refused", "api-error", "<time> connection to <url> refused"},
		{"session 123e4567-e89b-12d3-a456-426614174000 not found", "agent-error", "session <id> not found"},
		{"too   many\tspaces", "agent-error", "too many spaces"},
		{"", "stall", "stall (no message)"},
		{"  \n ", "exit-code:1", "exit-code:1 (no message)"},
		{"anything", "", ""},
	} {
		if got := errorKey(record.Run{Error: tc.text}, tc.class); got != tc.want {
			t.Errorf("errorKey(%q) = %q, want %q", tc.text, got, tc.want)
		}
	}
	long := errorKey(record.Run{Error: strings.Repeat("é", 500)}, "agent-error")
	if len(long) > errorKeyMax || !strings.HasPrefix(long, "éé") || strings.ContainsRune(long, '\uFFFD') {
		t.Errorf("long key: %d bytes %q", len(long), long)
	}
}

func TestTaskKind(t *testing.T) {
	for _, tc := range []struct{ task, skill, want string }{
		{"$ go test ./...", "", "go"},
		{"CGO_ENABLED=0 GOOS=linux go build", "", "go"},
		{"./scripts/test.sh -v", "", "test.sh"},
		{"Fix the flaky test in store/", "", "fix"},
		{"`make` all", "", "make"},
		{"\n\n$ npm ci\n$ npm test", "", "npm"},
		{"", "", "(empty)"},
		{"$ go vet", "review", "review"},
	} {
		if got := taskKind(tc.task, tc.skill); got != tc.want {
			t.Errorf("taskKind(%q, %q) = %q, want %q", tc.task, tc.skill, got, tc.want)
		}
	}
}
