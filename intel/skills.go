package intel

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/agents-fleet/fleet/intel/record"
	"github.com/agents-fleet/fleet/protocol"
)

// ErrShadowDecided: ApplyShadow or RejectShadow on a shadow that was
// already applied or rejected.
var ErrShadowDecided = errors.New("shadow already decided")

// MaxSkill bounds a skill's content (and a shadow's), in bytes.
const MaxSkill = 256 << 10

// SkillVersion is one content of a skill.
type SkillVersion struct {
	Skill     string
	Version   int
	Hash      string // sha256 of the content, hex
	CreatedAt int64  // when this content was first registered (epoch ms)
}

// RegisterSkill returns the version of this content of the skill: 1 for the
// first content seen, +1 for each new content, and the existing version
// when the same content comes again.
func (s *Store) RegisterSkill(ctx context.Context, name, content string) (SkillVersion, error) {
	if err := checkSkill(name, content); err != nil {
		return SkillVersion{}, fmt.Errorf("register skill: %w", err)
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return SkillVersion{}, fmt.Errorf("register skill %s: %w", name, err)
	}
	defer tx.Rollback()
	v, err := registerSkill(ctx, tx, name, content, s.now().UnixMilli())
	if err == nil {
		err = tx.Commit()
	}
	if err != nil {
		return SkillVersion{}, fmt.Errorf("register skill %s: %w", name, err)
	}
	return v, nil
}

func checkSkill(name, content string) error {
	switch {
	case name == "":
		return errors.New("empty skill name")
	case len(name) > 256:
		return fmt.Errorf("skill name is %d bytes; the limit is 256", len(name))
	case len(content) > MaxSkill:
		return fmt.Errorf("skill %s is %d bytes; the limit is %d", name, len(content), MaxSkill)
	}
	return nil
}

