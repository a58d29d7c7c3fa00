package manifests

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"herald.dev/herald/internal/lab"
)

// metricsReader is the ClusterRole that lets a scraper get herald's /metrics.
const metricsReader = "herald-metrics-reader"

// TestMetricsReaderRole: herald.yaml installs the ClusterRole herald-metrics-reader,
// allowing exactly get on /metrics, and binds it to none of herald's own accounts.
func TestMetricsReaderRole(t *testing.T) {
	objs := readObjects(t, rendered)
	cr := into[rbacv1.ClusterRole](t, find(t, objs, "ClusterRole", "", metricsReader))
	want := []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}
	if len(cr.Rules) != 1 || !slices.Equal(cr.Rules[0].NonResourceURLs, want[0].NonResourceURLs) ||
		!slices.Equal(cr.Rules[0].Verbs, want[0].Verbs) || len(cr.Rules[0].APIGroups)+len(cr.Rules[0].Resources) > 0 {
		t.Errorf("ClusterRole %s rules %+v, want %+v", metricsReader, cr.Rules, want)
	}
	for _, b := range collectRBAC(t, objs).crbs {
		if b.RoleRef.Name == metricsReader {
			t.Errorf("herald.yaml binds %s (ClusterRoleBinding %s): whoever scrapes binds it", metricsReader, b.Name)
		}
	}
}

// TestPodMonitors: config/prometheus scrapes both components over HTTPS with the token
// of a ServiceAccount bound to herald-metrics-reader, and names each target after its
// node without adding a `node` label.
func TestPodMonitors(t *testing.T) {
	objs, err := lab.DecodeObjects(kustomize(t, "config/prometheus"))
	if err != nil {
		t.Fatal(err)
	}
	podMonitorsServiceAccount(t, objs)
	for _, name := range []string{"herald-controller", "herald-speaker"} {
		pm := find(t, objs, "PodMonitor", heraldNS, name)
		eps, _, _ := unstructured.NestedSlice(pm.Object, "spec", "podMetricsEndpoints")
		if len(eps) != 1 {
			t.Fatalf("PodMonitor %s: %d endpoints, want 1", name, len(eps))
		}
		ep := eps[0].(map[string]any)
		if s, _, _ := unstructured.NestedString(ep, "scheme"); s != "https" {
			t.Errorf("PodMonitor %s: scheme %q, want https", name, s)
		}
		if skip, _, _ := unstructured.NestedBool(ep, "tlsConfig", "insecureSkipVerify"); !skip {
			t.Errorf("PodMonitor %s: the endpoints' certificate is self-signed by default: want tlsConfig.insecureSkipVerify", name)
		}
		rels, _, _ := unstructured.NestedSlice(ep, "relabelings")
		var instance bool
		for _, r := range rels {
			r := r.(map[string]any)
			src, _, _ := unstructured.NestedStringSlice(r, "sourceLabels")
			target, _, _ := unstructured.NestedString(r, "targetLabel")
			if target == "node" {
				t.Errorf("PodMonitor %s: target label `node` would rename herald_l2_owner's own node label to exported_node", name)
			}
			action, _, _ := unstructured.NestedString(r, "action")
			instance = instance || (target == "instance" && slices.Equal(src, []string{"__meta_kubernetes_pod_node_name"}) &&
				(action == "" || action == "replace"))
		}
		if !instance {
			t.Errorf("PodMonitor %s: no relabeling of __meta_kubernetes_pod_node_name into instance", name)
		}
	}
}

// podMonitorsServiceAccount checks that every PodMonitor of objs (config/prometheus)
// sends as bearer token the `token` of one kubernetes.io/service-account-token Secret
// of its namespace, whose ServiceAccount objs create and bind to herald-metrics-reader,
// and returns that ServiceAccount.
func podMonitorsServiceAccount(t *testing.T, objs []*unstructured.Unstructured) types.NamespacedName {
	t.Helper()
	var sa types.NamespacedName
	monitors := 0
	for _, pm := range objs {
		if pm.GetKind() != "PodMonitor" {
			continue
		}
		monitors++
		eps, _, _ := unstructured.NestedSlice(pm.Object, "spec", "podMetricsEndpoints")
		for _, ep := range eps {
			ep := ep.(map[string]any)
			typ, _, _ := unstructured.NestedString(ep, "authorization", "type")
			name, _, _ := unstructured.NestedString(ep, "authorization", "credentials", "name")
			key, _, _ := unstructured.NestedString(ep, "authorization", "credentials", "key")
			if typ != "Bearer" || key != corev1.ServiceAccountTokenKey || name == "" {
				t.Fatalf("PodMonitor %s: authorization %s from key %q of Secret %q, want Bearer from key %s of a Secret",
					pm.GetName(), typ, key, name, corev1.ServiceAccountTokenKey)
			}
			secret := into[corev1.Secret](t, find(t, objs, "Secret", pm.GetNamespace(), name))
			if secret.Type != corev1.SecretTypeServiceAccountToken {
				t.Fatalf("Secret %s/%s: type %q, want %s", secret.Namespace, secret.Name, secret.Type, corev1.SecretTypeServiceAccountToken)
			}
			got := types.NamespacedName{Namespace: secret.Namespace, Name: secret.Annotations[corev1.ServiceAccountNameKey]}
			if sa != (types.NamespacedName{}) && got != sa {
				t.Errorf("PodMonitors scrape as %s and as %s: want one reader", sa, got)
			}
			sa = got
		}
	}
	if monitors != 2 {
		t.Fatalf("%d PodMonitors, want 2 (controller and speaker)", monitors)
	}
	find(t, objs, "ServiceAccount", sa.Namespace, sa.Name)
	bound := slices.ContainsFunc(collectRBAC(t, objs).crbs, func(b *rbacv1.ClusterRoleBinding) bool {
		return b.RoleRef.Kind == "ClusterRole" && b.RoleRef.Name == metricsReader && bindsSA(b.Subjects, sa)
	})
	if !bound {
		t.Fatalf("ServiceAccount %s is not bound to ClusterRole %s", sa, metricsReader)
	}
	return sa
}
