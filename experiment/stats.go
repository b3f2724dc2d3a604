package experiment

import (
	"fmt"
	"slices"

	exact "github.com/agents-fleet/fleet/internal/stats"
)

// Alpha is the significance level of the decision.
const Alpha = 0.05

// TestName names the test Decide applies, as results and the intel store
// record it.
const TestName = "Fisher exact, two-sided, alpha 0.05"

// VariantStats are one arm's figures over the samples that ran (samples
// that could not be set up are not counted).
type VariantStats struct {
	Variant        string  `json:"variant"`
	Provider       string  `json:"provider"`
	Model          string  `json:"model,omitempty"`
	Skill          string  `json:"skill,omitempty"`
	SkillVersion   int     `json:"skillVersion,omitempty"`
	Samples        int64   `json:"samples"`
	Passed         int64   `json:"passed"`
	PassRate       float64 `json:"passRate"`
	Mean           float64 `json:"mean"` // mean score, pass = 1, fail = 0
	MeanDurationMs float64 `json:"meanDurationMs"`
	MeanTokens     float64 `json:"meanTokens"`
	// Lift is (Mean - control's Mean) / control's Mean: nil for the
	// control and when the control's Mean is 0.
	Lift *float64 `json:"lift"`
}

// Decision is the verdict of the stated test.
type Decision struct {
	Test string `json:"test"`
	// Compared are the arm with the highest pass rate and the one with the
	// next highest (the earlier arm first among equals); empty when fewer
	// than two arms have samples.
	Compared []string `json:"compared,omitempty"`
	// PValue is Fisher's exact two-sided p-value for Compared; nil when
	// there is nothing to compare.
	PValue *float64 `json:"pValue"`
	// Winner is the best arm when PValue < Alpha, else "".
	Winner string `json:"winner"`
	// Reason says in a sentence why there is a winner or none.
	Reason string `json:"reason"`
}

// Summarise computes each arm's figures from its samples' outcomes. stats
// must hold one entry per arm (Variant and the descriptive fields set), in
// the file's order, the control first; samples are matched by Variant.
// Samples with SetupError or Interrupted are not counted.
func Summarise(stats []VariantStats, samples []Sample) {
	idx := map[string]int{}
	for i := range stats {
		idx[stats[i].Variant] = i
		stats[i].Samples, stats[i].Passed = 0, 0
	}
	dur := make([]float64, len(stats))
	tok := make([]float64, len(stats))
	for _, s := range samples {
		i, ok := idx[s.Variant]
		if !ok || s.SetupError || s.Interrupted {
			continue
		}
		stats[i].Samples++
		if s.Pass {
			stats[i].Passed++
		}
		dur[i] += float64(s.DurationMs)
		tok[i] += float64(s.Tokens)
	}
	for i := range stats {
		v := &stats[i]
		v.PassRate, v.Mean, v.MeanDurationMs, v.MeanTokens, v.Lift = 0, 0, 0, 0, nil
		if v.Samples > 0 {
			n := float64(v.Samples)
			v.PassRate = float64(v.Passed) / n
			v.Mean = v.PassRate
			v.MeanDurationMs = dur[i] / n
			v.MeanTokens = tok[i] / n
		}
	}
	if len(stats) == 0 || stats[0].Samples == 0 || stats[0].Mean == 0 {
		return
	}
	for i := 1; i < len(stats); i++ {
		if stats[i].Samples > 0 {
			lift := (stats[i].Mean - stats[0].Mean) / stats[0].Mean
			stats[i].Lift = &lift
		}
	}
}

// Decide applies the stated test: the arm with the highest pass rate
// against the arm with the next highest, Fisher's exact test (two-sided)
// on their 2×2 table of passes and failures. The best arm wins when
// p < Alpha; a tie for the highest rate, or p ≥ Alpha, is no winner.
// Arms without samples take no part.
func Decide(stats []VariantStats) Decision {
	d := Decision{Test: TestName}
	var ranked []VariantStats
	for _, v := range stats {
		if v.Samples > 0 {
			ranked = append(ranked, v)
		}
	}
	if len(ranked) < 2 {
		d.Reason = "fewer than two arms have samples: nothing to compare"
		return d
	}
	// Stable: among equal rates the earlier arm (the control first) ranks
	// higher. Rates compare exactly, by cross-multiplying the counts.
	slices.SortStableFunc(ranked, func(a, b VariantStats) int { return -compareRates(a, b) })
	best, next := ranked[0], ranked[1]
	d.Compared = []string{best.Variant, next.Variant}
	p := FisherExact(best.Passed, best.Samples-best.Passed, next.Passed, next.Samples-next.Passed)
	d.PValue = &p
	switch {
	case compareRates(best, next) == 0:
		d.Reason = fmt.Sprintf("%s and %s tie for the highest pass rate (%s)", best.Variant, next.Variant, percent(best.PassRate))
	case p < Alpha:
		d.Winner = best.Variant
		d.Reason = fmt.Sprintf("%s (%d/%d) passes more often than %s (%d/%d), significant at %g",
			best.Variant, best.Passed, best.Samples, next.Variant, next.Passed, next.Samples, Alpha)
	default:
		d.Reason = fmt.Sprintf("%s (%d/%d) against %s (%d/%d) is not significant at %g",
			best.Variant, best.Passed, best.Samples, next.Variant, next.Passed, next.Samples, Alpha)
	}
	return d
}

// compareRates orders two arms with samples by pass rate.
func compareRates(a, b VariantStats) int {
	x, y := a.Passed*b.Samples, b.Passed*a.Samples
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// FisherExact is the two-sided p-value of Fisher's exact test on the 2×2
// table [[a b] [c d]] (internal/stats).
func FisherExact(a, b, c, d int64) float64 { return exact.FisherTwoSided(a, b, c, d) }

// FormatP prints a p-value with four significant digits: 0.0325,
// 1.083e-05, 1.
func FormatP(p float64) string { return fmt.Sprintf("%.4g", p) }

func percent(rate float64) string { return fmt.Sprintf("%.1f%%", rate*100) }
