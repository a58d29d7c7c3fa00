package memberkey

import (
	"strings"
	"testing"
)

func TestRotationSteps(t *testing.T) {
	oldM, newM := []byte("old-key-material-0123"), []byte("new-key-material-0123")
	oldK, _ := derive(oldM)
	newK, _ := derive(newM)
	data := map[string][]byte{DataKey: oldM}
	both := Report([][]byte{oldK, newK})
	onlyOld := Report([][]byte{oldK})

	// add
	if _, _, err := Add(data, "bad/label", newM); err == nil {
		t.Error("Add accepted a label with a slash")
	}
	if _, _, err := Add(data, "copy", oldM); err == nil || !strings.Contains(err.Error(), "already holds this key") {
		t.Errorf("Add of the same key: %v", err)
	}
	added, k, err := Add(data, "next", newM)
	must(t, err)
	if k.Name != "secretkey.next" || len(data) != 1 {
		t.Fatalf("Add: key %s; the input was changed: %v", k.Name, len(data) != 1)
	}
	ring, _ := KeyringFromSecretData(added)
	if ring[0].Name != DataKey || len(ring) != 2 {
		t.Fatalf("after Add: %v, want the old key still primary", ring)
	}
	if _, _, err := Add(added, "next", []byte("other-key-material-01")); err == nil {
		t.Error("Add over an existing entry")
	}

	// use
	if _, _, err := Use(added, "next", map[string]string{"a": both, "b": onlyOld}); err == nil || !strings.Contains(err.Error(), "[b] do not hold") {
		t.Errorf("Use while b lacks the key: %v", err)
	}
	if _, _, err := Use(added, "nope", nil); err == nil || !strings.Contains(err.Error(), "no key") {
		t.Errorf("Use of a missing key: %v", err)
	}
	used, _, err := Use(added, Fingerprint(newK), map[string]string{"a": both, "b": both})
	must(t, err)
	ring, _ = KeyringFromSecretData(used)
	if ring[0].Name != "secretkey.next" {
		t.Fatalf("after Use: primary %s", ring[0].Name)
	}

	// remove
	if _, _, err := Remove(used, "next", nil); err == nil || !strings.Contains(err.Error(), "is the primary") {
		t.Errorf("Remove of the primary: %v", err)
	}
	if _, _, err := Remove(used, DataKey, map[string]string{"a": Report([][]byte{newK, oldK}), "b": both}); err == nil || !strings.Contains(err.Error(), "[b] still send") {
		t.Errorf("Remove of a key b sends with: %v", err)
	}
	removed, _, err := Remove(used, DataKey, map[string]string{"a": Report([][]byte{newK, oldK}), "b": Report([][]byte{newK, oldK})})
	must(t, err)
	ring, err = KeyringFromSecretData(removed)
	must(t, err)
	if len(ring) != 1 || ring[0].Name != "secretkey.next" {
		t.Fatalf("after Remove: %v", ring)
	}

	// pending
	if p := Pending(ring, map[string]string{"a": Report([][]byte{newK}), "b": Report([][]byte{newK, oldK}), "c": ""}); len(p) != 2 ||
		!strings.HasPrefix(p[0], "b: ") || p[1] != "c: no report" {
		t.Errorf("Pending = %v, want b and c", p)
	}
}
