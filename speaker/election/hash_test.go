package election

import (
	"encoding/hex"
	"slices"
	"testing"
)

// TestNodeHash pins the formula sha256(node + "#" + ip) with digests computed outside Go
// (printf 'worker#172.18.255.200' | sha256sum), so a change of encoding cannot go unseen.
func TestNodeHash(t *testing.T) {
	for _, tc := range []struct{ node, ip, sum string }{
		{"iris1", "10.20.30.1", "e42ad61a4159fa2d143f5233840565a80f498b6a1e7998d68190d2a357882e2b"},
		{"worker", "172.18.255.200", "f4d872561e84b424aa7f2c5dbc0b9bcdc4975b905d16d84be2b02566c2eea4f6"},
		{"worker2", "172.18.255.200", "b943d82e3be187e01559843ffc51999cfb694d00fb5d037744e776b3d9d1360a"},
		{"worker", "fc00:f853:ccd:e793::1", "5b8ca9a057bf57ea8a23300f9e04478a76fb94445431e9781f75fb33cec9fdc1"},
	} {
		h := NodeHash(tc.node, ip(tc.ip))
		if got := hex.EncodeToString(h[:]); got != tc.sum {
			t.Errorf("NodeHash(%s, %s) = %s, want %s", tc.node, tc.ip, got, tc.sum)
		}
	}
	// Names longer than the stack buffer hash the same way.
	long := string(make([]byte, 200))
	if NodeHash(long, ip("10.0.0.1")) != NodeHash(long, ip("10.0.0.1")) {
		t.Error("long names hash inconsistently")
	}
}

func TestOrder(t *testing.T) {
	// b943… < f4d8…: worker2 before worker.
	if got := Order(ip("172.18.255.200"), []string{"worker", "worker2"}); !slices.Equal(got, []string{"worker2", "worker"}) {
		t.Errorf("Order = %v", got)
	}
	nodes := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	for _, key := range []string{"10.0.0.1", "10.0.0.2", "fc00::1"} {
		got := Order(ip(key), nodes)
		if want := hashOrder(key, nodes...); !slices.Equal(got, want) {
			t.Errorf("Order(%s) = %v, want %v", key, got, want)
		}
		rev := slices.Clone(nodes)
		slices.Reverse(rev)
		if again := Order(ip(key), rev); !slices.Equal(got, again) {
			t.Errorf("Order(%s) depends on input order: %v vs %v", key, got, again)
		}
	}
	if !slices.Equal(nodes, []string{"a", "b", "c", "d", "e", "f", "g", "h"}) {
		t.Error("Order modified its input")
	}
}
