package intel

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/agents-fleet/fleet/internal/sqlitefile"
	"github.com/agents-fleet/fleet/protocol"
)

// Bounds of the snapshot lists.
const (
	topErrorsMax    = 5
	topSessionsMax  = 10
	steeringMax     = 20
	timelineMax     = 100
	experimentsMax  = 100
	skillsSnapshotM = 200
)

// readTx starts a read transaction: every query of a snapshot sees the same
// committed state.
func (s *Store) readTx(ctx context.Context) (*sql.Tx, error) {
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("intel store %s: %w", s.path, err)
	}
	return tx, nil
}

// Snapshots are the four intelligence snapshots a console is sent.
type Snapshots struct {
	Intel      *protocol.FleetIntel
	Evolution  *protocol.FleetEvolution
	Store      *protocol.FleetStore
	Experiment *protocol.FleetExperiment
}

// Snapshots computes the four snapshots. One that cannot be computed is
// left nil and its error joined into err.
func (s *Store) Snapshots(ctx context.Context, now time.Time) (Snapshots, error) {
	var snap Snapshots
	var errs [4]error
	snap.Intel, errs[0] = s.Intel(ctx, now)
	snap.Evolution, errs[1] = s.Evolution(ctx, now)
	snap.Store, errs[2] = s.Explorer(ctx, now)
	snap.Experiment, errs[3] = s.Experiments(ctx, now)
	return snap, errors.Join(errs[:]...)
}

// EmptySnapshots are the snapshots of a store with nothing in it: what a
// fleet home without a store yet has to show.
func EmptySnapshots(now time.Time) Snapshots {
	ts := now.UnixMilli()
	counts := make([]protocol.FleetStoreCount, len(entities))
	for i, t := range entities {
		counts[i].Name = t
	}
	return Snapshots{
		Intel:      &protocol.FleetIntel{Ts: ts},
		Evolution:  &protocol.FleetEvolution{Ts: ts},
		Store:      &protocol.FleetStore{Ts: ts, Counts: counts},
		Experiment: &protocol.FleetExperiment{Ts: ts},
	}
}

// Messages are the snapshots computed, in the order consoles get them.
func (sn Snapshots) Messages() []protocol.Message {
	var out []protocol.Message
	if sn.Intel != nil {
		out = append(out, sn.Intel)
	}
	if sn.Evolution != nil {
		out = append(out, sn.Evolution)
	}
	if sn.Store != nil {
		out = append(out, sn.Store)
	}
	if sn.Experiment != nil {
		out = append(out, sn.Experiment)
	}
	return out
}

