// Package experiment runs A/B experiments on agent configurations: the
// same tasks, run by two to eight variants (arms) of provider, model,
// prompt template and skill, each sample in a fresh git worktree, judged by
// a shell check. It measures each arm's pass rate, duration and tokens and
// decides a winner with a stated test (Fisher's exact test on the best two
// arms; see Decide). docs/experiments.md describes the file and the rule.
//
// Data flows one way: File (parsed and validated) → Run (samples through
// providers and worktrees) → Result (per-variant figures and the decision).
// Saving the result is the caller's: the package knows nothing of stores.
package experiment

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/agents-fleet/fleet/config"
	"github.com/agents-fleet/fleet/skill"
)

// Bounds of an experiment file. They keep one run's work and memory
// finite whatever the file says.
const (
	MaxFileSize       = 1 << 20 // bytes of the file
	MaxNameLen        = 200     // characters of name
	MaxHypothesisLen  = 4000    // characters of hypothesis
	MaxTasks          = 100
	MaxTextLen        = 64 << 10 // bytes of one task, the check, or a prompt
	MaxModelLen       = 200
	DefaultSamples    = 5
	MaxSamples        = 200     // samples per task per variant
	MaxTotalSamples   = 10000   // tasks × samples × variants
	DefaultTimeoutMs  = 600000  // 10 minutes per sample
	MinTimeoutMs      = 1000    // 1 second
	MaxTimeoutMs      = 7200000 // 2 hours
	MinVariants       = 2
	MaxVariants       = 8
	TaskPlaceholder   = "{task}"
	PermissionsAllow  = "allow"
	PermissionsDeny   = "deny"
	DefaultPermission = PermissionsDeny
)

// ErrInvalid is matched (errors.Is) by every error about an experiment
// file's content, as opposed to errors reading it.
var ErrInvalid = errors.New("invalid experiment file")

// invalidError marks a content error as ErrInvalid; it reads as its cause.
type invalidError struct{ error }

func (e invalidError) Unwrap() error        { return e.error }
func (e invalidError) Is(target error) bool { return target == ErrInvalid }

