package iptables

import (
	"fmt"
	"testing"
)

func TestProbability(t *testing.T) {
	for n, want := range map[int]string{2: "0.5000000000", 3: "0.3333333333", 4: "0.2500000000", 7: "0.1428571429",
		1000: "0.0010000000", 1023: "0.0009775171", 1024: "0.0009765625", 100000: "0.0000100000"} {
		if got := probability(n); got != want {
			t.Errorf("probability(%d) = %s, want %s", n, got, want)
		}
	}
	// kube-proxy formats with fmt "%0.10f"; the cached and uncached paths must agree.
	for n := 1; n <= 3000; n++ {
		if got, want := probability(n), fmt.Sprintf("%0.10f", 1.0/float64(n)); got != want {
			t.Fatalf("probability(%d) = %s, want %s", n, got, want)
		}
	}
}
