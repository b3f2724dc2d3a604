package intel

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/agents-fleet/fleet/provider"
	"github.com/agents-fleet/fleet/skill"
)

// maxPatchFile bounds a /learn --from file.
const maxPatchFile = skill.MaxSize

// learn answers /learn: the skills and their shadows; a shadow of a
// skill, drafted by the fleet's agent from its failures or written by the
// operator, that tasks then alternate with the current version; applying
// or rejecting one (docs/intel.md).
func (s *Service) learn(ctx context.Context, f []string) (string, error) {
	// What this session recorded so far counts (failures, trials).
	_ = s.rec.Flush(ctx)
	const usage = "Usage: /learn (skills and their shadows), /learn SKILL (propose a shadow from its failures), /learn SKILL --from FILE (your version as the shadow), /learn apply SHADOW, /learn reject SHADOW"
	switch {
	case len(f) == 0:
		return s.skillsReport(ctx)
	case len(f) == 2 && f[0] == "apply":
		return s.applyShadow(ctx, f[1])
	case len(f) == 2 && f[0] == "reject":
		if err := s.st.RejectShadow(ctx, f[1]); err != nil {
			return "", err
		}
		s.Refresh()
		return fmt.Sprintf("Rejected %s; the skill stays as it is.", f[1]), nil
	case len(f) == 3 && f[1] == "--from":
		return s.shadowFromFile(ctx, f[0], f[2])
	case len(f) == 1:
		return s.draftShadow(ctx, f[0])
	}
	return usage, nil
}

func (s *Service) skillsReport(ctx context.Context) (string, error) {
	skills := skill.List(s.dirs)
	if len(skills) == 0 {
		return fmt.Sprintf("No skills yet. A skill is a file NAME.md in %s; use it with /spawn --skill NAME TEXT.", strings.Join(s.dirs, " or ")), nil
	}
	ev, err := s.st.Evolution(ctx, time.Now())
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("Skills:")
	for _, sk := range skills {
		fmt.Fprintf(&b, "\n  %-20s %s", sk.Name, sk.Path)
		for _, t := range ev.Skills {
			if t.Name == sk.Name {
				fmt.Fprintf(&b, "  %d use(s), success %.0f%%, %d evolution(s)", t.Uses, t.SuccessRate*100, t.EvolutionCount)
			}
		}
	}
	for _, sh := range ev.Shadows {
		fmt.Fprintf(&b, "\nShadow %s of %s: %s", sh.ID, sh.Skill, sh.Summary)
		if sh.Trials != nil {
			fmt.Fprintf(&b, " (%d trial(s)", *sh.Trials)
			if sh.CandidateSuccessRate != nil {
				fmt.Fprintf(&b, ", %.0f%% pass", *sh.CandidateSuccessRate*100)
			}
			if sh.BaselineSuccessRate != nil {
				fmt.Fprintf(&b, " vs %.0f%% for the current version", *sh.BaselineSuccessRate*100)
			}
			b.WriteString(")")
		}
	}
	return b.String(), nil
}

// failuresText lists a skill's recent failures for a patch's author.
func (s *Service) failuresText(ctx context.Context, name string) (string, int, error) {
	fails, err := s.st.SkillFailures(ctx, name, 5)
	if err != nil {
		return "", 0, err
	}
	var b strings.Builder
	for _, r := range fails {
		fmt.Fprintf(&b, "- task %q failed (%s): %s\n", oneLineText(r.Task, 200), Classify(r), oneLineText(r.Error, 300))
	}
	return b.String(), len(fails), nil
}

func (s *Service) shadowFromFile(ctx context.Context, name, file string) (string, error) {
	sk, err := skill.Find(s.dirs, name)
	if err != nil {
		return "", err
	}
	if !filepath.IsAbs(file) {
		file = filepath.Join(s.cwd, file)
	}
	fi, err := os.Stat(file)
	if err != nil {
		return "", fmt.Errorf("read the new version: %w", err)
	}
	if fi.Size() > maxPatchFile || !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file of at most %d bytes", file, maxPatchFile)
	}
	content, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("read the new version: %w", err)
	}
	return s.addShadow(ctx, sk, string(content), "operator", "operator's version from "+filepath.Base(file))
}

func (s *Service) addShadow(ctx context.Context, sk skill.Skill, content, author, summary string) (string, error) {
	if strings.TrimSpace(content) == "" {
		return "", errors.New("the new version is empty")
	}
	if content == sk.Content {
		return "", fmt.Errorf("the new version of %s is the same as the current one", sk.Name)
	}
	base, err := s.st.RegisterSkill(ctx, sk.Name, sk.Content)
	if err != nil {
		return "", err
	}
	sh, err := s.st.AddShadow(ctx, Shadow{Skill: sk.Name, BaseVersion: base.Version, Content: content, Summary: summary, Author: author})
	if err != nil {
		return "", err
	}
	s.Refresh()
	return fmt.Sprintf("Shadow %s of %s (against v%d): from now on /spawn --skill %s alternates between v%d and the shadow. /learn shows how each does; /learn apply %s or /learn reject %s decides.",
		sh.ID, sk.Name, base.Version, sk.Name, base.Version, sh.ID, sh.ID), nil
}

