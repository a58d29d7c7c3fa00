package memberkey

import (
	"slices"
	"testing"
)

// FuzzKeyringFromSecretData reads Secrets of two key entries and a primary entry, any
// bytes in each. Invariants: no panic; a keyring that reads has its primary first
// (the entry the primary entry names, else secretkey), 32-byte keys, none twice, and
// its Report names the primary first and every key once.
func FuzzKeyringFromSecretData(f *testing.F) {
	key := []byte("c2VjcmV0IG1hdGVyaWFsIG9mIGF0IGxlYXN0IDE2IGJ5dGVz")
	f.Add(key, []byte("another key of at least sixteen bytes"), "secretkey.b", true)
	f.Add(key, key, "secretkey.b", true)
	f.Add(key, []byte(""), "", false)
	f.Add([]byte("short"), key, "secretkey.b", true)
	f.Add(key, key, "secretkey.", true)
	f.Add(key, key, "primary", true)
	f.Add(key, key, " secretkey.b\n", true)
	f.Fuzz(func(t *testing.T, first, second []byte, primary string, named bool) {
		data := map[string][]byte{DataKey: first, DataKey + ".b": second}
		if named {
			data[PrimaryEntry] = []byte(primary)
		}
		ring, err := KeyringFromSecretData(data)
		if err != nil {
			return
		}
		if len(ring) == 0 || len(ring) > 2 {
			t.Fatalf("keyring of %d keys from two entries", len(ring))
		}
		want := DataKey
		if named {
			want = ring[0].Name // checked below against the entry's derivation
		}
		if k, err := derive(data[want]); err != nil || string(k) != string(ring.Primary()) || (!named && ring[0].Name != DataKey) {
			t.Fatalf("primary %q is not the key of entry %q", ring[0].Name, want)
		}
		seen := map[string]bool{}
		for _, k := range ring {
			if len(k.AES) != 32 || seen[string(k.AES)] {
				t.Fatalf("key %q: %d bytes, or held twice", k.Name, len(k.AES))
			}
			seen[string(k.AES)] = true
		}
		p, all := ParseReport(Report(ring.AES()))
		if p != Fingerprint(ring.Primary()) || len(all) != len(ring) || len(slices.Compact(slices.Sorted(slices.Values(all)))) != len(ring) {
			t.Fatalf("report %v (primary %s) of keyring %v", all, p, ring)
		}
	})
}
