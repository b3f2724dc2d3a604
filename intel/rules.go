package intel

import (
	"cmp"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agents-fleet/fleet/internal/stats"
)

// Suggestion is one thing the store's data says an operator could change,
// with the numbers behind it. Suggestions are computed from the data each
// time they are asked for; only their state (and when each first fired) is
// stored.
type Suggestion struct {
	// ID is stable: a hash of Rule and the rule's key (what the suggestion
	// is about), so a dismissed suggestion stays dismissed when its rule
	// fires again, whatever the numbers then.
	ID string
	// Rule is the rule's name (the protocol's suggestionType).
	Rule string
	// Title is one line, true and specific.
	Title string
	// Evidence is the numbers behind it.
	Evidence string
	// Confidence is in [0, 1]; each rule documents its formula.
	Confidence float64
	// State is "pending", "accepted" or "dismissed".
	State string
	// CreatedAt is when the rule first fired for this key (epoch ms).
	CreatedAt int64

	key string
}

// Suggestion states.
const (
	StatePending   = "pending"
	StateAccepted  = "accepted"
	StateDismissed = "dismissed"
)

// The rules. Each is documented, with its thresholds and confidence, in
// docs/intel-store.md; the constants below are the thresholds. "Judged"
// runs are those not of class cancelled or shutdown; a failure is a judged
// run that did not complete.
const (
	// RuleProviderFailureRate: in one repository, for one task kind,
	// provider A fails at least providerMinRatio times as often as
	// provider B, each with at least providerMinRuns judged runs, and
	// Fisher's exact test (two-sided) gives p < providerAlpha. Over every
	// stored run. Key: repository, kind, A (against the B that gives the
	// smallest p). Confidence: 1 − p.
	RuleProviderFailureRate = "provider-failure-rate"
	// RuleRecurringError: the same error key at least recurringMin times
	// in the window, among failures whose class has no rule of its own
	// (not budget, stall, permission-denied). Key: the error key.
	// Confidence: 1 − 2^−(N−2) (0.5 at 3, 0.75 at 4, 0.875 at 5).
	RuleRecurringError = "recurring-error"
	// RuleBudgetStops: at least budgetMin runs of class budget in the
	// window. One key. Confidence: 1 − 2^−(N−1) (0.5 at 2, 0.75 at 3).
	RuleBudgetStops = "budget-stops"
	// RulePermissionDenials: the same denied tool or command (steering
	// source "deny", grouped by its normalised text) at least denialMin
	// times, over every stored entry. Key: the denial key. Confidence:
	// 1 − 2^−(N−2).
	RulePermissionDenials = "permission-denials"
	// RuleSkillRegression: the newest version of a skill that has judged
	// runs (not counting runs of its shadows) succeeded in fewer than half
	// of at least skillMinRuns. Key: skill and version. Confidence:
	// 1 − P(X ≤ passed) for X ~ Binomial(judged, ½), the one-sided
	// binomial test of "its success rate is below one half".
	RuleSkillRegression = "skill-regression"
	// RuleStalls: at least stallMin runs of class stall in the window. One
	// key. Confidence: 1 − 2^−(N−2).
	RuleStalls = "stalls"
)

// Thresholds of the rules.
const (
	ruleWindow       = 7 * 24 * time.Hour
	providerMinRuns  = 5
	providerMinRatio = 2
	providerAlpha    = 0.05
	recurringMin     = 3
	budgetMin        = 2
	denialMin        = 3
	skillMinRuns     = 5
	stallMin         = 3
)