func registerSkill(ctx context.Context, tx *sql.Tx, name, content string, now int64) (SkillVersion, error) {
	sum := sha256.Sum256([]byte(content))
	v := SkillVersion{Skill: name, Hash: hex.EncodeToString(sum[:])}
	err := tx.QueryRowContext(ctx, `SELECT version, created_at FROM skills WHERE name = ? AND hash = ?`, name, v.Hash).
		Scan(&v.Version, &v.CreatedAt)
	if err == nil || !errors.Is(err, sql.ErrNoRows) {
		return v, err
	}
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) + 1 FROM skills WHERE name = ?`, name).
		Scan(&v.Version); err != nil {
		return v, err
	}
	v.CreatedAt = now
	_, err = tx.ExecContext(ctx, `INSERT INTO skills (name, version, hash, content, created_at) VALUES (?, ?, ?, ?, ?)`,
		name, v.Version, v.Hash, content, v.CreatedAt)
	return v, err
}

// Shadow is a candidate patch of a skill, evaluated against the version it
// patches (A/B) before it is applied or rejected.
type Shadow struct {
	ID          string // "sh-<n>", assigned by AddShadow
	Skill       string
	BaseVersion int    // the version it patches
	Content     string // the patched skill, whole
	Summary     string // what the patch changes
	Author      string // "coordinator" or "operator"
	Status      string // "evaluating", "applied", "rejected"
	CreatedAt   int64
}

// Shadow statuses.
const (
	ShadowEvaluating = "evaluating"
	ShadowApplied    = "applied"
	ShadowRejected   = "rejected"
)

// AddShadow stores a candidate: it assigns ID and CreatedAt, and its status
// is evaluating. Runs that use it carry its ID in Run.Shadow.
func (s *Store) AddShadow(ctx context.Context, sh Shadow) (Shadow, error) {
	if err := checkSkill(sh.Skill, sh.Content); err != nil {
		return Shadow{}, fmt.Errorf("add shadow: %w", err)
	}
	if sh.Author != "coordinator" && sh.Author != "operator" {
		return Shadow{}, fmt.Errorf("add shadow of %s: author %q is not coordinator or operator", sh.Skill, sh.Author)
	}
	if sh.BaseVersion < 0 {
		return Shadow{}, fmt.Errorf("add shadow of %s: base version %d", sh.Skill, sh.BaseVersion)
	}
	sh.Summary = clip(sh.Summary, record.MaxText)
	sh.Status = ShadowEvaluating
	sh.CreatedAt = s.now().UnixMilli()
	res, err := s.w.ExecContext(ctx, `INSERT INTO shadows (skill, base_version, content, summary, author, status, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?)`, sh.Skill, sh.BaseVersion, sh.Content, sh.Summary, sh.Author, sh.Status, sh.CreatedAt)
	if err != nil {
		return Shadow{}, fmt.Errorf("add shadow of %s: %w", sh.Skill, err)
	}
	n, err := res.LastInsertId()
	if err != nil {
		return Shadow{}, fmt.Errorf("add shadow of %s: %w", sh.Skill, err)
	}
	sh.ID = shadowID(n)
	return sh, nil
}

const shadowCols = `n, skill, base_version, content, summary, author, status, created_at`

func scanShadow(sc interface{ Scan(...any) error }) (Shadow, error) {
	var sh Shadow
	var n int64
	err := sc.Scan(&n, &sh.Skill, &sh.BaseVersion, &sh.Content, &sh.Summary, &sh.Author, &sh.Status, &sh.CreatedAt)
	sh.ID = shadowID(n)
	return sh, err
}

// parseShadowID returns n of "sh-<n>".
func parseShadowID(id string) (int64, bool) {
	num, ok := strings.CutPrefix(id, "sh-")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(num, 10, 64)
	return n, err == nil && n > 0
}

// Shadow returns the shadow with that id, or ErrNotFound.
func (s *Store) Shadow(ctx context.Context, id string) (Shadow, error) {
	sh, err := getShadow(ctx, s.r, id)
	if err != nil {
		return Shadow{}, fmt.Errorf("shadow %s: %w", id, err)
	}
	return sh, nil
}

func getShadow(ctx context.Context, q querier, id string) (Shadow, error) {
	n, ok := parseShadowID(id)
	if !ok {
		return Shadow{}, ErrNotFound
	}
	sh, err := scanShadow(q.QueryRowContext(ctx, `SELECT `+shadowCols+` FROM shadows WHERE n = ?`, n))
	if errors.Is(err, sql.ErrNoRows) {
		return Shadow{}, ErrNotFound
	}
	return sh, err
}

// Shadows returns the shadows of a skill ("" for every skill), oldest first.
func (s *Store) Shadows(ctx context.Context, skill string) ([]Shadow, error) {
	q := `SELECT ` + shadowCols + ` FROM shadows ORDER BY n`
	var args []any
	if skill != "" {
		q = `SELECT ` + shadowCols + ` FROM shadows WHERE skill = ? ORDER BY n`
		args = append(args, skill)
	}
	var out []Shadow
	err := each(ctx, s.r, func(rows *sql.Rows) error {
		sh, err := scanShadow(rows)
		out = append(out, sh)
		return err
	}, q, args...)
	if err != nil {
		return nil, fmt.Errorf("shadows: %w", err)
	}
	return out, nil
}

// ApplyShadow applies an evaluating shadow: it registers its content as the
// skill's next version (RegisterSkill), marks it applied and records the
// evolution with the success rates before (the base version's own judged
// runs) and after (the shadow's judged runs so far); a rate is nil without
// judged runs. All in one transaction.
func (s *Store) ApplyShadow(ctx context.Context, id string) (protocol.FleetEvolutionRecord, error) {
	var rec protocol.FleetEvolutionRecord
	fail := func(err error) (protocol.FleetEvolutionRecord, error) {
		return protocol.FleetEvolutionRecord{}, fmt.Errorf("apply shadow %s: %w", id, err)
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fail(err)
	}
	defer tx.Rollback()
	sh, err := getShadow(ctx, tx, id)
	if err != nil {
		return fail(err)
	}
	if sh.Status != ShadowEvaluating {
		return fail(fmt.Errorf("%w: it is %s", ErrShadowDecided, sh.Status))
	}
	now := s.now().UnixMilli()
	v, err := registerSkill(ctx, tx, sh.Skill, sh.Content, now)
	if err != nil {
		return fail(err)
	}
	before, err := versionScore(ctx, tx, sh.Skill, int64(sh.BaseVersion))
	if err != nil {
		return fail(err)
	}
	after, err := shadowScore(ctx, tx, sh.Skill, sh.ID)
	if err != nil {
		return fail(err)
	}
	rb, ra := before.rate(), after.rate()
	res, err := tx.ExecContext(ctx, `INSERT INTO evolutions (skill, shadow, summary, version, applied_at, rate_before,
		rate_after, runs_before, runs_after) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		sh.Skill, sh.ID, sh.Summary, v.Version, now, nullFloat(rb), nullFloat(ra), before.judged, after.judged)
	if err != nil {
		return fail(err)
	}
	n, err := res.LastInsertId()
	if err != nil {
		return fail(err)
	}
	sn, _ := parseShadowID(sh.ID)
	if _, err := tx.ExecContext(ctx, `UPDATE shadows SET status = 'applied', decided_at = ? WHERE n = ?`,
		now, sn); err != nil {
		return fail(err)
	}
	if err := tx.Commit(); err != nil {
		return fail(err)
	}
	version := int64(v.Version)
	rec = protocol.FleetEvolutionRecord{ID: evolutionID(n), Skill: sh.Skill, Summary: sh.Summary, AppliedAt: now,
		Version: &version, SuccessRateBefore: rb, SuccessRateAfter: ra}
	return rec, nil
}

