package members

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"herald.dev/herald/internal/testkit"
)

// metaSeen collects the metadata a member hears of its peers.
type metaSeen struct {
	mu  sync.Mutex
	got map[string]string
}

func (s *metaSeen) note(name string, data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got[name] = string(data)
}

func (s *metaSeen) of(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.got[name]
}

// A member's metadata reaches its peers when they join, and again when it changes;
// what memberlist cannot carry is refused, not sent cut.
func TestMetaReachesPeers(t *testing.T) {
	a, b := start(t, "node0", testKey), start(t, "node1", testKey)
	seen := &metaSeen{got: map[string]string{}}
	b.OnMeta(seen.note)
	if !a.SetMeta([]byte("02:00:00:00:00:0a")) {
		t.Fatal("SetMeta refused 17 bytes")
	}
	if _, err := b.Join([]string{a.Addr()}); err != nil {
		t.Fatalf("join: %v", err)
	}
	testkit.Eventually(t, 5*time.Second, convergeTick, "b hears a's metadata", testkit.Holds(func() bool { return seen.of(a.name) == "02:00:00:00:00:0a" },
		func() string { return fmt.Sprintf("b heard a's metadata as %q", seen.of(a.name)) }))

	a.SetMeta([]byte("02:00:00:00:00:0a,02:00:00:00:00:0b"))
	testkit.Eventually(t, 5*time.Second, convergeTick, "b hears a's new metadata", testkit.Holds(func() bool { return seen.of(a.name) == "02:00:00:00:00:0a,02:00:00:00:00:0b" },
		func() string { return fmt.Sprintf("b heard a's new metadata as %q", seen.of(a.name)) }))

	if a.SetMeta([]byte(strings.Repeat("x", 513))) {
		t.Error("SetMeta took 513 bytes; memberlist carries 512")
	}
	time.Sleep(300 * time.Millisecond)
	if got := seen.of(a.name); got != "02:00:00:00:00:0a,02:00:00:00:00:0b" {
		t.Errorf("after a refused SetMeta b heard %q", got)
	}
}
