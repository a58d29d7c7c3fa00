package memberkey

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFromSecretData(t *testing.T) {
	raw16 := []byte("0123456789abcdef")
	sum := func(b []byte) []byte { s := sha256.Sum256(b); return s[:] }
	for _, tc := range []struct {
		name    string
		data    map[string][]byte
		want    []byte
		wantErr string
	}{
		{"base64 padded", map[string][]byte{DataKey: []byte(base64.StdEncoding.EncodeToString(raw16))}, sum(raw16), ""},
		{"base64 unpadded (MetalLB's format)", map[string][]byte{DataKey: []byte(base64.RawStdEncoding.EncodeToString(raw16))}, sum(raw16), ""},
		{"base64 with trailing newline", map[string][]byte{DataKey: []byte(base64.StdEncoding.EncodeToString(raw16) + "\n")}, sum(raw16), ""},
		{"raw value, not base64", map[string][]byte{DataKey: []byte("not base64 at all!!")}, sum([]byte("not base64 at all!!")), ""},
		{"raw binary value", map[string][]byte{DataKey: append([]byte{0xff, 0xfe}, raw16...)}, sum(append([]byte{0xff, 0xfe}, raw16...)), ""},
		{"other entries ignored", map[string][]byte{DataKey: []byte("raw-value-of-20-bytes"), "x": nil}, sum([]byte("raw-value-of-20-bytes")), ""},
		{"raw value that parses as base64 is decoded", map[string][]byte{DataKey: []byte("0123456789abcdef0123456789abcdef")},
			sum(mustB64("0123456789abcdef0123456789abcdef")), ""},
		{"missing entry", map[string][]byte{"other": raw16}, nil, `no "secretkey" entry`},
		{"nil data", nil, nil, `no "secretkey" entry`},
		{"empty value", map[string][]byte{DataKey: {}}, nil, "is empty"},
		{"white space only", map[string][]byte{DataKey: []byte(" \n")}, nil, "is empty"},
		{"too short raw", map[string][]byte{DataKey: []byte("short!")}, nil, "at least 16"},
		{"too short once decoded", map[string][]byte{DataKey: []byte(base64.StdEncoding.EncodeToString([]byte("12345678")))}, nil, "at least 16"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := FromSecretData(tc.data)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 32 || !bytes.Equal(got, tc.want) {
				t.Errorf("key = %x, want %x", got, tc.want)
			}
		})
	}
}

func TestNotMetalLBQuirk(t *testing.T) {
	secret := []byte(base64.RawStdEncoding.EncodeToString([]byte("0123456789abcdef")))
	quirk := sha256.New().Sum(secret)[:32] // MetalLB: secret || sha256("") truncated
	got, err := FromSecretData(map[string][]byte{DataKey: secret})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(got, quirk) || bytes.HasPrefix(got, secret[:8]) {
		t.Errorf("key %x reproduces MetalLB's append quirk", got)
	}
}

func TestNew(t *testing.T) {
	a, err := New()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := New()
	if bytes.Equal(a, b) {
		t.Error("two new keys are equal")
	}
	raw, err := base64.StdEncoding.DecodeString(string(a))
	if err != nil || len(raw) != 32 {
		t.Errorf("new key %q: not base64 of 32 bytes (%d bytes, %v)", a, len(raw), err)
	}
	if k, err := FromSecretData(map[string][]byte{DataKey: a}); err != nil || len(k) != 32 {
		t.Errorf("FromSecretData(new key) = %x, %v", k, err)
	}
}

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	val, _ := New()
	if err := os.WriteFile(good, append(val, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	want, _ := FromSecretData(map[string][]byte{DataKey: val})
	if got, err := ReadFile(good); err != nil || !bytes.Equal(got, want) {
		t.Errorf("ReadFile = %x, %v; want %x", got, err, want)
	}

	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{filepath.Join(dir, "missing"), empty, dir} {
		_, err := ReadFile(path)
		if err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("ReadFile(%s): err = %v, want one naming the path", path, err)
		}
	}
}

func mustB64(s string) []byte {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}
