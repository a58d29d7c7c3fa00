package recordformat

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

const testNamespace = "herald-system"

// testRenew has microsecond precision, all a MicroTime keeps.
var testRenew = time.Date(2025, 3, 14, 15, 9, 26, 535897000, time.UTC)

// record is a Lease a speaker on holder would write; ann are its annotations,
// nil for none.
func record(holder string, n int, ann map[string]string) *coordinationv1.Lease {
	labels := map[string]string{Label: "true"}
	if m, ok := ann[ModeAnnotation]; ok {
		labels[ModeLabel] = m
	}
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			// The source namespace differs from the decoding one on purpose.
			Namespace:       "elsewhere",
			Name:            Name(holder),
			UID:             types.UID(fmt.Sprintf("0000000%d-1111-2222-3333-444444444444", n)),
			ResourceVersion: fmt.Sprint(1000 + n),
			Labels:          labels,
			Annotations:     ann,
		},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To(holder),
			RenewTime:            &metav1.MicroTime{Time: testRenew.Add(time.Duration(n) * 1234567 * time.Microsecond)},
			LeaseDurationSeconds: ptr.To(int32(10 + n)),
		},
	}
}

// testRecords are five speakers, given out of name order: two hear the same
// members, two have no unreachable peers, one names "ghost", which has no record,
// and one has no annotations at all.
func testRecords() []*coordinationv1.Lease {
	return []*coordinationv1.Lease{
		record("e", 4, nil),
		record("c", 2, map[string]string{
			MembersAnnotation: "c,d", UnreachableAnnotation: "a,b,e,ghost", ModeAnnotation: "Hold",
		}),
		record("a", 0, map[string]string{
			MembersAnnotation: "a,b", UnreachableAnnotation: "c,d,e", ModeAnnotation: "Quorum",
			MACsAnnotation: "02:00:00:00:00:01,02:00:00:00:00:02",
		}),
		record("b", 1, map[string]string{
			MembersAnnotation: "a,b", UnreachableAnnotation: "c,d,e", ModeAnnotation: "Quorum",
			MACsAnnotation: "02:00:00:00:00:03",
		}),
		record("d", 3, map[string]string{
			MembersAnnotation: "a,b,c,d,e,ghost", UnreachableAnnotation: "", ModeAnnotation: "Quorum",
		}),
	}
}

func roundTrip(t testing.TB, at time.Time, leases []*coordinationv1.Lease) (Digest, map[string]string, int) {
	t.Helper()
	data, skipped, err := EncodeDigest(at, leases)
	if err != nil {
		t.Fatalf("EncodeDigest: %v", err)
	}
	d, err := DecodeDigest(testNamespace, data)
	if err != nil {
		t.Fatalf("DecodeDigest: %v", err)
	}
	return d, data, skipped
}

// checkSame reports where got, decoded, differs from what a speaker reads of want.
func checkSame(t *testing.T, got, want *coordinationv1.Lease) {
	t.Helper()
	if got.Name != want.Name || got.Namespace != testNamespace || got.UID != want.UID || got.ResourceVersion != want.ResourceVersion {
		t.Errorf("%s: meta = %s/%s uid %s version %s, want %s/%s uid %s version %s", want.Name,
			got.Namespace, got.Name, got.UID, got.ResourceVersion, testNamespace, want.Name, want.UID, want.ResourceVersion)
	}
	if got.Spec.HolderIdentity == nil || *got.Spec.HolderIdentity != *want.Spec.HolderIdentity {
		t.Errorf("%s: holder = %v, want %q", want.Name, got.Spec.HolderIdentity, *want.Spec.HolderIdentity)
	}
	if got.Spec.RenewTime == nil || !got.Spec.RenewTime.Equal(want.Spec.RenewTime) {
		t.Errorf("%s: renewTime = %v, want %v", want.Name, got.Spec.RenewTime, want.Spec.RenewTime)
	}
	if got.Spec.LeaseDurationSeconds == nil || *got.Spec.LeaseDurationSeconds != *want.Spec.LeaseDurationSeconds {
		t.Errorf("%s: leaseDurationSeconds = %v, want %d", want.Name, got.Spec.LeaseDurationSeconds, *want.Spec.LeaseDurationSeconds)
	}
	for _, k := range []string{MembersAnnotation, UnreachableAnnotation, ModeAnnotation, MACsAnnotation} {
		if g, w := got.Annotations[k], want.Annotations[k]; g != w {
			t.Errorf("%s: annotation %s = %q, want %q", want.Name, k, g, w)
		}
	}
	for _, k := range []string{Label, ModeLabel} {
		if g, w := got.Labels[k], want.Labels[k]; g != w {
			t.Errorf("%s: label %s = %q, want %q", want.Name, k, g, w)
		}
	}
}

