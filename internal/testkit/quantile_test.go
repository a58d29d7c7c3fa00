package testkit

import (
	"slices"
	"testing"
	"time"
)

func TestQuantileNearestRank(t *testing.T) {
	v := []int{50, 10, 40, 20, 30}
	for _, c := range []struct {
		q    float64
		want int
	}{{0, 10}, {0.2, 10}, {0.21, 20}, {0.5, 30}, {0.9, 50}, {1, 50}} {
		if got := Quantile(v, c.q); got != c.want {
			t.Errorf("Quantile(%v, %v) = %d, want %d", v, c.q, got, c.want)
		}
	}
	if !slices.Equal(v, []int{50, 10, 40, 20, 30}) {
		t.Errorf("Quantile sorted its input: %v", v)
	}
	if got := Quantile([]time.Duration{4, 1, 3, 2}, 0.5); got != 2 {
		t.Errorf("median of four = %v, want the lower middle 2", got)
	}
	if got := Quantile[float64](nil, 0.5); got != 0 {
		t.Errorf("Quantile of nothing = %v, want 0", got)
	}
}
