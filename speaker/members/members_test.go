package members

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"herald.dev/herald/internal/testkit"
)

func TestThreeMembersJoin(t *testing.T) {
	ms := cluster(t, 3)
	for _, m := range ms {
		if got := gaugeValue(m.gauge); got != 3 {
			t.Errorf("%s: herald_memberlist_members = %v, want 3", m.name, got)
		}
		if n, err := gatherCount(m.reg, "herald_memberlist_members"); err != nil || n != 1 {
			t.Errorf("%s: gauge gathered %d times (err %v), want once", m.name, n, err)
		}
	}
	// Joining again (everyone, self included, in any form) contacts nobody.
	addrs := []string{ms[0].Addr(), ms[1].Addr(), ms[2].Addr(), ms[2].Addr()}
	for _, m := range ms {
		if n, err := m.Join(addrs); n != 0 || err != nil {
			t.Errorf("%s: second Join = %d, %v; want 0, nil", m.name, n, err)
		}
	}
}

func TestLeaveDropsMemberPromptly(t *testing.T) {
	ms := cluster(t, 3)
	a, b, c := ms[0], ms[1], ms[2]
	drain(a.Events())
	t0 := time.Now()
	if err := c.Leave(time.Second, false); err != nil {
		t.Fatal(err)
	}
	if err := c.Shutdown(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.Events():
	case <-time.After(5 * time.Second):
		t.Fatal("no membership event on a after c left")
	}
	want := []string{a.name, b.name}
	for _, m := range []member{a, b} {
		testkit.Eventually(t, 5*time.Second, convergeTick, "the left member dropped", testkit.Holds(func() bool { return slices.Equal(m.Live(), want) },
			func() string { return fmt.Sprintf("%s sees %v, want %v", m.name, m.Live(), want) }))
	}
	t.Logf("left member dropped by both peers after %v", time.Since(t0))
	if got := gaugeValue(a.gauge); got != 2 {
		t.Errorf("herald_memberlist_members = %v, want 2", got)
	}
	for _, m := range []member{a, b} {
		if !m.LeftGracefully(c.name) {
			t.Errorf("%s: LeftGracefully(%s) = false after a Leave", m.name, c.name)
		}
		if m.LeftGracefully(a.name) || m.LeftGracefully(b.name) {
			t.Errorf("%s: a live member counts as having left", m.name)
		}
		if !m.IsLive(a.name) || !m.IsLive(b.name) || m.IsLive(c.name) {
			t.Errorf("%s: IsLive(%s, %s, %s) = %v, %v, %v; want true, true, false", m.name, a.name, b.name, c.name,
				m.IsLive(a.name), m.IsLive(b.name), m.IsLive(c.name))
		}
	}
}

func TestKilledMemberDetected(t *testing.T) {
	ms := cluster(t, 3)
	a, b, c := ms[0], ms[1], ms[2]
	drain(a.Events())
	t0 := time.Now()
	if err := c.Shutdown(); err != nil { // no Leave: a crash, as far as peers can tell
		t.Fatal(err)
	}
	want := []string{a.name, b.name}
	for _, m := range []member{a, b} {
		testkit.Eventually(t, 20*time.Second, convergeTick, "the killed member declared dead", testkit.Holds(func() bool { return slices.Equal(m.Live(), want) },
			func() string { return fmt.Sprintf("%s sees %v, want %v", m.name, m.Live(), want) }))
		t.Logf("%s declared the killed member dead after %v", m.name, time.Since(t0))
	}
	select {
	case <-a.Events():
	default:
		t.Error("no membership event on a after c died")
	}
	for _, m := range []member{a, b} {
		if m.LeftGracefully(c.name) {
			t.Errorf("%s: LeftGracefully(%s) = true for a member that died", m.name, c.name)
		}
	}
}

func TestWrongKeyCannotJoin(t *testing.T) {
	a := start(t, "a", testKey)
	b := start(t, "b", mustKey("another-key-material-987654321"))
	n, err := b.Join([]string{a.Addr()})
	t.Logf("Join with the wrong key: %d, %v", n, err)
	if err == nil && n > 0 {
		// Even if a stream got through, the cluster must not form.
		t.Log("join reported success; checking that neither side sees the other")
	}
	time.Sleep(2 * time.Second)
	if got := a.Live(); !slices.Equal(got, []string{"a"}) {
		t.Errorf("a sees %v, want [a]", got)
	}
	if got := b.Live(); !slices.Equal(got, []string{"b"}) {
		t.Errorf("b sees %v, want [b]", got)
	}
}

func TestStartWithoutKeyFails(t *testing.T) {
	_, err := Start(testConfig("a", nil), logr.Discard(), nil)
	if !errors.Is(err, ErrNoKey) {
		t.Fatalf("Start without key: err = %v, want ErrNoKey", err)
	}
	if !strings.Contains(err.Error(), "mandatory") {
		t.Errorf("error %q does not say encryption is mandatory", err)
	}
}

func TestStartInvalidConfigFails(t *testing.T) {
	cfg := testConfig("", testKey)
	if _, err := Start(cfg, logr.Discard(), nil); err == nil {
		t.Fatal("Start without a node name succeeded")
	}
}

func TestGaugeRegistration(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := Start(testConfig("a", testKey), logr.Discard(), reg)
	if err != nil {
		t.Fatal(err)
	}
	if got := gaugeValue(m.gauge); got != 1 {
		t.Errorf("a lone member counts %v members, want 1", got)
	}
	// A second instance on the same registry is refused, and unregisters nothing.
	if _, err := Start(testConfig("b", testKey), logr.Discard(), reg); err == nil {
		t.Error("second Start on the same registry succeeded")
	}
	if n, _ := gatherCount(reg, "herald_memberlist_members"); n != 1 {
		t.Errorf("gauge gathered %d times, want 1", n)
	}
	if err := m.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if err := m.Shutdown(); err != nil {
		t.Errorf("second Shutdown: %v", err)
	}
	// Shutdown unregistered the gauge, so a new instance can register.
	m2, err := Start(testConfig("a", testKey), logr.Discard(), reg)
	if err != nil {
		t.Fatalf("Start after Shutdown: %v", err)
	}
	_ = m2.Shutdown()
}

func TestJoinUnreachable(t *testing.T) {
	a := start(t, "a", testKey)
	// Port 1 on loopback refuses TCP at once.
	n, err := a.Join([]string{"127.0.0.1:1"})
	if n != 0 || err == nil {
		t.Errorf("Join(unreachable) = %d, %v; want 0 and an error", n, err)
	}
	if err != nil && !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Errorf("error %q does not name the peer", err)
	}
}