var (
	idRE      = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,63}$`)
	variantRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
)

// File is an experiment as its file describes it, validated, with the
// defaults filled in. Its JSON is the file's format.
type File struct {
	ID          string    `json:"id"`
	Name        string    `json:"name"`
	Hypothesis  string    `json:"hypothesis"`
	Tasks       []string  `json:"tasks"`
	Check       string    `json:"check"`
	Samples     int       `json:"samples"`
	TimeoutMs   int64     `json:"timeoutMs"`
	Permissions string    `json:"permissions"`
	Variants    []Variant `json:"variants"`
}

// Variant is one arm. The first of a File's Variants is the control.
type Variant struct {
	Name     string `json:"name"`
	Provider string `json:"provider"`
	Model    string `json:"model,omitempty"`
	Prompt   string `json:"prompt"` // a template: {task} is the task text
	Skill    string `json:"skill,omitempty"`
}

// Total is the number of samples the experiment runs.
func (f *File) Total() int { return len(f.Tasks) * f.Samples * len(f.Variants) }

// VariantNames lists the arms' names, the control first.
func (f *File) VariantNames() []string {
	names := make([]string, len(f.Variants))
	for i, v := range f.Variants {
		names[i] = v.Name
	}
	return names
}

// fileJSON is what the decoder reads: pointers tell an absent field
// (default) from a given zero (an error).
type fileJSON struct {
	ID          *string       `json:"id"`
	Name        *string       `json:"name"`
	Hypothesis  *string       `json:"hypothesis"`
	Tasks       []string      `json:"tasks"`
	Check       *string       `json:"check"`
	Samples     *int          `json:"samples"`
	TimeoutMs   *int64        `json:"timeoutMs"`
	Permissions *string       `json:"permissions"`
	Variants    []variantJSON `json:"variants"`
}

type variantJSON struct {
	Name     *string `json:"name"`
	Provider *string `json:"provider"`
	Model    *string `json:"model"`
	Prompt   *string `json:"prompt"`
	Skill    *string `json:"skill"`
}

// Load reads and validates the experiment file at path.
func Load(path string) (*File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read experiment: %w", err)
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return nil, fmt.Errorf("read experiment: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("read experiment %s: not a regular file", path)
	}
	data, err := io.ReadAll(io.LimitReader(fh, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("read experiment: %w", err)
	}
	f, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// Parse decodes and validates an experiment file: one JSON object, no
// unknown fields, every bound of this file's constants. Errors name the
// field ("variants[1].prompt: …") and match ErrInvalid.
func Parse(data []byte) (*File, error) {
	f, err := parse(data)
	if err != nil {
		return nil, invalidError{err}
	}
	return f, nil
}

func parse(data []byte) (*File, error) {
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("the file is larger than %d bytes", MaxFileSize)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var raw fileJSON
	if err := dec.Decode(&raw); err != nil {
		return nil, decodeError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("invalid JSON: more than one value in the file")
	}
	return raw.validate()
}

// decodeError says what was wrong with the JSON in the file's own terms.
func decodeError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field == "" {
			return fmt.Errorf("want a JSON object, got JSON %s", te.Value)
		}
		return fmt.Errorf("%s: want %s, got JSON %s", te.Field, jsonType(te.Type.Kind().String()), te.Value)
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("invalid JSON at byte %d: %w", se.Offset, err)
	}
	if errors.Is(err, io.EOF) {
		return errors.New("the file is empty; want a JSON object")
	}
	if msg, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return fmt.Errorf("unknown field %s (docs/experiments.md lists the fields)", msg)
	}
	return fmt.Errorf("invalid JSON: %w", err)
}

func jsonType(kind string) string {
	switch kind {
	case "int", "int64":
		return "an integer"
	case "string":
		return "a string"
	case "slice":
		return "an array"
	case "struct", "ptr":
		return "an object"
	}
	return kind
}

func (raw *fileJSON) validate() (*File, error) {
	f := &File{Permissions: DefaultPermission, Samples: DefaultSamples, TimeoutMs: DefaultTimeoutMs}
	if raw.Name == nil || strings.TrimSpace(*raw.Name) == "" {
		return nil, errors.New("name: required")
	}
	f.Name = strings.TrimSpace(*raw.Name)
	if err := text("name", f.Name, MaxNameLen, true); err != nil {
		return nil, err
	}
	if raw.ID != nil {
		f.ID = *raw.ID
		if !idRE.MatchString(f.ID) {
			return nil, fmt.Errorf("id: %q: want 1-64 of [a-z0-9-], starting with a letter or digit", f.ID)
		}
	} else if f.ID = slug(f.Name); f.ID == "" {
		return nil, fmt.Errorf("id: cannot derive one from name %q; set id (1-64 of [a-z0-9-])", f.Name)
	}
	if raw.Hypothesis != nil {
		f.Hypothesis = strings.TrimSpace(*raw.Hypothesis)
		if err := text("hypothesis", f.Hypothesis, MaxHypothesisLen, true); err != nil {
			return nil, err
		}
	}
	switch {
	case len(raw.Tasks) == 0:
		return nil, errors.New("tasks: required: at least one task text")
	case len(raw.Tasks) > MaxTasks:
		return nil, fmt.Errorf("tasks: %d tasks; at most %d", len(raw.Tasks), MaxTasks)
	}
	for i, t := range raw.Tasks {
		if strings.TrimSpace(t) == "" {
			return nil, fmt.Errorf("tasks[%d]: empty", i)
		}
		if err := text(fmt.Sprintf("tasks[%d]", i), t, MaxTextLen, false); err != nil {
			return nil, err
		}
	}
	f.Tasks = raw.Tasks
	if raw.Check == nil || strings.TrimSpace(*raw.Check) == "" {
		return nil, errors.New("check: required: a shell command whose exit status 0 means the sample passed")
	}
	f.Check = *raw.Check
	if err := text("check", f.Check, MaxTextLen, false); err != nil {
		return nil, err
	}
	if raw.Samples != nil {
		if f.Samples = *raw.Samples; f.Samples < 1 || f.Samples > MaxSamples {
			return nil, fmt.Errorf("samples: %d: want 1..%d (per task per variant)", f.Samples, MaxSamples)
		}
	}
	if raw.TimeoutMs != nil {
		if f.TimeoutMs = *raw.TimeoutMs; f.TimeoutMs < MinTimeoutMs || f.TimeoutMs > MaxTimeoutMs {
			return nil, fmt.Errorf("timeoutMs: %d: want %d..%d (per sample, task and check)", f.TimeoutMs, MinTimeoutMs, MaxTimeoutMs)
		}
	}
	if raw.Permissions != nil {
		if f.Permissions = *raw.Permissions; f.Permissions != PermissionsAllow && f.Permissions != PermissionsDeny {
			return nil, fmt.Errorf("permissions: %q: want %q or %q", f.Permissions, PermissionsAllow, PermissionsDeny)
		}
	}
	if len(raw.Variants) < MinVariants || len(raw.Variants) > MaxVariants {
		return nil, fmt.Errorf("variants: %d variants; want %d..%d (the first is the control)", len(raw.Variants), MinVariants, MaxVariants)
	}
	seen := map[string]int{}
	for i, rv := range raw.Variants {
		v, err := rv.validate(fmt.Sprintf("variants[%d]", i))
		if err != nil {
			return nil, err
		}
		if j, dup := seen[v.Name]; dup {
			return nil, fmt.Errorf("variants[%d].name: %q is also variants[%d]'s name", i, v.Name, j)
		}
		seen[v.Name] = i
		f.Variants = append(f.Variants, v)
	}
	if n := f.Total(); n > MaxTotalSamples {
		return nil, fmt.Errorf("samples: %d tasks × %d samples × %d variants is %d samples; at most %d", len(f.Tasks), f.Samples, len(f.Variants), n, MaxTotalSamples)
	}
	return f, nil
}

func (rv *variantJSON) validate(at string) (Variant, error) {
	var v Variant
	if rv.Name == nil || *rv.Name == "" {
		return v, fmt.Errorf("%s.name: required", at)
	}
	if v.Name = *rv.Name; !variantRE.MatchString(v.Name) {
		return v, fmt.Errorf("%s.name: %q: want 1-64 of [A-Za-z0-9._-], starting with a letter or digit", at, v.Name)
	}
	if rv.Provider == nil || *rv.Provider == "" {
		return v, fmt.Errorf("%s.provider: required (one of %s)", at, strings.Join(config.ProviderNames, ", "))
	}
	v.Provider = *rv.Provider
	if err := config.CheckProvider(v.Provider); err != nil {
		return v, fmt.Errorf("%s.provider: %w", at, err)
	}
	if rv.Model != nil {
		v.Model = *rv.Model
		switch {
		case v.Provider == "local" && v.Model != "":
			return v, fmt.Errorf("%s.model: the local provider runs shell commands and takes no model", at)
		case strings.TrimSpace(v.Model) != v.Model || strings.ContainsFunc(v.Model, isControl):
			return v, fmt.Errorf("%s.model: %q: no spaces around it and no control characters", at, v.Model)
		case len(v.Model) > MaxModelLen:
			return v, fmt.Errorf("%s.model: longer than %d bytes", at, MaxModelLen)
		}
	}
	v.Prompt = TaskPlaceholder
	if rv.Prompt != nil {
		v.Prompt = *rv.Prompt
		if !strings.Contains(v.Prompt, TaskPlaceholder) {
			return v, fmt.Errorf("%s.prompt: must contain %s, where the task text goes", at, TaskPlaceholder)
		}
		if err := text(at+".prompt", v.Prompt, MaxTextLen, false); err != nil {
			return v, err
		}
	}
	if rv.Skill != nil && *rv.Skill != "" {
		v.Skill = *rv.Skill
		if err := skill.Valid(v.Skill); err != nil {
			return v, fmt.Errorf("%s.skill: %w", at, err)
		}
	}
	return v, nil
}

// text checks a string field: valid UTF-8, at most max (characters when
// line is set, which also refuses newlines and control characters; else
// bytes, and NUL is refused).
func text(field, s string, max int, line bool) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("%s: not valid UTF-8", field)
	}
	if line {
		if utf8.RuneCountInString(s) > max {
			return fmt.Errorf("%s: longer than %d characters", field, max)
		}
		if strings.ContainsFunc(s, isControl) {
			return fmt.Errorf("%s: one line without control characters", field)
		}
		return nil
	}
	if len(s) > max {
		return fmt.Errorf("%s: longer than %d bytes", field, max)
	}
	if strings.ContainsRune(s, 0) {
		return fmt.Errorf("%s: contains a NUL byte", field)
	}
	return nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// slug derives an id from a name: lower case, runs of anything but
// [a-z0-9] made one "-", trimmed, at most 64 characters.
func slug(name string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(name) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = false
			b.WriteRune(r)
			continue
		}
		dash = true
	}
	s := b.String()
	if len(s) > 64 {
		s = strings.TrimRight(s[:64], "-")
	}
	return s
}

// TaskText is what variant v sends for task: its prompt template with the
// task in place of {task}, then the skill (content, "" for none) applied
// as the engine applies skills: a skill with {task} is a template for that
// text, any other skill is instructions followed by it.
func (v Variant) TaskText(task, skillContent string) string {
	t := strings.ReplaceAll(v.Prompt, TaskPlaceholder, task)
	switch {
	case skillContent == "":
		return t
	case strings.Contains(skillContent, TaskPlaceholder):
		return strings.ReplaceAll(skillContent, TaskPlaceholder, t)
	}
	return strings.TrimRight(skillContent, "\n") + "\n\nTask: " + t
}