// querier is what the rules read through: a read transaction.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Suggestions returns every suggestion the data supports now, pending ones
// first (then accepted, then dismissed), each group by confidence, highest
// first. The first time a suggestion fires, its first-seen time is stored
// (the one write a read makes; when it fails, CreatedAt is now and the state
// pending, and the next call tries again).
func (s *Store) Suggestions(ctx context.Context, now time.Time) ([]Suggestion, error) {
	tx, err := s.readTx(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	return s.suggestionsTx(ctx, tx, now)
}

func (s *Store) suggestionsTx(ctx context.Context, tx querier, now time.Time) ([]Suggestion, error) {
	sugs, err := evaluate(ctx, tx, now)
	if err != nil {
		return nil, fmt.Errorf("intel suggestions: %w", err)
	}
	if err := s.joinStates(ctx, tx, sugs, now); err != nil {
		return nil, fmt.Errorf("intel suggestions: %w", err)
	}
	rank := map[string]int{StatePending: 0, StateAccepted: 1, StateDismissed: 2}
	slices.SortFunc(sugs, func(a, b Suggestion) int {
		return cmp.Or(cmp.Compare(rank[a.State], rank[b.State]), cmp.Compare(b.Confidence, a.Confidence),
			cmp.Compare(a.CreatedAt, b.CreatedAt), strings.Compare(a.ID, b.ID))
	})
	return sugs, nil
}

// SetSuggestionState records the operator's decision on a suggestion:
// StateAccepted or StateDismissed (or StatePending, to reopen it). An id no
// rule ever produced is ErrNotFound.
func (s *Store) SetSuggestionState(ctx context.Context, id, state string) error {
	switch state {
	case StateAccepted, StateDismissed, StatePending:
	default:
		return fmt.Errorf("set suggestion %s: state %q is not %q or %q", id, state, StateAccepted, StateDismissed)
	}
	update := func() (int64, error) {
		res, err := s.w.ExecContext(ctx, `UPDATE suggestion_states SET state = ?, updated_at = ? WHERE id = ?`,
			state, s.now().UnixMilli(), id)
		if err != nil {
			return 0, err
		}
		return res.RowsAffected()
	}
	n, err := update()
	if err == nil && n == 0 {
		// Perhaps it fires but was never listed: listing records it.
		if _, err = s.Suggestions(ctx, s.now()); err == nil {
			n, err = update()
		}
	}
	if err != nil {
		return fmt.Errorf("set suggestion %s: %w", id, err)
	}
	if n == 0 {
		return fmt.Errorf("set suggestion %s: %w", id, ErrNotFound)
	}
	return nil
}

// joinStates fills in State and CreatedAt from suggestion_states, storing
// the suggestions seen for the first time.
func (s *Store) joinStates(ctx context.Context, tx querier, sugs []Suggestion, now time.Time) error {
	if len(sugs) == 0 {
		return nil
	}
	type st struct {
		state string
		at    int64
	}
	known := make(map[string]st)
	rows, err := tx.QueryContext(ctx, `SELECT id, state, created_at FROM suggestion_states`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var id string
		var x st
		if err := rows.Scan(&id, &x.state, &x.at); err != nil {
			rows.Close()
			return err
		}
		known[id] = x
	}
	if err := rows.Close(); err != nil {
		return err
	}
	var missing []int
	for i := range sugs {
		if x, ok := known[sugs[i].ID]; ok {
			sugs[i].State, sugs[i].CreatedAt = x.state, x.at
			continue
		}
		sugs[i].State, sugs[i].CreatedAt = StatePending, now.UnixMilli()
		missing = append(missing, i)
	}
	if len(missing) > 0 {
		s.recordFirstSeen(ctx, sugs, missing, now)
	}
	return nil
}

// recordFirstSeen stores the suggestions sugs[missing] as pending, first
// seen now, and reads back what is stored (another process may have been
// first). Best effort: on failure sugs keep pending and now.
func (s *Store) recordFirstSeen(ctx context.Context, sugs []Suggestion, missing []int, now time.Time) {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return
	}
	defer tx.Rollback()
	at := now.UnixMilli()
	for _, i := range missing {
		_, err := tx.ExecContext(ctx, `INSERT INTO suggestion_states (id, rule, key, state, created_at, updated_at)
			VALUES (?, ?, ?, 'pending', ?, ?) ON CONFLICT (id) DO NOTHING`, sugs[i].ID, sugs[i].Rule, sugs[i].key, at, at)
		if err != nil {
			return
		}
		var state string
		var created int64
		err = tx.QueryRowContext(ctx, `SELECT state, created_at FROM suggestion_states WHERE id = ?`, sugs[i].ID).
			Scan(&state, &created)
		if err != nil {
			return
		}
		sugs[i].State, sugs[i].CreatedAt = state, created
	}
	tx.Commit()
}

