// Package stats holds the exact tests the fleet's decisions rest on:
// Fisher's exact test (experiments' winners, the provider-failure-rate
// rule) and the binomial lower tail (the skill-regression rule).
package stats

import "math"

// FisherTwoSided is the two-sided p-value of Fisher's exact test on the 2×2
// table [[a b] [c d]]: the probability, with the margins fixed, of a table
// at most as likely as the one observed. Probabilities within a relative
// 1e-7 of the observed one count as equal (R's fisher.test does the same),
// so rounding cannot drop a table that ties. Negative counts give 1.
func FisherTwoSided(a, b, c, d int64) float64 {
	if a < 0 || b < 0 || c < 0 || d < 0 {
		return 1
	}
	r1, r2, c1 := a+b, c+d, a+c
	n := r1 + r2
	if n == 0 {
		return 1
	}
	lo, hi := max(0, c1-r2), min(r1, c1)
	base := lchoose(n, c1)
	logp := func(x int64) float64 { return lchoose(r1, x) + lchoose(r2, c1-x) - base }
	obs := logp(a) + math.Log1p(1e-7)
	var p float64
	for x := lo; x <= hi; x++ {
		if lp := logp(x); lp <= obs {
			p += math.Exp(lp)
		}
	}
	return min(p, 1)
}

// BinomLowerTail is P(X ≤ k) for X ~ Binomial(n, 1/2).
func BinomLowerTail(k, n int64) float64 {
	if k >= n {
		return 1
	}
	var p float64
	for i := int64(0); i <= k; i++ {
		p += math.Exp(lchoose(n, i) - float64(n)*math.Ln2)
	}
	return min(p, 1)
}

// lchoose is log(n choose k).
func lchoose(n, k int64) float64 {
	return lfact(n) - lfact(k) - lfact(n-k)
}

func lfact(n int64) float64 {
	v, _ := math.Lgamma(float64(n) + 1)
	return v
}
