package controllers

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"herald.dev/herald/internal/testenv"
)

// An aggregate, against a real API server: created when missing, updated over the
// version last written, and read again after another writer's update (a conflict)
// or a deletion, each failing once and the next put succeeding.
func TestAggregatePut(t *testing.T) {
	env := testenv.Start(t)
	ctx := t.Context()
	const ns = "herald-system"
	env.CreateNamespace(t, ns)
	key := types.NamespacedName{Namespace: ns, Name: "agg"}
	a := &aggregate[*corev1.ConfigMap]{what: "test aggregate", key: key, api: env.Client, writer: env.Client,
		newObj: func() *corev1.ConfigMap { return &corev1.ConfigMap{} }}
	put := func(v string) error {
		return a.put(ctx, func(cm *corev1.ConfigMap) { cm.Data = map[string]string{"v": v} })
	}
	stored := func() *corev1.ConfigMap {
		t.Helper()
		var cm corev1.ConfigMap
		if err := env.Client.Get(ctx, key, &cm); err != nil {
			t.Fatal(err)
		}
		return &cm
	}
	if err := put("1"); err != nil {
		t.Fatal(err)
	}
	if cm := stored(); cm.Data["v"] != "1" || cm.Labels["app.kubernetes.io/part-of"] != "herald" {
		t.Fatalf("created %v, labels %v", cm.Data, cm.Labels)
	}
	if err := put("2"); err != nil {
		t.Fatal(err)
	}
	if cm, _ := a.current(); cm.Data["v"] != "2" || stored().Data["v"] != "2" {
		t.Fatalf("updated: current %v, stored %v", cm.Data, stored().Data)
	}

	// Another writer: the update conflicts once, then goes over the version read again.
	other := stored()
	other.Data["v"] = "other"
	if err := env.Client.Update(ctx, other); err != nil {
		t.Fatal(err)
	}
	if err := put("3"); err == nil {
		t.Fatal("an update over a version another writer replaced succeeded")
	}
	if _, known := a.current(); known {
		t.Error("after a failed update the aggregate still counts its version as known")
	}
	if err := put("3"); err != nil {
		t.Fatal(err)
	}
	if v := stored().Data["v"]; v != "3" {
		t.Fatalf("after the conflict: stored %q, want 3", v)
	}

	// Deleted: the update fails once, then it is created again.
	if err := env.Client.Delete(ctx, stored()); err != nil {
		t.Fatal(err)
	}
	if err := put("4"); err == nil {
		t.Fatal("an update of a deleted object succeeded")
	}
	if err := put("4"); err != nil {
		t.Fatal(err)
	}
	if v := stored().Data["v"]; v != "4" {
		t.Fatalf("after the deletion: stored %q, want 4", v)
	}
}