// Intel returns the fleetIntel snapshot: the summary, the pending
// suggestions and the skills' usage.
//
// Summary: sessionCount counts every session; totalAgentRuns every run;
// failedRuns those whose outcome is not completed (failed or cancelled,
// whatever the class); successRate is (total − failed) / total, 0 without
// runs; totalTokens is input + output over every run; avgSessionDurationMs
// is the mean of ended − started over the sessions that ended; topErrors
// the five most frequent error keys among judged failures (cancelled and
// shut-down runs are not errors), most frequent first.
func (s *Store) Intel(ctx context.Context, now time.Time) (*protocol.FleetIntel, error) {
	tx, err := s.readTx(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	m := &protocol.FleetIntel{Ts: now.UnixMilli()}
	sum := &m.Summary
	err = tx.QueryRowContext(ctx, `SELECT runs, failed, tokens FROM totals`).
		Scan(&sum.TotalAgentRuns, &sum.FailedRuns, &sum.TotalTokens)
	if err == nil {
		err = tx.QueryRowContext(ctx, `SELECT count(*), coalesce(avg(CASE WHEN ended_at > 0 AND ended_at >= started_at
			THEN ended_at - started_at END), 0) FROM sessions`).Scan(&sum.SessionCount, &sum.AvgSessionDurationMs)
	}
	if err != nil {
		return nil, fmt.Errorf("intel snapshot: %w", err)
	}
	if sum.TotalAgentRuns > 0 {
		sum.SuccessRate = float64(sum.TotalAgentRuns-sum.FailedRuns) / float64(sum.TotalAgentRuns)
	}
	err = each(ctx, tx, func(rows *sql.Rows) error {
		var e protocol.FleetIntelError
		if err := rows.Scan(&e.Message, &e.Count); err != nil {
			return err
		}
		sum.TopErrors = append(sum.TopErrors, e)
		return nil
	}, `SELECT key, count FROM error_stats ORDER BY count DESC, key LIMIT ?`, topErrorsMax)
	if err != nil {
		return nil, fmt.Errorf("intel snapshot: %w", err)
	}
	err = each(ctx, tx, func(rows *sql.Rows) error {
		var k protocol.FleetIntelSkill
		if err := rows.Scan(&k.Name, &k.Uses, &k.LastUsedAt); err != nil {
			return err
		}
		m.Skills = append(m.Skills, k)
		return nil
	}, `SELECT skill, sum(uses), max(last_used) FROM skill_stats GROUP BY skill ORDER BY 2 DESC, 1 LIMIT ?`, skillsSnapshotM)
	if err != nil {
		return nil, fmt.Errorf("intel snapshot: %w", err)
	}
	sugs, err := s.suggestionsTx(ctx, tx, now)
	if err != nil {
		return nil, err
	}
	for _, sg := range sugs {
		if sg.State != StatePending {
			continue
		}
		m.Suggestions = append(m.Suggestions, protocol.FleetIntelSuggestion{
			ID: sg.ID, SuggestionType: sg.Rule, Title: sg.Title, Confidence: sg.Confidence, CreatedAt: sg.CreatedAt,
		})
	}
	return m, nil
}

// Evolution returns the fleetEvolution snapshot: the shadows being
// evaluated with their A/B score so far, the applied evolutions (newest
// first, at most 100), and per-skill telemetry.
func (s *Store) Evolution(ctx context.Context, now time.Time) (*protocol.FleetEvolution, error) {
	tx, err := s.readTx(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	m := &protocol.FleetEvolution{Ts: now.UnixMilli()}
	type pending struct {
		sh   protocol.FleetEvolutionShadow
		base int64
	}
	var shadows []pending
	err = each(ctx, tx, func(rows *sql.Rows) error {
		var p pending
		var n int64
		if err := rows.Scan(&n, &p.sh.Skill, &p.base, &p.sh.Summary, &p.sh.CreatedAt, &p.sh.Status); err != nil {
			return err
		}
		p.sh.ID = shadowID(n)
		shadows = append(shadows, p)
		return nil
	}, `SELECT n, skill, base_version, summary, created_at, status FROM shadows WHERE status = 'evaluating' ORDER BY n`)
	if err != nil {
		return nil, fmt.Errorf("evolution snapshot: %w", err)
	}
	for _, p := range shadows {
		cand, err := shadowScore(ctx, tx, p.sh.Skill, p.sh.ID)
		if err != nil {
			return nil, fmt.Errorf("evolution snapshot: %w", err)
		}
		base, err := versionScore(ctx, tx, p.sh.Skill, p.base)
		if err != nil {
			return nil, fmt.Errorf("evolution snapshot: %w", err)
		}
		trials := cand.uses
		p.sh.Trials = &trials
		p.sh.CandidateSuccessRate = cand.rate()
		p.sh.BaselineSuccessRate = base.rate()
		m.Shadows = append(m.Shadows, p.sh)
	}
	err = each(ctx, tx, func(rows *sql.Rows) error {
		var e protocol.FleetEvolutionRecord
		var n, version int64
		var before, after sql.NullFloat64
		if err := rows.Scan(&n, &e.Skill, &e.Summary, &e.AppliedAt, &version, &before, &after); err != nil {
			return err
		}
		e.ID = evolutionID(n)
		e.Version = &version
		e.SuccessRateBefore = nullable(before)
		e.SuccessRateAfter = nullable(after)
		m.Timeline = append(m.Timeline, e)
		return nil
	}, `SELECT n, skill, summary, applied_at, version, rate_before, rate_after FROM evolutions
		ORDER BY applied_at DESC, n DESC LIMIT ?`, timelineMax)
	if err != nil {
		return nil, fmt.Errorf("evolution snapshot: %w", err)
	}
	// Skills: every skill with runs, a registered version or an evolution.
	bySkill := make(map[string]*protocol.FleetEvolutionSkill)
	get := func(name string) *protocol.FleetEvolutionSkill {
		k := bySkill[name]
		if k == nil {
			k = &protocol.FleetEvolutionSkill{Name: name}
			bySkill[name] = k
		}
		return k
	}
	err = each(ctx, tx, func(rows *sql.Rows) error {
		var name string
		var uses, judged, passed int64
		if err := rows.Scan(&name, &uses, &judged, &passed); err != nil {
			return err
		}
		k := get(name)
		k.Uses = uses
		if judged > 0 {
			k.SuccessRate = float64(passed) / float64(judged)
		}
		return nil
	}, `SELECT skill, sum(uses), sum(judged), sum(passed) FROM skill_stats GROUP BY skill`)
	if err == nil {
		err = each(ctx, tx, func(rows *sql.Rows) error {
			var name string
			if err := rows.Scan(&name); err != nil {
				return err
			}
			get(name)
			return nil
		}, `SELECT DISTINCT name FROM skills`)
	}
	if err == nil {
		err = each(ctx, tx, func(rows *sql.Rows) error {
			var name string
			var n, last int64
			if err := rows.Scan(&name, &n, &last); err != nil {
				return err
			}
			k := get(name)
			k.EvolutionCount, k.LastEvolvedAt = n, last
			return nil
		}, `SELECT skill, count(*), max(applied_at) FROM evolutions GROUP BY skill`)
	}
	if err != nil {
		return nil, fmt.Errorf("evolution snapshot: %w", err)
	}
	for _, k := range bySkill {
		m.Skills = append(m.Skills, *k)
	}
	sort.Slice(m.Skills, func(i, j int) bool {
		a, b := m.Skills[i], m.Skills[j]
		if a.Uses != b.Uses {
			return a.Uses > b.Uses
		}
		return a.Name < b.Name
	})
	return m, nil
}

// Explorer returns the fleetStore snapshot: the row count of every table,
// the ten sessions that spent the most tokens, and the twenty most recent
// steering entries.
func (s *Store) Explorer(ctx context.Context, now time.Time) (*protocol.FleetStore, error) {
	tx, err := s.readTx(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	m := &protocol.FleetStore{Ts: now.UnixMilli()}
	if m.Counts, err = counts(ctx, tx); err != nil {
		return nil, fmt.Errorf("store snapshot: %w", err)
	}
	err = each(ctx, tx, func(rows *sql.Rows) error {
		var x protocol.FleetStoreSession
		var ended, failed int64
		if err := rows.Scan(&x.ID, &x.Name, &x.StartedAt, &ended, &x.TotalTokens, &x.AgentRuns, &failed); err != nil {
			return err
		}
		if ended > 0 && ended >= x.StartedAt {
			d := ended - x.StartedAt
			x.DurationMs = &d
		}
		x.FailedRuns = &failed
		m.Sessions = append(m.Sessions, x)
		return nil
	}, `SELECT id, name, started_at, ended_at, tokens, runs, failed FROM sessions
		ORDER BY tokens DESC, sid DESC LIMIT ?`, topSessionsMax)
	if err != nil {
		return nil, fmt.Errorf("store snapshot: %w", err)
	}
	err = each(ctx, tx, func(rows *sql.Rows) error {
		var x protocol.FleetStoreSteering
		var n int64
		if err := rows.Scan(&n, &x.Text, &x.CreatedAt, &x.Source, &x.SessionID); err != nil {
			return err
		}
		x.ID = "st-" + strconv.FormatInt(n, 10)
		m.Steering = append(m.Steering, x)
		return nil
	}, `SELECT st.id, st.text, st.created_at, st.source, s.id FROM steering st JOIN sessions s ON s.sid = st.sid
		ORDER BY st.created_at DESC, st.id DESC LIMIT ?`, steeringMax)
	if err != nil {
		return nil, fmt.Errorf("store snapshot: %w", err)
	}
	return m, nil
}

// Experiments returns the fleetExperiment snapshot: the experiments, newest
// first (at most 100), each with its latest run. Status is "draft" before
// the first run, "running" while the latest run has not completed, else
// "completed".
func (s *Store) Experiments(ctx context.Context, now time.Time) (*protocol.FleetExperiment, error) {
	tx, err := s.readTx(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	m := &protocol.FleetExperiment{Ts: now.UnixMilli()}
	exps, err := experiments(ctx, tx, experimentsMax)
	if err != nil {
		return nil, fmt.Errorf("experiment snapshot: %w", err)
	}
	for _, e := range exps {
		entry := protocol.FleetExperimentEntry{ID: e.ID, Name: e.Name, Status: "draft", Variants: e.Variants,
			CreatedAt: e.CreatedAt, Hypothesis: e.Hypothesis}
		runs, err := experimentRuns(ctx, tx, e.ID, 1)
		if err != nil {
			return nil, fmt.Errorf("experiment snapshot: %w", err)
		}
		if len(runs) > 0 {
			r := runs[0]
			entry.Status = "completed"
			if r.CompletedAt == 0 {
				entry.Status = "running"
			}
			lr := &protocol.FleetExperimentRun{ID: r.ID, StartedAt: r.StartedAt, CompletedAt: r.CompletedAt, Winner: r.Winner}
			for _, v := range r.Variants {
				lr.Variants = append(lr.Variants, protocol.FleetExperimentVariant{Variant: v.Variant, Samples: v.Samples,
					Mean: v.Mean, PassRate: v.PassRate, Lift: v.Lift})
			}
			entry.LatestRun = lr
		}
		m.Experiments = append(m.Experiments, entry)
	}
	return m, nil
}

// each runs query and calls fn for each row.
func each(ctx context.Context, q querier, fn func(*sql.Rows) error, query string, args ...any) error {
	return sqlitefile.Each(ctx, q, fn, query, args...)
}

// score is a success count: passed of judged, out of uses runs.
type score struct{ uses, judged, passed int64 }

// rate is passed/judged, nil without judged runs.
func (sc score) rate() *float64 {
	if sc.judged == 0 {
		return nil
	}
	r := float64(sc.passed) / float64(sc.judged)
	return &r
}

// versionScore is the score of a skill version's own runs (not its
// shadows').
func versionScore(ctx context.Context, q querier, skill string, version int64) (score, error) {
	var sc score
	err := q.QueryRowContext(ctx, `SELECT coalesce(sum(uses), 0), coalesce(sum(judged), 0), coalesce(sum(passed), 0)
		FROM skill_stats WHERE skill = ? AND version = ? AND shadow = ''`, skill, version).Scan(&sc.uses, &sc.judged, &sc.passed)
	return sc, err
}

// shadowScore is the score of the runs that used a shadow.
func shadowScore(ctx context.Context, q querier, skill, shadow string) (score, error) {
	var sc score
	err := q.QueryRowContext(ctx, `SELECT coalesce(sum(uses), 0), coalesce(sum(judged), 0), coalesce(sum(passed), 0)
		FROM skill_stats WHERE skill = ? AND shadow = ?`, skill, shadow).Scan(&sc.uses, &sc.judged, &sc.passed)
	return sc, err
}

func nullable(f sql.NullFloat64) *float64 {
	if !f.Valid {
		return nil
	}
	return &f.Float64
}

func shadowID(n int64) string    { return "sh-" + strconv.FormatInt(n, 10) }
func evolutionID(n int64) string { return "ev-" + strconv.FormatInt(n, 10) }

// decodeVariants reads the experiments.variants column.
func decodeVariants(s string) ([]string, error) {
	var v []string
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return nil, fmt.Errorf("experiment variants %q: %w", s, err)
	}
	return v, nil
}
