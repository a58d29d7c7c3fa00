package lab

import (
	"errors"
	"testing"
)

// Failures differing only in the client's ephemeral address and port count as one, in
// either family.
func TestNormalizeErrorDropsTheClientsAddress(t *testing.T) {
	for _, tc := range []struct{ a, b string }{
		{"dial tcp 172.18.0.100:41234->172.18.255.200:80: i/o timeout", "dial tcp 172.18.0.100:5555->172.18.255.200:80: i/o timeout"},
		{"read tcp [fc00:f853:ccd:e793::100]:41234->[fc00:f853:ccd:e793::c8]:80: reset", "read tcp [fc00:f853:ccd:e793::100]:6->[fc00:f853:ccd:e793::c8]:80: reset"},
	} {
		a, b := normalizeError(errors.New(tc.a)), normalizeError(errors.New(tc.b))
		if a != b {
			t.Errorf("%q and %q count apart", a, b)
		}
	}
}
