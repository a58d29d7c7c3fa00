package app

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	heraldv1 "herald.dev/herald/api/v1beta1"
	"herald.dev/herald/internal/testenv"
)

func TestMigrateHelpNamesItsFlags(t *testing.T) {
	out, err := run("migrate", "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, flag := range []string{"--kubeconfig", "--filename", "--namespace", "--metallb-namespace", "--apply", "--skip-unsupported"} {
		if !strings.Contains(out, flag) {
			t.Errorf("migrate --help lacks %s", flag)
		}
	}
}

func TestMigrateFromFileNeedsNoCluster(t *testing.T) {
	out, err := run("migrate", "-f", filepath.Join("testdata", "metallb-config.yaml"), "--kubeconfig", "/nonexistent", "-n", "lb")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"kind: IPAddressPool", "namespace: lb", "name: first", "kind: L2Advertisement"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// metallbObject creates one of MetalLB's objects from YAML.
func metallbObject(t *testing.T, env *testenv.Env, doc string) {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(context.Background(), u); err != nil {
		t.Fatalf("creating %s %s: %v", u.GetKind(), u.GetName(), err)
	}
}

// herald migrate against a real API server with stand-ins for MetalLB's CRDs: a BGPPeer
// stops --apply (nothing is applied); --skip-unsupported applies the rest, and the API
// server accepts herald's objects under herald's CRD schema.
func TestMigrateApplyFromCluster(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	if _, err := envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{Paths: []string{filepath.Join("testdata", "metallb-test-crds.yaml")}}); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"metallb-system", "herald-system", "elsewhere"} {
		env.CreateNamespace(t, ns)
	}
	metallbObject(t, env, `
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: first, namespace: metallb-system, labels: {tier: gold}}
spec:
  addresses: [192.168.10.0/24]
  autoAssign: false
  serviceAllocation: {priority: 10, namespaceSelectors: [{matchLabels: {team: a}}]}
`)
	metallbObject(t, env, `
apiVersion: metallb.io/v1beta1
kind: L2Advertisement
metadata: {name: gold, namespace: metallb-system}
spec: {ipAddressPoolSelectors: [{matchLabels: {tier: gold}}], interfaces: [eth0]}
`)
	metallbObject(t, env, `
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: not-metallbs, namespace: elsewhere}
spec: {addresses: [10.9.9.0/24]}
`)
	metallbObject(t, env, `
apiVersion: metallb.io/v1beta2
kind: BGPPeer
metadata: {name: router, namespace: metallb-system}
spec: {myASN: 64500, peerASN: 64501, peerAddress: 10.0.0.1}
`)
	if err := env.Client.Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", Annotations: map[string]string{"metallb.universe.tf/address-pool": "first"}},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 80}}},
	}); err != nil {
		t.Fatal(err)
	}
	admin := env.Kubeconfig(t, "admin", "system:masters")

	out, err := run("migrate", "--kubeconfig", admin, "--apply")
	if err == nil || !strings.Contains(out, "refused: metallb.io/v1beta2 BGPPeer metallb-system/router") || !strings.Contains(err.Error(), "nothing was applied") {
		t.Fatalf("with a BGPPeer: err = %v, output:\n%s", err, out)
	}
	var pool heraldv1.IPAddressPool
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: "herald-system", Name: "first"}, &pool); !apierrors.IsNotFound(err) {
		t.Fatalf("a refused run applied pool first (err %v)", err)
	}

	out, err = run("migrate", "--kubeconfig", admin, "--apply", "--skip-unsupported")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"ipaddresspool.herald.dev/first serverside-applied", "l2advertisement.herald.dev/gold serverside-applied",
		"default/web (no IP): metallb.universe.tf/address-pool=first"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "not-metallbs") {
		t.Errorf("read a pool outside --metallb-namespace:\n%s", out)
	}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: "herald-system", Name: "first"}, &pool); err != nil {
		t.Fatal(err)
	}
	if len(pool.Spec.Addresses) != 1 || pool.Spec.Addresses[0] != "192.168.10.0/24" || pool.Spec.AutoAssign == nil || *pool.Spec.AutoAssign ||
		pool.Spec.AllocateTo == nil || pool.Spec.AllocateTo.Priority != 10 || pool.Labels["tier"] != "gold" {
		t.Errorf("pool first = %+v, labels %v", pool.Spec, pool.Labels)
	}
	var adv heraldv1.L2Advertisement
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: "herald-system", Name: "gold"}, &adv); err != nil {
		t.Fatal(err)
	}
	if len(adv.Spec.Interfaces) != 1 || len(adv.Spec.IPAddressPoolSelectors) != 1 {
		t.Errorf("L2Advertisement gold = %+v", adv.Spec)
	}

	// Applying again changes nothing and still succeeds.
	if out, err := run("migrate", "--kubeconfig", admin, "--apply", "--skip-unsupported"); err != nil {
		t.Fatalf("second apply: %v\n%s", err, out)
	}
}