// suggestionID is the stable id of a rule's suggestion about key.
func suggestionID(rule, key string) string {
	h := sha256.Sum256([]byte(rule + "\x00" + key))
	return "sg-" + hex.EncodeToString(h[:8])
}

func newSuggestion(rule, key, title, evidence string, confidence float64) Suggestion {
	return Suggestion{ID: suggestionID(rule, key), Rule: rule, Title: title, Evidence: evidence,
		Confidence: min(max(confidence, 0), 1), key: key}
}

// evaluate runs every rule.
func evaluate(ctx context.Context, q querier, now time.Time) ([]Suggestion, error) {
	var out []Suggestion
	for _, rule := range []func(context.Context, querier, time.Time) ([]Suggestion, error){
		providerFailureRate, windowRules, permissionDenials, skillRegression,
	} {
		sugs, err := rule(ctx, q, now)
		if err != nil {
			return nil, err
		}
		out = append(out, sugs...)
	}
	return out, nil
}

// providerFailureRate implements RuleProviderFailureRate.
func providerFailureRate(ctx context.Context, q querier, _ time.Time) ([]Suggestion, error) {
	type arm struct {
		provider       string
		judged, failed int64
	}
	type group struct{ repo, kind string }
	groups := make(map[group][]arm)
	var order []group
	rows, err := q.QueryContext(ctx, `SELECT repo, kind, provider, judged, failed FROM provider_stats
		WHERE judged >= ? ORDER BY repo, kind, provider`, providerMinRuns)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var g group
		var a arm
		if err := rows.Scan(&g.repo, &g.kind, &a.provider, &a.judged, &a.failed); err != nil {
			rows.Close()
			return nil, err
		}
		if _, ok := groups[g]; !ok {
			order = append(order, g)
		}
		groups[g] = append(groups[g], a)
	}
	if err := rows.Close(); err != nil {
		return nil, err
	}
	var out []Suggestion
	for _, g := range order {
		arms := groups[g]
		for _, a := range arms {
			if a.failed == 0 {
				continue
			}
			var best *arm
			bestP := math.Inf(1)
			for i := range arms {
				b := &arms[i]
				// rate(a) ≥ ratio × rate(b) and rate(a) > rate(b), in integers.
				if b.provider == a.provider || a.failed*b.judged < providerMinRatio*b.failed*a.judged ||
					a.failed*b.judged <= b.failed*a.judged {
					continue
				}
				p := stats.FisherTwoSided(a.failed, a.judged-a.failed, b.failed, b.judged-b.failed)
				if p < providerAlpha && p < bestP {
					best, bestP = b, p
				}
			}
			if best == nil {
				continue
			}
			where := "in " + g.repo
			if g.repo == "" {
				where = "outside a git repository"
			}
			counts := fmt.Sprintf("%d of %d vs %d of %d runs", a.failed, a.judged, best.failed, best.judged)
			var title string
			if best.failed == 0 {
				title = fmt.Sprintf("%s workers fail on `%s` tasks %s where %s does not (%s)",
					a.provider, g.kind, where, best.provider, counts)
			} else {
				ratio := (float64(a.failed) / float64(a.judged)) / (float64(best.failed) / float64(best.judged))
				title = fmt.Sprintf("%s workers fail %.1f× as often as %s on `%s` tasks %s (%s)",
					a.provider, ratio, best.provider, g.kind, where, counts)
			}
			evidence := fmt.Sprintf("%s failed %d of %d judged runs (%s), %s %d of %d (%s); Fisher exact test, two-sided: p = %s (threshold %g); cancelled and shut-down runs not counted",
				a.provider, a.failed, a.judged, percent(a.failed, a.judged), best.provider, best.failed, best.judged,
				percent(best.failed, best.judged), formatP(bestP), providerAlpha)
			out = append(out, newSuggestion(RuleProviderFailureRate, g.repo+"\x00"+g.kind+"\x00"+a.provider,
				title, evidence, 1-bestP))
		}
	}
	return out, nil
}

