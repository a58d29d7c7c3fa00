package recordformat

import (
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

const benchSpeakers = 1000

// benchRecords are benchSpeakers records with 36-character node names and UIDs;
// lists(i) gives record i's members and unreachable peers.
func benchRecords(lists func(i int, nodes []string) (members, unreachable string)) []*coordinationv1.Lease {
	nodes := make([]string, benchSpeakers)
	for i := range nodes {
		nodes[i] = fmt.Sprintf("node-%031d", i)
	}
	renew := time.Date(2025, 3, 14, 15, 9, 26, 535897000, time.UTC)
	leases := make([]*coordinationv1.Lease, benchSpeakers)
	for i, n := range nodes {
		members, unreachable := lists(i, nodes)
		leases[i] = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{
				Name:            Name(n),
				UID:             types.UID(fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i)),
				ResourceVersion: fmt.Sprint(123456789 + i),
				Labels:          map[string]string{Label: "true", ModeLabel: "Quorum"},
				Annotations: map[string]string{
					MembersAnnotation:     members,
					UnreachableAnnotation: unreachable,
					ModeAnnotation:        "Quorum",
					MACsAnnotation:        fmt.Sprintf("02:00:00:00:%02x:%02x", i/256, i%256),
				},
			},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity:       ptr.To(n),
				RenewTime:            &metav1.MicroTime{Time: renew.Add(time.Duration(i) * time.Millisecond)},
				LeaseDurationSeconds: ptr.To(int32(15)),
			},
		}
	}
	return leases
}

func BenchmarkDigest1000(b *testing.B) {
	half := benchSpeakers / 2
	for _, v := range []struct {
		name  string
		lists func(i int, nodes []string) (string, string)
	}{
		{"steady", func(_ int, nodes []string) (string, string) { return strings.Join(nodes, ","), "" }},
		{"split", func(i int, nodes []string) (string, string) {
			first, second := strings.Join(nodes[:half], ","), strings.Join(nodes[half:], ",")
			if i < half {
				return first, second
			}
			return second, first
		}},
		{"worst", func(i int, nodes []string) (string, string) {
			others := append(append([]string(nil), nodes[:i]...), nodes[i+1:]...)
			return strings.Join(others, ","), nodes[i]
		}},
	} {
		leases := benchRecords(v.lists)
		at := time.Date(2025, 3, 14, 15, 10, 0, 0, time.UTC)
		data, skipped, err := EncodeDigest(at, leases)
		if err != nil || skipped != 0 {
			b.Fatalf("%s: EncodeDigest: skipped %d, %v", v.name, skipped, err)
		}
		size := float64(len(data[digestRecordsKey]))
		b.Run(v.name+"/encode", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := EncodeDigest(at, leases); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(size, "bytes")
		})
		b.Run(v.name+"/decode", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				d, err := DecodeDigest("herald-system", data)
				if err != nil || len(d.Records) != benchSpeakers {
					b.Fatalf("DecodeDigest: %d records, %v", len(d.Records), err)
				}
			}
			b.ReportMetric(size, "bytes")
		})
	}
}
