package members

import (
	"slices"
	"testing"
)

func TestPeersToJoin(t *testing.T) {
	for _, tc := range []struct {
		name             string
		candidates, live []string
		self             string
		want             []string
	}{
		{"nothing", nil, nil, "10.0.0.1:7946", nil},
		{"default port added", []string{"10.0.0.2", "10.0.0.3"}, nil, "10.0.0.1:7946",
			[]string{"10.0.0.2:7946", "10.0.0.3:7946"}},
		{"self skipped with or without port", []string{"10.0.0.1", "10.0.0.1:7946", "10.0.0.2"}, nil, "10.0.0.1:7946",
			[]string{"10.0.0.2:7946"}},
		{"self on another port is another member", []string{"10.0.0.1:8000"}, nil, "10.0.0.1:7946",
			[]string{"10.0.0.1:8000"}},
		{"live skipped", []string{"10.0.0.2", "10.0.0.3", "10.0.0.4"}, []string{"10.0.0.1:7946", "10.0.0.3:7946"}, "10.0.0.1:7946",
			[]string{"10.0.0.2:7946", "10.0.0.4:7946"}},
		{"all live: nothing", []string{"10.0.0.2", "10.0.0.3"}, []string{"10.0.0.2:7946", "10.0.0.3"}, "10.0.0.1:7946", nil},
		{"duplicates and order", []string{"10.0.0.9", "10.0.0.2:7946", "10.0.0.2", "10.0.0.9"}, nil, "10.0.0.1:7946",
			[]string{"10.0.0.2:7946", "10.0.0.9:7946"}},
		{"IPv6 bracketed and normalized", []string{"fd00::2", "[fd00:0::3]:7946", "[fd00::1]:7946"}, nil, "[fd00::1]:7946",
			[]string{"[fd00::2]:7946", "[fd00::3]:7946"}},
		{"malformed dropped", []string{"", ":7946", "10.0.0.2:0", "10.0.0.2:x", "10.0.0.2:99999", "10.0.0.5"}, nil, "10.0.0.1:7946",
			[]string{"10.0.0.5:7946"}},
		{"host names kept", []string{"speaker-0.example"}, nil, "10.0.0.1:7946", []string{"speaker-0.example:7946"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := PeersToJoin(tc.candidates, tc.live, tc.self)
			if !slices.Equal(got, tc.want) {
				t.Errorf("PeersToJoin(%q, %q, %q) = %q, want %q", tc.candidates, tc.live, tc.self, got, tc.want)
			}
		})
	}
}