// windowRules implements RuleRecurringError, RuleBudgetStops and RuleStalls,
// from one pass over the window's failures.
func windowRules(ctx context.Context, q querier, now time.Time) ([]Suggestion, error) {
	since, until := now.Add(-ruleWindow).UnixMilli(), now.UnixMilli()
	type tally struct {
		n           int64
		first, last int64
		providers   map[string]int64
		kinds       map[string]int64
		classes     map[string]int64
	}
	add := func(t *tally, provider, kind, class string, n, first, last int64) {
		if t.n == 0 {
			t.first, t.last = first, last
			t.providers, t.kinds, t.classes = map[string]int64{}, map[string]int64{}, map[string]int64{}
		}
		t.n += n
		t.first, t.last = min(t.first, first), max(t.last, last)
		t.providers[provider] += n
		t.kinds[kind] += n
		t.classes[class] += n
	}
	errs := make(map[string]*tally)
	var budget, stall tally
	rows, err := q.QueryContext(ctx, `SELECT error_key, class, provider, kind, count(*), min(at), max(at)
		FROM runs WHERE ok = 0 AND at >= ? AND at <= ? AND class NOT IN ('cancelled', 'shutdown')
		GROUP BY error_key, class, provider, kind`, since, until)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var key, class, provider, kind string
		var n, first, last int64
		if err := rows.Scan(&key, &class, &provider, &kind, &n, &first, &last); err != nil {
			rows.Close()
			return nil, err
		}
		switch class {
		case ClassBudget:
			add(&budget, provider, kind, class, n, first, last)
		case ClassStall:
			add(&stall, provider, kind, class, n, first, last)
		case ClassPermission:
		default:
			t := errs[key]
			if t == nil {
				t = new(tally)
				errs[key] = t
			}
			add(t, provider, kind, class, n, first, last)
		}
	}
	if err := rows.Close(); err != nil {
		return nil, err
	}
	var out []Suggestion
	span := func(t *tally) string {
		return fmt.Sprintf("%d runs between %s and %s", t.n, stamp(t.first), stamp(t.last))
	}
	keys := make([]string, 0, len(errs))
	for k := range errs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		t := errs[k]
		if t.n < recurringMin {
			continue
		}
		what := "Agent runs"
		if len(t.kinds) == 1 {
			for kind := range t.kinds {
				what = "`" + kind + "` tasks"
			}
		}
		title := fmt.Sprintf("%s failed %d times in 7 days with: %s", what, t.n, k)
		evidence := fmt.Sprintf("%s; by provider: %s; by task kind: %s; by class: %s",
			span(t), breakdown(t.providers), breakdown(t.kinds), breakdown(t.classes))
		out = append(out, newSuggestion(RuleRecurringError, k, title, evidence, 1-math.Exp2(-float64(t.n-2))))
	}
	if budget.n >= budgetMin {
		title := fmt.Sprintf("%d runs were stopped by a token budget in 7 days: raise budgets.workerTokens in config.json, or give workers smaller tasks", budget.n)
		evidence := fmt.Sprintf("%s; by provider: %s; by task kind: %s", span(&budget),
			breakdown(budget.providers), breakdown(budget.kinds))
		out = append(out, newSuggestion(RuleBudgetStops, "", title, evidence, 1-math.Exp2(-float64(budget.n-1))))
	}
	if stall.n >= stallMin {
		title := fmt.Sprintf("%d runs stalled in 7 days (%s): raise limits.agentStallTimeoutMs or check the model endpoint",
			stall.n, breakdown(stall.providers))
		evidence := fmt.Sprintf("%s; by provider: %s; by task kind: %s", span(&stall),
			breakdown(stall.providers), breakdown(stall.kinds))
		out = append(out, newSuggestion(RuleStalls, "", title, evidence, 1-math.Exp2(-float64(stall.n-2))))
	}
	return out, nil
}