func byName(leases []*coordinationv1.Lease) map[string]*coordinationv1.Lease {
	m := map[string]*coordinationv1.Lease{}
	for _, l := range leases {
		m[l.Name] = l
	}
	return m
}

func checkRecords(t *testing.T, got, want []*coordinationv1.Lease) {
	t.Helper()
	if !slices.IsSortedFunc(got, func(a, b *coordinationv1.Lease) int { return strings.Compare(a.Name, b.Name) }) {
		t.Errorf("records are not sorted by name: %v", names(got))
	}
	if len(got) != len(want) {
		t.Fatalf("got %d records %v, want %d %v", len(got), names(got), len(want), names(want))
	}
	gotBy := byName(got)
	for _, w := range want {
		g, ok := gotBy[w.Name]
		if !ok {
			t.Errorf("record %s missing from %v", w.Name, names(got))
			continue
		}
		checkSame(t, g, w)
	}
}

func names(leases []*coordinationv1.Lease) []string {
	var ns []string
	for _, l := range leases {
		ns = append(ns, l.Name)
	}
	return ns
}

func TestDigestRoundTrip(t *testing.T) {
	// A zone other than UTC: the digest writes UTC, At must still be the same instant.
	at := time.Date(2025, 3, 14, 15, 10, 0, 123456789, time.FixedZone("east", 2*3600))
	leases := testRecords()
	d, _, skipped := roundTrip(t, at, leases)
	if skipped != 0 {
		t.Errorf("skipped = %d, want 0", skipped)
	}
	if !d.At.Equal(at) {
		t.Errorf("At = %v, want %v", d.At, at)
	}
	if d.Duration != DigestDuration {
		t.Errorf("Duration = %v, want %v", d.Duration, DigestDuration)
	}
	checkRecords(t, d.Records, leases)
}

func TestDigestUsable(t *testing.T) {
	at := time.Date(2025, 3, 14, 15, 10, 0, 0, time.UTC)
	d, _, _ := roundTrip(t, at, testRecords())
	end := at.Add(DigestDuration)
	for _, tc := range []struct {
		name string
		d    Digest
		now  time.Time
		want bool
	}{
		{"at", d, at, true},
		{"just before the end", d, end.Add(-time.Nanosecond), true},
		{"at the end", d, end, false},
		{"after the end", d, end.Add(time.Hour), false},
		{"zero digest", Digest{}, at, false},
		{"zero digest at zero time", Digest{}, time.Time{}, false},
		// Never written, whatever it says of its duration.
		{"no At", Digest{Duration: DigestDuration}, time.Time{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.d.Usable(tc.now); got != tc.want {
				t.Errorf("Usable(%v) = %v, want %v", tc.now, got, tc.want)
			}
		})
	}
}

