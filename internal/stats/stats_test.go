package stats

import (
	"math"
	"testing"
)

func TestFisherTwoSided(t *testing.T) {
	for _, tc := range []struct {
		a, b, c, d int64
		want       float64
	}{
		// Margins 5/5, 5 failures: only the two extreme tables, each
		// 1/C(10,5) = 1/252.
		{5, 0, 0, 5, 2.0 / 252},
		// Margins 5/5, 4 failures: P(4) = P(0) = C(5,4)·C(5,0)/C(10,4) = 5/210.
		{4, 1, 0, 5, 10.0 / 210},
		// Margins 5/5, 3 failures: P(3) = P(0) = 10/120; P(1) = P(2) = 50/120.
		{3, 2, 0, 5, 20.0 / 120},
		// P(x) = C(10,x)²/C(20,10): x ∈ {0,1,2,8,9,10} → 2·(1+100+2025)/184756.
		{8, 2, 2, 8, 4252.0 / 184756},
		// Wikipedia's example (dieting by sex), two-sided 0.002759.
		{1, 9, 11, 3, 0.0027594},
		{3, 3, 3, 3, 1},
		{0, 0, 0, 0, 1},
	} {
		if got := FisherTwoSided(tc.a, tc.b, tc.c, tc.d); math.Abs(got-tc.want) > 1e-6 {
			t.Errorf("fisher(%d %d %d %d) = %.7f, want %.7f", tc.a, tc.b, tc.c, tc.d, got, tc.want)
		}
	}
}

func TestBinomLowerTail(t *testing.T) {
	for _, tc := range []struct {
		k, n int64
		want float64
	}{
		{2, 5, 16.0 / 32}, // (1+5+10)/2^5
		{1, 6, 7.0 / 64},  // (1+6)/2^6
		{0, 5, 1.0 / 32},
		{5, 5, 1},
	} {
		if got := BinomLowerTail(tc.k, tc.n); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("P(X ≤ %d | %d) = %v, want %v", tc.k, tc.n, got, tc.want)
		}
	}
}
