package intel

import (
	"context"
	"fmt"
	"time"

	"github.com/agents-fleet/fleet/protocol"
)

// PruneResult is what Prune deleted.
type PruneResult struct{ Sessions, Runs, Steering int64 }

// Prune deletes the sessions that ended before before (or started before
// it, when they never ended), with their runs, the runs' tool counts and
// their steering, in one transaction. Skills, shadows, evolutions,
// experiments and suggestion states stay. The aggregates follow (the runs
// triggers), except a skill's lastUsedAt, which stays the last use known.
func (s *Store) Prune(ctx context.Context, before time.Time) (PruneResult, error) {
	var res PruneResult
	cut := before.UnixMilli()
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return res, fmt.Errorf("prune intel store: %w", err)
	}
	defer tx.Rollback()
	const old = `SELECT sid FROM sessions WHERE (ended_at > 0 AND ended_at < ?1) OR (ended_at = 0 AND started_at < ?1)`
	for _, step := range []struct {
		q string
		n *int64
	}{
		{`DELETE FROM runs WHERE sid IN (` + old + `)`, &res.Runs},
		{`DELETE FROM steering WHERE sid IN (` + old + `)`, &res.Steering},
		{`DELETE FROM sessions WHERE sid IN (` + old + `)`, &res.Sessions},
	} {
		r, err := tx.ExecContext(ctx, step.q, cut)
		if err == nil {
			*step.n, err = r.RowsAffected()
		}
		if err != nil {
			return PruneResult{}, fmt.Errorf("prune intel store: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return PruneResult{}, fmt.Errorf("prune intel store: %w", err)
	}
	return res, nil
}

// entities are the tables Counts reports, by entity name (the *_stats and
// totals tables are aggregates of runs, not entities).
var entities = []string{"sessions", "runs", "run_tools", "steering", "skills", "shadows", "evolutions",
	"experiments", "experiment_runs", "experiment_variants", "suggestion_states"}

// countsQuery counts every entity in one statement.
var countsQuery = func() string {
	q := "SELECT "
	for i, t := range entities {
		if i > 0 {
			q += ", "
		}
		q += "(SELECT count(*) FROM " + t + ")"
	}
	return q
}()

// Counts returns the row count of every table, by entity name.
func (s *Store) Counts(ctx context.Context) ([]protocol.FleetStoreCount, error) {
	out, err := counts(ctx, s.r)
	if err != nil {
		return nil, fmt.Errorf("intel counts: %w", err)
	}
	return out, nil
}

func counts(ctx context.Context, q querier) ([]protocol.FleetStoreCount, error) {
	out := make([]protocol.FleetStoreCount, len(entities))
	dest := make([]any, len(entities))
	for i, t := range entities {
		out[i].Name = t
		dest[i] = &out[i].Count
	}
	if err := q.QueryRowContext(ctx, countsQuery).Scan(dest...); err != nil {
		return nil, err
	}
	return out, nil
}