// RejectShadow marks an evaluating shadow rejected.
func (s *Store) RejectShadow(ctx context.Context, id string) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("reject shadow %s: %w", id, err)
	}
	defer tx.Rollback()
	sh, err := getShadow(ctx, tx, id)
	if err == nil && sh.Status != ShadowEvaluating {
		err = fmt.Errorf("%w: it is %s", ErrShadowDecided, sh.Status)
	}
	if err == nil {
		n, _ := parseShadowID(id)
		_, err = tx.ExecContext(ctx, `UPDATE shadows SET status = 'rejected', decided_at = ? WHERE n = ?`,
			s.now().UnixMilli(), n)
	}
	if err == nil {
		err = tx.Commit()
	}
	if err != nil {
		return fmt.Errorf("reject shadow %s: %w", id, err)
	}
	return nil
}

// SkillFailures returns the most recent judged failures (not cancelled, not
// shut down) of runs that used the skill, newest first, at most n, with
// Class filled in: what /learn shows the author of a patch.
func (s *Store) SkillFailures(ctx context.Context, skill string, n int) ([]record.Run, error) {
	if n <= 0 {
		return nil, nil
	}
	var out []record.Run
	err := each(ctx, s.r, func(rows *sql.Rows) error {
		var r record.Run
		err := rows.Scan(&r.ID, &r.SessionID, &r.Worker, &r.TaskID, &r.Provider, &r.Model, &r.Task, &r.Skill,
			&r.SkillVersion, &r.Shadow, &r.Repo, &r.Worktree, &r.StartedAt, &r.EndedAt, &r.Outcome, &r.ExitCode,
			&r.Error, &r.Cause, &r.Class, &r.InputTokens, &r.OutputTokens, &r.CacheReadTokens, &r.CacheWriteTokens)
		out = append(out, r)
		return err
	}, `SELECT r.id, s.id, r.worker, r.task_id, r.provider, r.model, r.task, r.skill, r.skill_version, r.shadow,
		r.repo, r.worktree, r.started_at, r.ended_at, r.outcome, r.exit_code, r.error, r.cause, r.class,
		r.input_tokens, r.output_tokens, r.cache_read_tokens, r.cache_write_tokens
		FROM runs r JOIN sessions s ON s.sid = r.sid
		WHERE r.skill = ? AND r.ok = 0 AND r.judged = 1 ORDER BY r.at DESC, r.rid DESC LIMIT ?`, skill, n)
	if err != nil {
		return nil, fmt.Errorf("skill failures of %s: %w", skill, err)
	}
	return out, nil
}

func nullFloat(f *float64) sql.NullFloat64 {
	if f == nil {
		return sql.NullFloat64{}
	}
	return sql.NullFloat64{Float64: *f, Valid: true}
}
