package controllers_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"herald.dev/herald/internal/recordformat"
	"herald.dev/herald/internal/testkit"
)

// Against a real API server: the controller writes the records digest from the
// speakers' records in its namespace, as the records say (versions included, which
// readers compare), rewrites it when a record changes or is deleted, and leaves out
// Leases that are no records and records elsewhere.
func TestRecordsDigest(t *testing.T) {
	h := newHarness(t)
	record := func(namespace, node, mode string, members []string, isRecord bool) *coordinationv1.Lease {
		t.Helper()
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: recordformat.Name(node)}}
		err := h.c.Get(h.ctx, types.NamespacedName{Namespace: namespace, Name: l.Name}, l)
		if isRecord {
			l.Labels = map[string]string{recordformat.Label: "true", recordformat.ModeLabel: mode}
		}
		l.Annotations = map[string]string{recordformat.MembersAnnotation: strings.Join(members, ","), recordformat.ModeAnnotation: mode,
			recordformat.UnreachableAnnotation: "", recordformat.MACsAnnotation: "02:00:00:00:00:01"}
		l.Spec = coordinationv1.LeaseSpec{HolderIdentity: ptr.To(node), RenewTime: &metav1.MicroTime{Time: time.Now()},
			LeaseDurationSeconds: ptr.To(int32(30))}
		if err == nil {
			err = h.c.Update(h.ctx, l)
		} else {
			err = h.c.Create(h.ctx, l)
		}
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	all := []string{"a", "b", "c"}
	written := map[string]*coordinationv1.Lease{}
	for _, n := range all {
		written[n] = record(ns, n, "Quorum", all, true)
	}
	record(ns, "d", "Quorum", all, false)      // a Lease that is no record
	record("team-a", "e", "Quorum", all, true) // a record outside herald's namespace
	h.startController(defaultOptions())

	digest := func() (recordformat.Digest, error) {
		var cm corev1.ConfigMap
		if err := h.c.Get(h.ctx, types.NamespacedName{Namespace: ns, Name: recordformat.DigestName}, &cm); err != nil {
			return recordformat.Digest{}, err
		}
		return recordformat.DecodeDigest(ns, cm.Data)
	}
	// says reports how the digest differs from the records written, "" if it does not.
	says := func(d recordformat.Digest) string {
		if len(d.Records) != len(written) {
			return fmt.Sprintf("%d records, want %d", len(d.Records), len(written))
		}
		for _, got := range d.Records {
			want := written[*got.Spec.HolderIdentity]
			switch {
			case want == nil:
				return "lists " + got.Name
			case got.ResourceVersion != want.ResourceVersion || got.UID != want.UID:
				return fmt.Sprintf("%s at version %s, want %s", got.Name, got.ResourceVersion, want.ResourceVersion)
			case got.Annotations[recordformat.MembersAnnotation] != want.Annotations[recordformat.MembersAnnotation] ||
				got.Annotations[recordformat.ModeAnnotation] != want.Annotations[recordformat.ModeAnnotation]:
				return fmt.Sprintf("%s says %v, want %v", got.Name, got.Annotations, want.Annotations)
			case !got.Spec.RenewTime.Equal(want.Spec.RenewTime):
				return fmt.Sprintf("%s renewed at %v, want %v", got.Name, got.Spec.RenewTime, want.Spec.RenewTime)
			}
		}
		return ""
	}
	wait := func(what string) recordformat.Digest {
		t.Helper()
		var d recordformat.Digest
		testkit.Eventually(t, waitFor, poll, what+": the digest says what the records say", func() error {
			var err error
			if d, err = digest(); err != nil {
				return err
			}
			if diff := says(d); diff != "" {
				return errors.New(diff)
			}
			return nil
		})
		return d
	}
	first := wait("at start")
	if first.Duration != recordformat.DigestDuration || !first.Usable(time.Now()) {
		t.Errorf("digest written at %v trusted for %v: want usable now, for %v", first.At, first.Duration, recordformat.DigestDuration)
	}
	// b loses c: one record changes, and the digest follows.
	written["b"] = record(ns, "b", "Hold", []string{"a", "b"}, true)
	wait("b changed")
	// c's record is deleted (its Node was).
	if err := h.c.Delete(h.ctx, written["c"]); err != nil {
		t.Fatal(err)
	}
	delete(written, "c")
	last := wait("c deleted")
	if !last.At.After(first.At) {
		t.Errorf("the digest was not rewritten: written at %v, first at %v", last.At, first.At)
	}
}