// permissionDenials implements RulePermissionDenials.
func permissionDenials(ctx context.Context, q querier, _ time.Time) ([]Suggestion, error) {
	type denial struct {
		key         string
		n           int64
		first, last int64
	}
	var ds []denial
	rows, err := q.QueryContext(ctx, `SELECT deny_key, count(*), min(created_at), max(created_at) FROM steering
		WHERE deny_key != '' GROUP BY deny_key HAVING count(*) >= ? ORDER BY deny_key`, denialMin)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var d denial
		if err := rows.Scan(&d.key, &d.n, &d.first, &d.last); err != nil {
			rows.Close()
			return nil, err
		}
		ds = append(ds, d)
	}
	if err := rows.Close(); err != nil {
		return nil, err
	}
	var out []Suggestion
	for _, d := range ds {
		targets := make(map[string]int64)
		// "deny_key != ''" lets SQLite use the partial index.
		rows, err := q.QueryContext(ctx, `SELECT target, count(*) FROM steering
			WHERE deny_key = ? AND deny_key != '' GROUP BY target`, d.key)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var t string
			var n int64
			if err := rows.Scan(&t, &n); err != nil {
				rows.Close()
				return nil, err
			}
			if t == "" {
				t = "(session)"
			}
			targets[t] = n
		}
		if err := rows.Close(); err != nil {
			return nil, err
		}
		title := fmt.Sprintf("`%s` was denied %d times: add it to the policy (confirmPatterns, or the provider's permission settings) so that workers stop asking",
			clip(d.key, 80), d.n)
		evidence := fmt.Sprintf("%d denials between %s and %s; by worker: %s", d.n, stamp(d.first), stamp(d.last),
			breakdown(targets))
		out = append(out, newSuggestion(RulePermissionDenials, d.key, title, evidence, 1-math.Exp2(-float64(d.n-2))))
	}
	return out, nil
}

// skillRegression implements RuleSkillRegression.
func skillRegression(ctx context.Context, q querier, _ time.Time) ([]Suggestion, error) {
	type ver struct {
		skill          string
		version        int64
		judged, passed int64
	}
	var newest []ver
	// Per skill, its newest version with judged runs of its own.
	rows, err := q.QueryContext(ctx, `SELECT skill, version, sum(judged), sum(passed) FROM skill_stats
		WHERE shadow = '' GROUP BY skill, version HAVING sum(judged) > 0 ORDER BY skill, version DESC`)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var v ver
		if err := rows.Scan(&v.skill, &v.version, &v.judged, &v.passed); err != nil {
			rows.Close()
			return nil, err
		}
		if len(newest) == 0 || newest[len(newest)-1].skill != v.skill {
			newest = append(newest, v)
		}
	}
	if err := rows.Close(); err != nil {
		return nil, err
	}
	var out []Suggestion
	for _, v := range newest {
		if v.judged < skillMinRuns || 2*v.passed >= v.judged {
			continue
		}
		name := "`" + v.skill + "`"
		if v.version != 0 {
			name += " v" + strconv.FormatInt(v.version, 10)
		}
		title := fmt.Sprintf("skill %s succeeded in %d of %d runs (%s): run /learn %s",
			name, v.passed, v.judged, percent(v.passed, v.judged), v.skill)
		p := stats.BinomLowerTail(v.passed, v.judged)
		evidence := fmt.Sprintf("%d of %d judged runs of %s completed; one-sided binomial test against a 50%% success rate: p = %s",
			v.passed, v.judged, name, formatP(p))
		out = append(out, newSuggestion(RuleSkillRegression, v.skill+"\x00"+strconv.FormatInt(v.version, 10),
			title, evidence, 1-p))
	}
	return out, nil
}

// breakdown formats counts as "a 3, b 1", largest first.
func breakdown(m map[string]int64) string {
	type kv struct {
		k string
		n int64
	}
	var kvs []kv
	for k, n := range m {
		if k == "" {
			k = "(none)"
		}
		kvs = append(kvs, kv{k, n})
	}
	slices.SortFunc(kvs, func(a, b kv) int { return cmp.Or(cmp.Compare(b.n, a.n), strings.Compare(a.k, b.k)) })
	parts := make([]string, len(kvs))
	for i, x := range kvs {
		parts[i] = x.k + " " + strconv.FormatInt(x.n, 10)
	}
	return strings.Join(parts, ", ")
}

func percent(n, of int64) string {
	if of == 0 {
		return "–"
	}
	return strconv.FormatFloat(100*float64(n)/float64(of), 'f', 0, 64) + "%"
}

func formatP(p float64) string {
	if p < 0.0001 {
		return "< 0.0001"
	}
	return strconv.FormatFloat(p, 'f', 4, 64)
}

// stamp formats an epoch-ms time for evidence, in UTC.
func stamp(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02 15:04Z")
}
