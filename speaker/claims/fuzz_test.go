package claims

import (
	"os"
	"reflect"
	"testing"
	"time"
)

// The fuzz targets feed what a peer or a node's state directory could hold to the
// decoders. Whoever wrote it (a peer with the memberlist key, the node's own
// speaker), the reader must not panic and must read one meaning from it.

// FuzzDecode: claims that decode are read the same every time, and what Encode
// writes of them decodes to the same claims.
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{
		`{"172.18.255.200":{"t":"2026-11-25T10:00:00Z","o":["worker"],"g":3},"fc00::1":{}}`,
		`{"::ffff:10.0.0.1":{"g":1},"10.0.0.1":{"g":2}}`,
		`{"fe80::1%eth0":{}}`,
		`{"10.0.0.1":{"o":[""]}}`,
		`{"10.0.0.1":{"g":-1}}`,
		`{"10.0.0.1":{"g":18446744073709551616}}`,
		`{"not-an-ip":{}}`,
		`[1,2]`,
		`null`,
		"",
		" \n",
		"{",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Decode(data)
		if err != nil {
			return
		}
		for range 4 {
			if again, _ := Decode(data); !reflect.DeepEqual(again, c) {
				t.Fatalf("decoded %q once as %v and once as %v", data, c, again)
			}
		}
		back, err := Decode(c.Encode())
		if err != nil {
			t.Fatalf("the encoding of %v does not decode: %v", c, err)
		}
		if !reflect.DeepEqual(back, c) {
			t.Fatalf("round trip of %v gave %v", c, back)
		}
	})
}

// FuzzLoad: whatever the state file holds, loading it either fails with an error
// or gives claims, and the file is gone after (good for one start).
func FuzzLoad(f *testing.F) {
	f.Add([]byte(`{"172.18.255.200":{"t":"t1","o":["worker"]}}`))
	f.Add([]byte(`{"172.18.255.200":`))
	f.Add([]byte{0xff, 0xfe, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(stateFile(dir, "n"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := Load(dir, "n", time.Hour, time.Now())
		if err == nil && c == nil {
			t.Fatal("a fresh state file loaded as no claims and no error")
		}
		if _, err := os.Stat(stateFile(dir, "n")); !os.IsNotExist(err) {
			t.Fatalf("the state file is still there after loading: %v", err)
		}
	})
}