func TestDigestSkipped(t *testing.T) {
	for _, tc := range []struct {
		name  string
		spoil func(l *coordinationv1.Lease)
	}{
		{"no labels", func(l *coordinationv1.Lease) { l.Labels = nil }},
		{"no record label", func(l *coordinationv1.Lease) { delete(l.Labels, Label) }},
		{"empty record label", func(l *coordinationv1.Lease) { l.Labels[Label] = "" }},
		{"no holder", func(l *coordinationv1.Lease) { l.Spec.HolderIdentity = nil }},
		{"empty holder", func(l *coordinationv1.Lease) { l.Spec.HolderIdentity = ptr.To("") }},
		{"no renewTime", func(l *coordinationv1.Lease) { l.Spec.RenewTime = nil }},
		{"no leaseDurationSeconds", func(l *coordinationv1.Lease) { l.Spec.LeaseDurationSeconds = nil }},
		{"name not the holder's", func(l *coordinationv1.Lease) { l.Name = Name("someone-else") }},
		{"name without prefix", func(l *coordinationv1.Lease) { l.Name = *l.Spec.HolderIdentity }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			good := record("good", 1, map[string]string{MembersAnnotation: "good", ModeAnnotation: "Quorum"})
			bad := record("bad", 2, map[string]string{MembersAnnotation: "bad,only-in-bad", ModeAnnotation: "Hold"})
			tc.spoil(bad)
			d, data, skipped := roundTrip(t, testRenew, []*coordinationv1.Lease{bad, good})
			if skipped != 1 {
				t.Errorf("skipped = %d, want 1", skipped)
			}
			checkRecords(t, d.Records, []*coordinationv1.Lease{good})
			// Names only a skipped lease mentions are not listed either.
			doc := decodeDoc(t, data)
			if slices.Contains(doc.Nodes, "only-in-bad") {
				t.Errorf("nodes %v list a member of a skipped lease", doc.Nodes)
			}
		})
	}

	t.Run("all counted", func(t *testing.T) {
		var leases []*coordinationv1.Lease
		for i := range 4 {
			l := record(fmt.Sprint("n", i), i, nil)
			delete(l.Labels, Label)
			leases = append(leases, l)
		}
		leases = append(leases, testRecords()...)
		d, _, skipped := roundTrip(t, testRenew, leases)
		if skipped != 4 {
			t.Errorf("skipped = %d, want 4", skipped)
		}
		checkRecords(t, d.Records, testRecords())
	})
}

func TestDigestVerbatimLists(t *testing.T) {
	for _, tc := range []struct{ name, members, unreachable string }{
		{"unsorted members", "c,a,b", "d"},
		{"repeated member", "a,a,b", "d"},
		{"empty member name", "a,,b", ""},
		{"trailing comma", "a,b,", ""},
		{"unsorted unreachable", "a", "e,d"},
		{"both", "b,a", "d,d"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			odd := record("a", 0, map[string]string{
				MembersAnnotation: tc.members, UnreachableAnnotation: tc.unreachable, ModeAnnotation: "Quorum",
			})
			// Another record with canonical lists, to share the node list and sets.
			plain := record("b", 1, map[string]string{MembersAnnotation: "a,b,c", UnreachableAnnotation: "d,e"})
			d, _, _ := roundTrip(t, testRenew, []*coordinationv1.Lease{odd, plain})
			checkRecords(t, d.Records, []*coordinationv1.Lease{odd, plain})
		})
	}
}

func decodeDoc(t *testing.T, data map[string]string) digestDoc {
	t.Helper()
	var doc digestDoc
	if err := json.Unmarshal([]byte(data[digestRecordsKey]), &doc); err != nil {
		t.Fatalf("unmarshalling %s: %v", digestRecordsKey, err)
	}
	return doc
}

func TestDigestDeduplicates(t *testing.T) {
	var first, second []string
	for i := range 100 {
		if i < 50 {
			first = append(first, fmt.Sprintf("n%03d", i))
		} else {
			second = append(second, fmt.Sprintf("n%03d", i))
		}
	}
	// "zz-ghost" hears some but writes no record.
	second = append(second, "zz-ghost")
	var leases []*coordinationv1.Lease
	for i := range 100 {
		members := first
		if i%2 == 1 {
			members = second
		}
		leases = append(leases, record(fmt.Sprintf("n%03d", i), i, map[string]string{
			MembersAnnotation: strings.Join(members, ","), ModeAnnotation: "Quorum",
		}))
	}
	d, data, _ := roundTrip(t, testRenew, leases)
	doc := decodeDoc(t, data)
	// The two member sets and the empty unreachable one.
	if len(doc.Sets) > 3 {
		t.Errorf("len(Sets) = %d, want <= 3: %q", len(doc.Sets), doc.Sets)
	}
	if len(doc.Nodes) != 101 {
		t.Errorf("len(Nodes) = %d, want 101 (100 holders and zz-ghost)", len(doc.Nodes))
	}
	for i, s := range doc.Sets {
		bits, err := base64.RawStdEncoding.DecodeString(s)
		if err != nil {
			t.Fatalf("set %d: %v", i, err)
		}
		if len(bits) > 0 && bits[len(bits)-1] == 0 {
			t.Errorf("set %d %q ends in a zero byte", i, s)
		}
	}
	if len(doc.Records) != 100 {
		t.Errorf("len(Records) = %d, want 100", len(doc.Records))
	}
	checkRecords(t, d.Records, leases)
}

