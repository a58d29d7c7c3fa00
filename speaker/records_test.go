package speaker

import (
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A record read in an older version than one seen before (the cache lagging behind a
// direct read) is not taken for news.
func TestRecordsNeverGoBack(t *testing.T) {
	r := &records{}
	lease := func(rv, members string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "herald-speaker-a", UID: "u1", ResourceVersion: rv,
			Annotations: map[string]string{RecordMembersAnnotation: members}}}
	}
	r.newer(lease("20", "a,b,c"))
	if got := r.newer(lease("15", "a,b")); got.ResourceVersion != "20" {
		t.Fatalf("older version 15 after 20: got %s", got.ResourceVersion)
	}
	if got := r.newer(lease("25", "a,b")); got.ResourceVersion != "25" {
		t.Fatalf("newer version 25: got %s", got.ResourceVersion)
	}
	recreated := lease("3", "a")
	recreated.UID = "u2"
	if got := r.newer(recreated); got.ResourceVersion != "3" {
		t.Fatalf("a record deleted and created again is new whatever its version: got %s", got.ResourceVersion)
	}
}
