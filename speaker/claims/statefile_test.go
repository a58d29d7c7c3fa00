package claims

import (
	"net/netip"
	"os"
	"reflect"
	"testing"
	"time"
)

func TestClaimsSurviveARestartOnce(t *testing.T) {
	dir := t.TempDir()
	c := Set{netip.MustParseAddr("172.18.255.200"): {Token: "t1", Over: []string{"worker"}}, netip.MustParseAddr("fc00::5"): {}}
	if err := Save(dir, "worker2", c); err != nil {
		t.Fatal(err)
	}
	if err := Save(dir, "worker3", Set{netip.MustParseAddr("172.18.255.201"): {}}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	got, err := Load(dir, "worker2", 10*time.Second, now)
	if err != nil || !reflect.DeepEqual(got, c) {
		t.Fatalf("Load = %v, %v; want %v", got, err, c)
	}
	if again, err := Load(dir, "worker2", 10*time.Second, now); err != nil || again != nil {
		t.Errorf("a second load = %v, %v; want nothing (good for one start)", again, err)
	}

	// Older than the hold: the peers have moved the IPs; nothing to take back.
	if err := Save(dir, "worker2", c); err != nil {
		t.Fatal(err)
	}
	if got, err := Load(dir, "worker2", 10*time.Second, now.Add(time.Minute)); err != nil || got != nil {
		t.Errorf("stale claims loaded: %v, %v", got, err)
	}
	if _, err := os.Stat(stateFile(dir, "worker3")); err != nil {
		t.Errorf("another node's claims went: %v", err)
	}
	// No directory, or no hold: nothing kept.
	if got, err := Load("", "worker3", 10*time.Second, now); got != nil || err != nil {
		t.Errorf("no state dir: %v, %v", got, err)
	}
	if got, err := Load(dir, "worker3", 0, now); got != nil || err != nil {
		t.Errorf("no hold: %v, %v", got, err)
	}
}

// A running speaker touches its saved claims; killed without a word, it leaves them as
// old as its last touch: taken back within the hold, not after it.
func TestTouchKeepsSavedClaimsCurrent(t *testing.T) {
	dir := t.TempDir()
	c := Set{netip.MustParseAddr("172.18.255.200"): {Gen: 2}}
	if err := Save(dir, "worker", c); err != nil {
		t.Fatal(err)
	}
	saved := time.Now()
	killed := saved.Add(time.Minute) // touched until then, then killed
	if err := Touch(dir, "worker", killed); err != nil {
		t.Fatal(err)
	}
	if got, err := Load(dir, "worker", 10*time.Second, killed.Add(2*time.Second)); err != nil || !reflect.DeepEqual(got, c) {
		t.Errorf("claims touched 2 s before the start: Load = %v, %v; want %v", got, err, c)
	}
	if err := Save(dir, "worker", c); err != nil {
		t.Fatal(err)
	}
	if err := Touch(dir, "worker", killed); err != nil {
		t.Fatal(err)
	}
	if got, err := Load(dir, "worker", 10*time.Second, killed.Add(time.Minute)); err != nil || got != nil {
		t.Errorf("claims last touched a minute before the start: Load = %v, %v; want none", got, err)
	}
	if err := Touch(dir, "nobody", killed); err != nil {
		t.Errorf("touching claims never saved: %v", err)
	}
	if err := Touch("", "worker", killed); err != nil {
		t.Errorf("touching with no state dir: %v", err)
	}
}
