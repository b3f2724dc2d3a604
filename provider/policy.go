package provider

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// DefaultConfirmPatterns are the commands that need an operator's confirm
// before they start, unless config.json sets "confirmPatterns". Each is a
// Go regular expression matched anywhere in the command line.
var DefaultConfirmPatterns = []string{
	`\bgit\s+push\b`,
	`\bgit\s+reset\s+--hard\b`,
	`\bgit\s+clean\s+-[a-zA-Z]*f`,
	`\brm\s+(-[a-zA-Z]*\s+)*-[a-zA-Z]*(r[a-zA-Z]*f|f[a-zA-Z]*r)`,
	`\brm\s+(-[a-zA-Z]*\s+)*(-r|-R|--recursive)\b.*\s(-f|--force)\b`,
	`\bsudo\b`,
	`\bmkfs(\.[a-z0-9]+)?\b`,
	`\bdd\s+.*\bof=`,
}

// Policy decides which commands, and which agent tool requests, need an
// operator's confirm before they run: the local provider asks before a
// matching shell command, and the engine marks matching agent permission
// requests (and, in native sessions, holds matching tasks for approval).
type Policy struct {
	patterns []*regexp.Regexp
	sources  []string
}

// NewPolicy compiles patterns; an empty list means no command needs a
// confirm. A pattern that does not compile is an error naming it.
func NewPolicy(patterns []string) (*Policy, error) {
	p := &Policy{}
	for _, src := range patterns {
		re, err := regexp.Compile(src)
		if err != nil {
			return nil, fmt.Errorf("confirm pattern %q: %w", src, err)
		}
		p.patterns = append(p.patterns, re)
		p.sources = append(p.sources, src)
	}
	return p, nil
}

// Match returns the first pattern command matches, or "".
func (p *Policy) Match(command string) string {
	if p == nil {
		return ""
	}
	for i, re := range p.patterns {
		if re.MatchString(command) {
			return p.sources[i]
		}
	}
	return ""
}

// MatchTool returns the first pattern an agent tool request matches, or "":
// the patterns are matched against the tool's command (command, cmd) or
// path (file_path, path) input, and against "TOOL INPUT-JSON" otherwise.
func (p *Policy) MatchTool(tool string, input map[string]any) string {
	if p == nil {
		return ""
	}
	for _, k := range []string{"command", "cmd", "fullCommandText"} {
		switch v := input[k].(type) {
		case string:
			if m := p.Match(v); m != "" {
				return m
			}
		case []any:
			parts := make([]string, 0, len(v))
			for _, a := range v {
				if s, ok := a.(string); ok {
					parts = append(parts, s)
				}
			}
			if m := p.Match(strings.Join(parts, " ")); m != "" {
				return m
			}
		}
	}
	b, _ := json.Marshal(input)
	return p.Match(tool + " " + string(b))
}
