package app

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	heraldv1 "herald.dev/herald/api/v1beta1"
	"herald.dev/herald/internal/testenv"
)

// herald rebalance against a real API server: named Services, --all, and refusals.
func TestRebalanceAgainstAPIServer(t *testing.T) {
	env := testenv.Start(t)
	ctx := t.Context()
	env.CreateNamespace(t, "apps")
	for _, svc := range []corev1.Service{
		lb("default", "svc1", ips("172.18.255.200")),
		lb("default", "svc2", ips("172.18.255.201")),
		lb("default", "pending"), // no IP yet
		lb("apps", "svc3", ips("172.18.255.202")),
	} {
		status := svc.Status
		if err := env.Client.Create(ctx, &svc); err != nil {
			t.Fatal(err)
		}
		svc.Status = status
		if err := env.Client.Status().Update(ctx, &svc); err != nil {
			t.Fatal(err)
		}
	}
	admin := env.Kubeconfig(t, "admin", "system:masters")
	token := func(ns, name string) string {
		var s corev1.Service
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &s); err != nil {
			t.Fatal(err)
		}
		return s.Annotations[heraldv1.AnnotationRebalance]
	}

	out, err := run("rebalance", "--kubeconfig", admin, "svc1")
	if err != nil || !strings.Contains(out, "service/svc1 in default: rebalance requested") {
		t.Fatalf("rebalance svc1: %q, %v", out, err)
	}
	first := token("default", "svc1")
	if first == "" || token("default", "svc2") != "" {
		t.Errorf("after rebalance svc1: svc1 %q, svc2 %q; want only svc1 annotated", first, token("default", "svc2"))
	}

	out, err = run("rebalance", "--kubeconfig", admin, "--all", "-A")
	if err != nil || strings.Count(out, "rebalance requested") != 3 {
		t.Fatalf("rebalance --all -A: %q, %v; want svc1, svc2, svc3", out, err)
	}
	if got := token("default", "svc1"); got == first || got == "" {
		t.Errorf("svc1's token after a second rebalance: %q (first %q); want a new one", got, first)
	}
	if token("apps", "svc3") == "" || token("default", "pending") != "" {
		t.Error("--all -A annotated the wrong Services")
	}

	for _, bad := range [][]string{
		{"rebalance", "--kubeconfig", admin},
		{"rebalance", "--kubeconfig", admin, "--all", "svc1"},
		{"rebalance", "--kubeconfig", admin, "pending"},
		{"rebalance", "--kubeconfig", admin, "missing"},
	} {
		if _, err := run(bad...); err == nil {
			t.Errorf("%v: no error", bad[2:])
		}
	}
}
