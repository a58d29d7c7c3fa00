package recordformat

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// The records digest. While a speaker is out of Quorum it needs every record: quorum
// rule 6 elects among the speakers whose records changed since its trouble began,
// and rule 2 looks for a majority that leaves it out. Watching the records
// themselves, every write reaches every such speaker: at an even split of N
// speakers, N² watch events for each round of writes. herald's controller watches
// the records instead (N events a round) and writes one ConfigMap, the digest, that
// says what they all say; the speakers of a large cluster watch it while they are out
// of Quorum (N events each time it is written, at most once per DigestGap) and fall
// back to the records while it is missing or older than DigestDuration.
//
// The digest reproduces what a speaker reads of each record (name, UID, version,
// holder, renewal, duration, mode, members, unreachable peers, MACs). Member lists
// are sets of nodes: it lists every node once and each distinct set once, as a bitmap
// over that list, so that a thousand records naming a thousand members each fit in one
// ConfigMap (BenchmarkDigest1000, docs/scale.md).
const (
	// DigestName is the digest's ConfigMap in herald's namespace.
	DigestName = "herald-records"
	// DigestRenew is how often the controller rewrites it when nothing changes.
	DigestRenew = 10 * time.Second
	// DigestDuration is how long after its last write a reader trusts it: two
	// renewals missed and a margin.
	DigestDuration = 25 * time.Second
	// DigestGap is the least time between two writes: speakers out of Quorum change
	// their records by the hundred within a second, and one digest write per record
	// write would send each reader one (large) event per record write. It adds at
	// most this much to the time a record's change takes to reach a reader, against
	// quorum grace (1 s by default) for a peer's answer's round trip.
	DigestGap = 200 * time.Millisecond

	digestAtKey       = "at"
	digestDurationKey = "duration"
	digestRecordsKey  = "records.json"
)

// Digest is the records as the controller last wrote them.
type Digest struct {
	// At is when it was written, by the writer's clock; Duration how long after At
	// it may be trusted.
	At       time.Time
	Duration time.Duration
	// Records are the records it lists, as Leases holding what a speaker reads of
	// them, sorted by name. Read only.
	Records []*coordinationv1.Lease
}

// Usable says whether d may be trusted at now: written, and within its duration.
func (d Digest) Usable(now time.Time) bool {
	return !d.At.IsZero() && now.Before(d.At.Add(d.Duration))
}

// digestDoc is the JSON of the records.
type digestDoc struct {
	// Nodes are every node a record names (writer or member), sorted.
	Nodes []string `json:"nodes"`
	// Sets are the distinct member sets, each a bitmap over Nodes (bit i of byte
	// i/8, lowest first, trailing zero bytes dropped), base64 without padding.
	Sets    []string      `json:"sets"`
	Records []digestEntry `json:"records"`
}

// digestEntry is one record. Short keys: a thousand of them are written together.
type digestEntry struct {
	Holder      int    `json:"h"` // index in Nodes
	UID         string `json:"u"`
	Version     string `json:"v"`
	RenewMicros int64  `json:"r"` // spec.renewTime, Unix microseconds
	Seconds     int32  `json:"d"` // spec.leaseDurationSeconds
	Mode        string `json:"m,omitempty"`
	Members     int    `json:"s"` // index in Sets
	Unreachable int    `json:"x"` // index in Sets
	MACs        string `json:"a,omitempty"`
	// Verbatim holds a member list that is not a sorted list of distinct names
	// (none a speaker of this version writes), by annotation, as written.
	Verbatim map[string]string `json:"l,omitempty"`
}

// listAnnotations are the annotations that list nodes.
var listAnnotations = []string{MembersAnnotation, UnreachableAnnotation}

// EncodeDigest returns the ConfigMap data of a digest of leases written at at. Leases
// that are not records a speaker reads (no record label, holder, renewal or duration,
// or a name that is not the holder's) are left out, as a speaker's reading leaves
// them out; skipped counts them.
func EncodeDigest(at time.Time, leases []*coordinationv1.Lease) (data map[string]string, skipped int, err error) {
	body, skipped, err := encodeRecords(leases)
	if err != nil {
		return nil, 0, err
	}
	return map[string]string{
		digestAtKey:       at.UTC().Format(time.RFC3339Nano),
		digestDurationKey: DigestDuration.String(),
		digestRecordsKey:  body,
	}, skipped, nil
}

// SameRecords says whether two digests' data list the same records, saying the
// same: only then may the writer skip a write until the renewal is due.
func SameRecords(a, b map[string]string) bool {
	return a != nil && b != nil && a[digestRecordsKey] == b[digestRecordsKey]
}