func TestSameRecords(t *testing.T) {
	at := time.Date(2025, 3, 14, 15, 10, 0, 0, time.UTC)
	encode := func(at time.Time, leases []*coordinationv1.Lease) map[string]string {
		t.Helper()
		data, _, err := EncodeDigest(at, leases)
		if err != nil {
			t.Fatalf("EncodeDigest: %v", err)
		}
		return data
	}
	base := encode(at, testRecords())
	later := encode(at.Add(DigestRenew), testRecords())
	if base[digestAtKey] == later[digestAtKey] {
		t.Fatalf("both digests say at %s", base[digestAtKey])
	}
	if !SameRecords(base, later) {
		t.Error("the same records written at two times are not SameRecords")
	}
	reversed := testRecords()
	slices.Reverse(reversed)
	if !SameRecords(base, encode(at, reversed)) {
		t.Error("the same records listed in another order are not SameRecords")
	}

	for _, tc := range []struct {
		name   string
		change func(l *coordinationv1.Lease)
	}{
		{"resourceVersion", func(l *coordinationv1.Lease) { l.ResourceVersion = "99999" }},
		{"members", func(l *coordinationv1.Lease) { l.Annotations[MembersAnnotation] = "a,b,c" }},
		{"members verbatim", func(l *coordinationv1.Lease) { l.Annotations[MembersAnnotation] = "b,a" }},
		{"unreachable", func(l *coordinationv1.Lease) { l.Annotations[UnreachableAnnotation] = "c,d" }},
		{"renewTime", func(l *coordinationv1.Lease) {
			l.Spec.RenewTime = &metav1.MicroTime{Time: testRenew.Add(time.Microsecond)}
		}},
		{"mode", func(l *coordinationv1.Lease) { l.Annotations[ModeAnnotation] = "Hold" }},
		{"macs", func(l *coordinationv1.Lease) { l.Annotations[MACsAnnotation] = "" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leases := testRecords()
			for _, l := range leases {
				if l.Name == Name("a") {
					tc.change(l)
				}
			}
			if SameRecords(base, encode(at, leases)) {
				t.Errorf("a changed %s leaves SameRecords true", tc.name)
			}
		})
	}

	t.Run("nil", func(t *testing.T) {
		if SameRecords(nil, base) || SameRecords(base, nil) || SameRecords(nil, nil) {
			t.Error("nil data is SameRecords")
		}
	})
}

