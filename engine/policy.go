package engine

import (
	"fmt"
	"regexp"
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

// Policy decides which commands need a confirm before they start.
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