func encodeRecords(leases []*coordinationv1.Lease) (string, int, error) {
	var recs []*coordinationv1.Lease
	skipped := 0
	// Records list the same members by the hundred: each distinct list is split once.
	lists := map[string][]string{}
	names := map[string]int{}
	for _, l := range leases {
		if !isRecord(l) {
			skipped++
			continue
		}
		recs = append(recs, l)
		names[*l.Spec.HolderIdentity] = 0
		for _, k := range listAnnotations {
			v := l.Annotations[k]
			if _, ok := lists[v]; ok {
				continue
			}
			split := splitNames(v)
			lists[v] = split
			for _, n := range split {
				names[n] = 0
			}
		}
	}
	slices.SortFunc(recs, func(a, b *coordinationv1.Lease) int { return strings.Compare(a.Name, b.Name) })
	doc := digestDoc{Nodes: make([]string, 0, len(names)), Sets: []string{}, Records: make([]digestEntry, 0, len(recs))}
	for n := range names {
		doc.Nodes = append(doc.Nodes, n)
	}
	slices.Sort(doc.Nodes)
	for i, n := range doc.Nodes {
		names[n] = i
	}
	setOf := map[string]int{}   // bitmap → index in Sets
	listSet := map[string]int{} // list annotation → index in Sets
	set := func(list string) int {
		if i, ok := listSet[list]; ok {
			return i
		}
		bits := make([]byte, (len(doc.Nodes)+7)/8)
		for _, n := range lists[list] {
			i := names[n]
			bits[i/8] |= 1 << (i % 8)
		}
		for len(bits) > 0 && bits[len(bits)-1] == 0 {
			bits = bits[:len(bits)-1]
		}
		s := base64.RawStdEncoding.EncodeToString(bits)
		i, ok := setOf[s]
		if !ok {
			i = len(doc.Sets)
			setOf[s] = i
			doc.Sets = append(doc.Sets, s)
		}
		listSet[list] = i
		return i
	}
	for _, l := range recs {
		e := digestEntry{
			Holder:      names[*l.Spec.HolderIdentity],
			UID:         string(l.UID),
			Version:     l.ResourceVersion,
			RenewMicros: l.Spec.RenewTime.UnixMicro(),
			Seconds:     *l.Spec.LeaseDurationSeconds,
			Mode:        l.Annotations[ModeAnnotation],
			MACs:        l.Annotations[MACsAnnotation],
		}
		for _, k := range listAnnotations {
			v := l.Annotations[k]
			var i int
			if canonical(lists[v]) {
				i = set(v)
			} else {
				if e.Verbatim == nil {
					e.Verbatim = map[string]string{}
				}
				e.Verbatim[k] = v
				i = set("")
			}
			if k == MembersAnnotation {
				e.Members = i
			} else {
				e.Unreachable = i
			}
		}
		doc.Records = append(doc.Records, e)
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return "", 0, fmt.Errorf("encoding the records digest: %w", err)
	}
	return string(b), skipped, nil
}

// isRecord says whether a speaker reads l as a record, named after its holder.
func isRecord(l *coordinationv1.Lease) bool {
	return l.Labels[Label] != "" && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" &&
		l.Spec.RenewTime != nil && l.Spec.LeaseDurationSeconds != nil && l.Name == Name(*l.Spec.HolderIdentity)
}

// splitNames reads a comma-separated list; empty is none.
func splitNames(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// canonical says whether a list annotation's names are sorted, without repeats or
// empty names: only then does its set give it back as written.
func canonical(names []string) bool {
	for i, n := range names {
		if n == "" || (i > 0 && names[i-1] >= n) {
			return false
		}
	}
	return true
}

// DecodeDigest reads a digest from its ConfigMap's data; the Leases it gives are in
// namespace.
func DecodeDigest(namespace string, data map[string]string) (Digest, error) {
	at, err := time.Parse(time.RFC3339Nano, data[digestAtKey])
	if err != nil {
		return Digest{}, fmt.Errorf("records digest: key %s: %w", digestAtKey, err)
	}
	dur, err := time.ParseDuration(data[digestDurationKey])
	if err != nil {
		return Digest{}, fmt.Errorf("records digest: key %s: %w", digestDurationKey, err)
	}
	var doc digestDoc
	if err := json.Unmarshal([]byte(data[digestRecordsKey]), &doc); err != nil {
		return Digest{}, fmt.Errorf("records digest: key %s: %w", digestRecordsKey, err)
	}
	sets := make([]string, len(doc.Sets))
	for i, s := range doc.Sets {
		bits, err := base64.RawStdEncoding.DecodeString(s)
		if err != nil {
			return Digest{}, fmt.Errorf("records digest: set %d: %w", i, err)
		}
		var names []string
		for j, b := range bits {
			for k := range 8 {
				if b&(1<<k) == 0 {
					continue
				}
				n := j*8 + k
				if n >= len(doc.Nodes) {
					return Digest{}, fmt.Errorf("records digest: set %d names node %d of %d", i, n, len(doc.Nodes))
				}
				names = append(names, doc.Nodes[n])
			}
		}
		sets[i] = strings.Join(names, ",")
	}
	d := Digest{At: at, Duration: dur, Records: make([]*coordinationv1.Lease, 0, len(doc.Records))}
	for i, e := range doc.Records {
		if e.Holder < 0 || e.Holder >= len(doc.Nodes) || e.Members < 0 || e.Members >= len(sets) || e.Unreachable < 0 || e.Unreachable >= len(sets) {
			return Digest{}, fmt.Errorf("records digest: record %d refers to a node or set it does not list", i)
		}
		holder := doc.Nodes[e.Holder]
		ann := map[string]string{
			MembersAnnotation:     sets[e.Members],
			UnreachableAnnotation: sets[e.Unreachable],
			ModeAnnotation:        e.Mode,
			MACsAnnotation:        e.MACs,
		}
		for k, v := range e.Verbatim {
			if slices.Contains(listAnnotations, k) {
				ann[k] = v
			}
		}
		d.Records = append(d.Records, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: namespace, Name: Name(holder), UID: types.UID(e.UID), ResourceVersion: e.Version,
				Labels:      map[string]string{Label: "true", ModeLabel: e.Mode},
				Annotations: ann,
			},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity:       ptr.To(holder),
				RenewTime:            &metav1.MicroTime{Time: time.UnixMicro(e.RenewMicros)},
				LeaseDurationSeconds: ptr.To(e.Seconds),
			},
		})
	}
	return d, nil
}
