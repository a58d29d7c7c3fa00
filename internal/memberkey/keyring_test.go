package memberkey

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestKeyringFromSecretData(t *testing.T) {
	a, b, c := []byte("key-material-aaaaaaaa"), []byte("key-material-bbbbbbbb"), []byte("key-material-cccccccc")
	aes := func(v []byte) []byte { k, err := derive(v); must(t, err); return k }
	for _, tc := range []struct {
		name      string
		data      map[string][]byte
		wantNames []string
		wantErr   string
	}{
		{"one key, the old format", map[string][]byte{DataKey: a}, []string{"secretkey"}, ""},
		{"extra keys accepted, secretkey primary without a primary entry",
			map[string][]byte{DataKey: a, "secretkey.z": b, "secretkey.m": c}, []string{"secretkey", "secretkey.m", "secretkey.z"}, ""},
		{"primary named", map[string][]byte{DataKey: a, "secretkey.new": b, PrimaryEntry: []byte("secretkey.new\n")},
			[]string{"secretkey.new", "secretkey"}, ""},
		{"old secretkey removed", map[string][]byte{"secretkey.new": b, PrimaryEntry: []byte("secretkey.new")}, []string{"secretkey.new"}, ""},
		{"other entries ignored", map[string][]byte{DataKey: a, "secretkeyx": []byte("x"), "secretkey.": []byte("x"), "note": nil}, []string{"secretkey"}, ""},
		{"same key twice counts once, under the primary's name",
			map[string][]byte{DataKey: a, "secretkey.copy": a, PrimaryEntry: []byte("secretkey.copy")}, []string{"secretkey.copy"}, ""},
		{"primary names a missing entry", map[string][]byte{DataKey: a, PrimaryEntry: []byte("secretkey.gone")}, nil, `names "secretkey.gone", which the Secret does not hold`},
		{"primary names a non-key entry", map[string][]byte{DataKey: a, PrimaryEntry: []byte("other")}, nil, "not a key entry"},
		{"no secretkey and no primary", map[string][]byte{"secretkey.b": b}, nil, `no "secretkey" entry`},
		{"a bad secondary key fails the whole Secret", map[string][]byte{DataKey: a, "secretkey.bad": []byte("short")}, nil, `entry "secretkey.bad"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ring, err := KeyringFromSecretData(tc.data)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			must(t, err)
			var names []string
			for _, k := range ring {
				names = append(names, k.Name)
				if string(k.AES) != string(aes(tc.data[k.Name])) {
					t.Errorf("key %s: wrong AES key", k.Name)
				}
			}
			if !slices.Equal(names, tc.wantNames) {
				t.Errorf("names = %v, want %v", names, tc.wantNames)
			}
			if p, _ := FromSecretData(tc.data); string(p) != string(ring.Primary()) {
				t.Error("FromSecretData is not the keyring's primary")
			}
		})
	}
}

// TestReadDir reads a Secret as the kubelet mounts it: the entries are links into the
// directory "..data" points to.
func TestReadDir(t *testing.T) {
	dir := t.TempDir()
	v1 := filepath.Join(dir, "..v1")
	must(t, os.Mkdir(v1, 0o700))
	must(t, os.WriteFile(filepath.Join(v1, DataKey), []byte("key-material-aaaaaaaa"), 0o600))
	must(t, os.WriteFile(filepath.Join(v1, "secretkey.b"), []byte("key-material-bbbbbbbb"), 0o600))
	must(t, os.WriteFile(filepath.Join(v1, PrimaryEntry), []byte("secretkey.b"), 0o600))
	must(t, os.Symlink("..v1", filepath.Join(dir, "..data")))
	for _, n := range []string{DataKey, "secretkey.b", PrimaryEntry} {
		must(t, os.Symlink(filepath.Join("..data", n), filepath.Join(dir, n)))
	}
	ring, err := ReadDir(dir)
	must(t, err)
	if len(ring) != 2 || ring[0].Name != "secretkey.b" {
		t.Fatalf("ring = %v, want secretkey.b primary and secretkey", ring)
	}

	// A plain directory (not a kubelet mount) is read as it is.
	plain := t.TempDir()
	must(t, os.WriteFile(filepath.Join(plain, DataKey), []byte("key-material-aaaaaaaa"), 0o600))
	if ring, err := ReadDir(plain); err != nil || len(ring) != 1 {
		t.Fatalf("plain dir: %v, %v", ring, err)
	}
	if _, err := ReadDir(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("missing dir: no error")
	}
	empty := t.TempDir()
	if _, err := ReadDir(empty); err == nil || !strings.Contains(err.Error(), empty) {
		t.Fatalf("empty dir: err = %v, want one naming it", err)
	}
}

func TestFingerprintAndReport(t *testing.T) {
	a, b, c := []byte("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"), []byte("bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"), []byte("cccccccccccccccccccccccccccccccc")
	fa := Fingerprint(a)
	if len(fa) != 16 || fa == Fingerprint(b) || strings.Contains(fa, "6161") {
		t.Fatalf("fingerprint %q: want 16 hex chars, distinct, not the key", fa)
	}
	// The primary comes first; the order of the others does not matter.
	if Report([][]byte{a, c, b}) != Report([][]byte{a, b, c}) || Report([][]byte{b, a, c}) == Report([][]byte{a, b, c}) {
		t.Fatal("report order")
	}
	p, all := ParseReport(Report([][]byte{a, b}))
	if p != fa || len(all) != 2 || all[0] != fa {
		t.Fatalf("ParseReport = %q, %v", p, all)
	}
	if p, all := ParseReport(""); p != "" || all != nil {
		t.Fatal("empty report")
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
