package intel

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/agents-fleet/fleet/intel/record"
)

// Experiment is an A/B (or A/B/n) comparison of variants, run by package
// experiment.
type Experiment struct {
	ID, Name, Hypothesis string
	Variants             []string // the first is the control
	CreatedAt            int64    // epoch ms; 0: when first saved
}

// ExperimentRun is one run of an experiment and its result.
type ExperimentRun struct {
	ID           string // "" : SaveExperiment assigns "<experiment>-run-<n>"
	ExperimentID string // "" or the experiment's ID
	StartedAt    int64
	CompletedAt  int64           // 0 while it runs
	Variants     []VariantResult // one per arm, in Experiment.Variants order
	Winner       string          // "" when no winner
	// Test is the statistical test used, e.g. "Fisher exact, two-sided,
	// alpha 0.05".
	Test string
	// PValue is the winner's against the runner-up or control; nil when
	// not computed.
	PValue *float64
}

// VariantResult is one arm's aggregate in a run.
type VariantResult struct {
	Variant         string
	Samples, Passed int64
	MeanDurationMs  float64
	MeanTokens      float64
	// Mean is the mean score (pass = 1, fail = 0), so equal to PassRate.
	Mean     float64
	PassRate float64
	// Lift is (Mean − control Mean) / control Mean; nil for the control
	// and when the control's Mean is 0.
	Lift *float64
}

