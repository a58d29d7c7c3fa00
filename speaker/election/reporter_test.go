package election

import "testing"

func TestIsReporter(t *testing.T) {
	for _, c := range []struct {
		live []string
		self string
		want bool
	}{
		{[]string{"b", "a", "c"}, "a", true},
		{[]string{"b", "a", "c"}, "b", false},
		{[]string{"b"}, "b", true},
		{nil, "a", false},
	} {
		if got := IsReporter(c.live, c.self); got != c.want {
			t.Errorf("IsReporter(%v, %s) = %v, want %v", c.live, c.self, got, c.want)
		}
	}
}
