package testkit

import (
	"cmp"
	"math"
	"slices"
)

// Quantile is the q-quantile of v by nearest rank: the smallest value with at least a
// fraction q of v at or below it, so 0.5 is the lower median and 1 the maximum. It is
// the zero value for an empty v. v is not changed.
func Quantile[T cmp.Ordered](v []T, q float64) T {
	if len(v) == 0 {
		var zero T
		return zero
	}
	s := slices.Clone(v)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}
