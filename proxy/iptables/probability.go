package iptables

import (
	"strconv"
	"sync"
)

// probability returns the --probability argument of the rule that picks the first of n
// remaining endpoints: 1/n with ten decimals, as kube-proxy's computeProbability
// (fmt "%0.10f"), e.g. "0.5000000000", "0.3333333333".
func probability(n int) string {
	if n < len(probabilityCache()) {
		return probabilityCache()[n]
	}
	return formatProbability(n)
}

func formatProbability(n int) string {
	return strconv.FormatFloat(1.0/float64(n), 'f', 10, 64)
}

// probabilityCache holds the strings for small n; kube-proxy keeps the same kind of cache
// because formatting floats shows up in profiles of large syncs.
var probabilityCache = sync.OnceValue(func() []string {
	cache := make([]string, 1024)
	for n := 1; n < len(cache); n++ {
		cache[n] = formatProbability(n)
	}
	return cache
})