// draftShadow has the fleet's agent draft a better version of a skill from
// its failures; with the local provider the operator writes it.
func (s *Service) draftShadow(ctx context.Context, name string) (string, error) {
	sk, err := skill.Find(s.dirs, name)
	if err != nil {
		return "", err
	}
	fails, n, err := s.failuresText(ctx, name)
	if err != nil {
		return "", err
	}
	if n == 0 {
		return fmt.Sprintf("%s has no recorded failures to learn from. To try a new version anyway: /learn %s --from FILE.", name, name), nil
	}
	if s.drafter == nil {
		return fmt.Sprintf("%s's recent failures:\n%sThe local provider has no agent to draft a fix: write the new version to a file and run /learn %s --from FILE.", name, fails, name), nil
	}
	prompt := fmt.Sprintf("You maintain the skill %q, instructions that coding agents follow. Its current text is between <skill> tags:\n<skill>\n%s\n</skill>\nRecent tasks that used it failed:\n%s\nWrite an improved version that would avoid these failures. Reply with only the complete new text between <skill> and </skill>; do not use any tools.",
		name, sk.Content, fails)
	text, err := s.draft(ctx, prompt)
	if err != nil {
		return "", fmt.Errorf("the agent could not draft a new version of %s: %w", name, err)
	}
	if i := strings.Index(text, "<skill>"); i >= 0 {
		text = text[i+len("<skill>"):]
		if j := strings.Index(text, "</skill>"); j >= 0 {
			text = text[:j]
		}
	}
	text = strings.TrimSpace(text) + "\n"
	return s.addShadow(ctx, sk, text, "coordinator", fmt.Sprintf("%s's draft from %d failure(s)", s.drafter.Name(), n))
}

// draft runs one turn of the drafter in an empty directory and returns
// its final text.
func (s *Service) draft(ctx context.Context, prompt string) (string, error) {
	dir, err := os.MkdirTemp("", "fleet-learn-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	h := &draftHost{turn: make(chan provider.TurnEnded, 1)}
	sess, err := s.drafter.Start(ctx, provider.Spec{Agent: "learn", Role: provider.RoleWorker, Dir: dir,
		Env: append(os.Environ(), provider.SessionEnv+"="+s.session.ID)}, h)
	if err != nil {
		return "", err
	}
	defer sess.Close()
	if err := sess.Send(ctx, provider.Turn{Text: prompt}); err != nil {
		return "", err
	}
	select {
	case res := <-h.turn:
		if res.Err != nil {
			return "", res.Err
		}
		if strings.TrimSpace(res.Result) != "" {
			return res.Result, nil
		}
		return h.text(), nil
	case <-sess.Done():
		return "", fmt.Errorf("the agent session ended: %v", sess.Err())
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// draftHost is the drafter's host: it collects text and denies every tool.
type draftHost struct {
	turn chan provider.TurnEnded
	mu   sync.Mutex
	buf  strings.Builder
}

func (h *draftHost) Event(ev provider.Event) {
	switch ev := ev.(type) {
	case provider.Text:
		h.mu.Lock()
		if h.buf.Len() < maxPatchFile {
			h.buf.WriteString(ev.Text)
		}
		h.mu.Unlock()
	case provider.TurnEnded:
		select {
		case h.turn <- ev:
		default:
		}
	}
}

func (h *draftHost) text() string { h.mu.Lock(); defer h.mu.Unlock(); return h.buf.String() }

func (h *draftHost) Permission(ctx context.Context, r provider.PermissionRequest) (provider.Decision, error) {
	return provider.Decision{}, provider.ErrNoAnswer
}
func (h *draftHost) Ask(ctx context.Context, q provider.Question) (string, error) {
	return "", provider.ErrNoAnswer
}
func (h *draftHost) Confirm(ctx context.Context, summary string) (bool, error) { return false, nil }

func (s *Service) applyShadow(ctx context.Context, id string) (string, error) {
	sh, err := s.st.Shadow(ctx, id)
	if err != nil {
		return "", err
	}
	if sh.Status != "evaluating" {
		return "", fmt.Errorf("%s is %s, not being evaluated", id, sh.Status)
	}
	sk, err := skill.Find(s.dirs, sh.Skill)
	if err != nil {
		return "", err
	}
	if err := skill.Write(sk.Path, sh.Content); err != nil {
		return "", err
	}
	rec, err := s.st.ApplyShadow(ctx, id)
	if err != nil {
		return "", err
	}
	s.Refresh()
	msg := fmt.Sprintf("Applied %s to %s (%s)", id, sh.Skill, sk.Path)
	if rec.Version != nil {
		msg += fmt.Sprintf(": it is now v%d", *rec.Version)
	}
	if rec.SuccessRateBefore != nil && rec.SuccessRateAfter != nil {
		msg += fmt.Sprintf("; success %.0f%% before, %.0f%% with the shadow", *rec.SuccessRateBefore*100, *rec.SuccessRateAfter*100)
	}
	return msg + ".", nil
}

func oneLineText(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > max {
		return string(r[:max-1]) + "…"
	}
	return s
}