func TestDecodeDigestMalformed(t *testing.T) {
	valid, _, err := EncodeDigest(testRenew, testRecords())
	if err != nil {
		t.Fatalf("EncodeDigest: %v", err)
	}
	with := func(k, v string) map[string]string {
		data := map[string]string{}
		for k, v := range valid {
			data[k] = v
		}
		if v == "<delete>" {
			delete(data, k)
		} else {
			data[k] = v
		}
		return data
	}
	const rec = `"u":"x","v":"1","r":0,"d":10`
	for _, tc := range []struct {
		name    string
		data    map[string]string
		wantErr string
	}{
		{"nil data", nil, "key at"},
		{"missing at", with(digestAtKey, "<delete>"), "key at"},
		{"garbled at", with(digestAtKey, "yesterday"), "key at"},
		{"missing duration", with(digestDurationKey, "<delete>"), "key duration"},
		{"bad duration", with(digestDurationKey, "25 parsecs"), "key duration"},
		{"missing records", with(digestRecordsKey, "<delete>"), "key records.json"},
		{"invalid JSON", with(digestRecordsKey, `{"nodes":["a"],`), "key records.json"},
		{"wrong JSON type", with(digestRecordsKey, `{"nodes":"a"}`), "key records.json"},
		{"bad base64", with(digestRecordsKey, `{"nodes":["a"],"sets":["!!"],"records":[]}`), "set 0"},
		{"padded base64", with(digestRecordsKey, `{"nodes":["a"],"sets":["AQ=="],"records":[]}`), "set 0"},
		{"bit beyond the nodes", with(digestRecordsKey, `{"nodes":["a"],"sets":["","Ag"],"records":[]}`), "set 1 names node 1 of 1"},
		{"byte beyond the nodes", with(digestRecordsKey, `{"nodes":["a"],"sets":["AQE"],"records":[]}`), "set 0 names node 8 of 1"},
		{"holder beyond the nodes", with(digestRecordsKey, `{"nodes":["a"],"sets":[""],"records":[{"h":1,"s":0,"x":0,`+rec+`}]}`), "record 0"},
		{"negative holder", with(digestRecordsKey, `{"nodes":["a"],"sets":[""],"records":[{"h":-1,"s":0,"x":0,`+rec+`}]}`), "record 0"},
		{"no nodes", with(digestRecordsKey, `{"nodes":[],"sets":[""],"records":[{"h":0,"s":0,"x":0,`+rec+`}]}`), "record 0"},
		{"members set beyond the sets", with(digestRecordsKey, `{"nodes":["a"],"sets":[""],"records":[{"h":0,"s":0,"x":0,`+rec+`},{"h":0,"s":1,"x":0,`+rec+`}]}`), "record 1"},
		{"unreachable set beyond the sets", with(digestRecordsKey, `{"nodes":["a"],"sets":[""],"records":[{"h":0,"s":0,"x":1,`+rec+`}]}`), "record 0"},
		{"negative set", with(digestRecordsKey, `{"nodes":["a"],"sets":[""],"records":[{"h":0,"s":-1,"x":0,`+rec+`}]}`), "record 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := DecodeDigest(testNamespace, tc.data)
			if err == nil {
				t.Fatalf("DecodeDigest gave no error, and %d records", len(d.Records))
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %q does not say %q", err, tc.wantErr)
			}
			if d.Usable(testRenew) || d.Records != nil {
				t.Errorf("a failed decoding gave a digest: %+v", d)
			}
		})
	}
}

func FuzzDecodeDigest(f *testing.F) {
	valid, _, err := EncodeDigest(testRenew, testRecords())
	if err != nil {
		f.Fatalf("EncodeDigest: %v", err)
	}
	verbatim, _, err := EncodeDigest(testRenew, []*coordinationv1.Lease{
		record("a", 0, map[string]string{MembersAnnotation: "b,a", UnreachableAnnotation: "c,c"}),
	})
	if err != nil {
		f.Fatalf("EncodeDigest: %v", err)
	}
	body := valid[digestRecordsKey]
	f.Add(valid[digestAtKey], valid[digestDurationKey], body)
	f.Add(verbatim[digestAtKey], verbatim[digestDurationKey], verbatim[digestRecordsKey])
	f.Add(valid[digestAtKey], valid[digestDurationKey], body[:len(body)/2])
	f.Add(valid[digestAtKey], valid[digestDurationKey], strings.Replace(body, `"h":0`, `"h":99`, 1))
	f.Add(valid[digestAtKey], valid[digestDurationKey], strings.Replace(body, `"s":0`, `"s":-1`, 1))
	f.Add(valid[digestAtKey], valid[digestDurationKey], `{"nodes":["a"],"sets":["/w"],"records":[]}`)
	f.Add(valid[digestAtKey], valid[digestDurationKey], `{"nodes":["a"],"sets":["AQ"],"records":[{"h":0,"s":0,"x":0,"l":{"x":"y","herald.dev/members":""}}]}`)
	f.Add("2025-13-01T00:00:00Z", "-1h", body)
	f.Add("", "", "")
	f.Fuzz(func(t *testing.T, at, duration, records string) {
		d, err := DecodeDigest(testNamespace, map[string]string{
			digestAtKey: at, digestDurationKey: duration, digestRecordsKey: records,
		})
		if err != nil {
			return
		}
		for i, l := range d.Records {
			if l.Name == "" {
				t.Fatalf("record %d has no name", i)
			}
			if l.Spec.HolderIdentity == nil || NodeOf(l.Name) != *l.Spec.HolderIdentity {
				t.Fatalf("record %d: name %q is not its holder's", i, l.Name)
			}
		}
	})
}