// SaveExperiment stores the experiment (an upsert by ID: name, hypothesis
// and variants are updated, CreatedAt kept) and the run. A run saved again
// with the same ID replaces the earlier one, so the runner may save a run
// when it starts and again when it completes. The run's variants must be
// the experiment's, in order (or none yet).
func (s *Store) SaveExperiment(ctx context.Context, e Experiment, run ExperimentRun) error {
	fail := func(err error) error { return fmt.Errorf("save experiment %s: %w", e.ID, err) }
	switch {
	case e.ID == "":
		return fail(errors.New("empty experiment id"))
	case len(e.Variants) == 0:
		return fail(errors.New("no variants"))
	case run.ExperimentID != "" && run.ExperimentID != e.ID:
		return fail(fmt.Errorf("run %s belongs to experiment %s", run.ID, run.ExperimentID))
	}
	if len(run.Variants) > 0 {
		if len(run.Variants) != len(e.Variants) {
			return fail(fmt.Errorf("run has %d variant results for %d variants", len(run.Variants), len(e.Variants)))
		}
		for i, v := range run.Variants {
			if v.Variant != e.Variants[i] {
				return fail(fmt.Errorf("run variant %d is %q, the experiment's is %q", i+1, v.Variant, e.Variants[i]))
			}
		}
	}
	variants, err := json.Marshal(e.Variants)
	if err != nil {
		return fail(err)
	}
	if e.CreatedAt == 0 {
		e.CreatedAt = s.now().UnixMilli()
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fail(err)
	}
	defer tx.Rollback()
	_, err = tx.ExecContext(ctx, `INSERT INTO experiments (id, name, hypothesis, variants, created_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET name = excluded.name, hypothesis = excluded.hypothesis, variants = excluded.variants`,
		e.ID, clip(e.Name, record.MaxText), clip(e.Hypothesis, record.MaxText), string(variants), e.CreatedAt)
	if err != nil {
		return fail(err)
	}
	if run.ID == "" {
		var n int64
		if err := tx.QueryRowContext(ctx, `SELECT count(*) + 1 FROM experiment_runs WHERE experiment_id = ?`, e.ID).
			Scan(&n); err != nil {
			return fail(err)
		}
		run.ID = e.ID + "-run-" + strconv.FormatInt(n, 10)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM experiment_runs WHERE id = ?`, run.ID); err != nil {
		return fail(err)
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO experiment_runs (id, experiment_id, started_at, completed_at, winner, test, p_value)
		VALUES (?, ?, ?, ?, ?, ?, ?)`, run.ID, e.ID, run.StartedAt, run.CompletedAt, run.Winner, clip(run.Test, record.MaxText),
		nullFloat(run.PValue))
	if err != nil {
		return fail(err)
	}
	seq, err := res.LastInsertId()
	if err != nil {
		return fail(err)
	}
	for i, v := range run.Variants {
		_, err := tx.ExecContext(ctx, `INSERT INTO experiment_variants (run_seq, idx, variant, samples, passed,
			mean_duration_ms, mean_tokens, mean, pass_rate, lift) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			seq, i, v.Variant, v.Samples, v.Passed, v.MeanDurationMs, v.MeanTokens, v.Mean, v.PassRate, nullFloat(v.Lift))
		if err != nil {
			return fail(err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fail(err)
	}
	return nil
}

// ExperimentRuns returns the runs of an experiment, newest first;
// ErrNotFound when there is no such experiment.
func (s *Store) ExperimentRuns(ctx context.Context, experimentID string) ([]ExperimentRun, error) {
	tx, err := s.readTx(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	var one int
	err = tx.QueryRowContext(ctx, `SELECT 1 FROM experiments WHERE id = ?`, experimentID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		err = ErrNotFound
	}
	var runs []ExperimentRun
	if err == nil {
		runs, err = experimentRuns(ctx, tx, experimentID, -1)
	}
	if err != nil {
		return nil, fmt.Errorf("experiment runs of %s: %w", experimentID, err)
	}
	return runs, nil
}

// experiments returns at most limit experiments, newest first.
func experiments(ctx context.Context, q querier, limit int) ([]Experiment, error) {
	var out []Experiment
	err := each(ctx, q, func(rows *sql.Rows) error {
		var e Experiment
		var variants string
		if err := rows.Scan(&e.ID, &e.Name, &e.Hypothesis, &variants, &e.CreatedAt); err != nil {
			return err
		}
		var err error
		e.Variants, err = decodeVariants(variants)
		out = append(out, e)
		return err
	}, `SELECT id, name, hypothesis, variants, created_at FROM experiments ORDER BY created_at DESC, id LIMIT ?`, limit)
	return out, err
}

// experimentRuns returns at most limit (-1: all) runs of an experiment,
// newest first.
func experimentRuns(ctx context.Context, q querier, experimentID string, limit int) ([]ExperimentRun, error) {
	var out []ExperimentRun
	var seqs []int64
	err := each(ctx, q, func(rows *sql.Rows) error {
		var r ExperimentRun
		var seq int64
		var p sql.NullFloat64
		if err := rows.Scan(&seq, &r.ID, &r.ExperimentID, &r.StartedAt, &r.CompletedAt, &r.Winner, &r.Test, &p); err != nil {
			return err
		}
		r.PValue = nullable(p)
		out = append(out, r)
		seqs = append(seqs, seq)
		return nil
	}, `SELECT seq, id, experiment_id, started_at, completed_at, winner, test, p_value FROM experiment_runs
		WHERE experiment_id = ? ORDER BY started_at DESC, seq DESC LIMIT ?`, experimentID, limit)
	if err != nil {
		return nil, err
	}
	for i, seq := range seqs {
		err := each(ctx, q, func(rows *sql.Rows) error {
			var v VariantResult
			var lift sql.NullFloat64
			if err := rows.Scan(&v.Variant, &v.Samples, &v.Passed, &v.MeanDurationMs, &v.MeanTokens, &v.Mean,
				&v.PassRate, &lift); err != nil {
				return err
			}
			v.Lift = nullable(lift)
			out[i].Variants = append(out[i].Variants, v)
			return nil
		}, `SELECT variant, samples, passed, mean_duration_ms, mean_tokens, mean, pass_rate, lift
			FROM experiment_variants WHERE run_seq = ? ORDER BY idx`, seq)
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}
