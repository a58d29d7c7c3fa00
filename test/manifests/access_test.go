package manifests

import (
	"slices"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/types"

	"herald.dev/herald/internal/testenv"
)

// TestWhatTheAccountsMayDo installs the manifest's ServiceAccounts and RBAC on a real
// kube-apiserver and asks it, as `kubectl auth can-i --as` does (SubjectAccessReview),
// what herald's accounts may do. The controller changes no Service but through its
// status; the speaker writes none of the controller's objects that RBAC can name. RBAC
// cannot refuse a speaker the controller's Leases (a create has no name to restrict,
// and the speakers' own Leases are named after nodes): that is the admission policy's
// work, which TestSpeakerWritesOnlyForItsNode shows.
func TestWhatTheAccountsMayDo(t *testing.T) {
	env := testenv.Start(t)
	rbacKinds := []string{"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
	for _, o := range readObjects(t, rendered) {
		if slices.Contains(rbacKinds, o.GetKind()) {
			applyAsAdmin(t, env.Client, o)
		}
	}
	controller := types.NamespacedName{Namespace: heraldNS, Name: "herald-controller"}
	speaker := types.NamespacedName{Namespace: heraldNS, Name: "herald-speaker"}
	for _, c := range []struct {
		sa                                           types.NamespacedName
		verb, group, resource, subresource, ns, name string
		allowed                                      bool
	}{
		{controller, "update", "", "services", "", "default", "web", false},
		{controller, "patch", "", "services", "", "default", "web", false},
		{controller, "patch", "", "services", "status", "default", "web", true},
		{speaker, "patch", "", "services", "", "default", "web", false},
		{speaker, "update", "", "configmaps", "", heraldNS, "herald-records", false},
		{speaker, "update", "", "secrets", "", heraldNS, "herald-memberlist", false},
		{speaker, "update", "", "nodes", "", "", "node-a", false},
		{speaker, "update", "coordination.k8s.io", "leases", "", "kube-node-lease", "node-a", false},
		// Allowed by RBAC, refused by the admission policy.
		{speaker, "update", "coordination.k8s.io", "leases", "", heraldNS, "herald-controller", true},
	} {
		review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   "system:serviceaccount:" + c.sa.Namespace + ":" + c.sa.Name,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + c.sa.Namespace, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: c.ns, Verb: c.verb, Group: c.group, Resource: c.resource, Subresource: c.subresource, Name: c.name,
			},
		}}
		if err := env.Client.Create(t.Context(), review); err != nil {
			t.Fatal(err)
		}
		if review.Status.Allowed != c.allowed {
			what := c.resource
			if c.subresource != "" {
				what += "/" + c.subresource
			}
			t.Errorf("%s may %s %s %s/%s: %v, want %v", c.sa.Name, c.verb, what, c.ns, c.name, review.Status.Allowed, c.allowed)
		}
	}
}
