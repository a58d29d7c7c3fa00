package manifests

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	heraldv1 "herald.dev/herald/api/v1beta1"
	"herald.dev/herald/internal/scheme"
	"herald.dev/herald/internal/testenv"
	"herald.dev/herald/internal/testkit"
)

// ownNodePolicy is the ValidatingAdmissionPolicy that holds each speaker to its node.
const ownNodePolicy = "herald-speaker-own-node"

// Refusals the policy gives, as its messages say them.
const (
	notBound    = "token is not bound to a pod on a node"
	notOwnLease = "may write only the Leases herald-speaker-node-a and herald-heartbeat-node-a"
	notHolder   = "may write only Leases it holds itself"
	notOwnVIP   = "may publish only itself as the owner of an IP"
	rbacDenied  = "cannot update resource" // RBAC's own words, not the policy's
)

// TestSpeakerWritesOnlyForItsNode installs the speakers' ServiceAccount, roles and
// admission policy from config/manifests/herald.yaml on a real kube-apiserver and
// writes with the token the API server binds to a speaker pod on node-a: its own
// record, heartbeat and VIPStatus pass; node-b's, the controller's Leases and
// the records digest are refused, and so is everything written with a token of the
// same ServiceAccount that is bound to no pod. Before the policy is installed the same
// token writes node-b's record: RBAC alone does not stop it.
func TestSpeakerWritesOnlyForItsNode(t *testing.T) {
	env := testenv.Start(t)
	ctx := t.Context()
	objs := readObjects(t, "config/manifests/herald.yaml")
	admin := env.Client
	for _, o := range []*unstructured.Unstructured{
		find(t, objs, "Namespace", "", heraldNS),
		find(t, objs, "ServiceAccount", heraldNS, "herald-speaker"),
		find(t, objs, "ClusterRole", "", "herald-speaker"),
		find(t, objs, "ClusterRoleBinding", "", "herald-speaker"),
		find(t, objs, "Role", heraldNS, "herald-speaker"),
		find(t, objs, "RoleBinding", heraldNS, "herald-speaker"),
	} {
		applyAsAdmin(t, admin, o)
	}

	pod := speakerPodOn(t, admin, "node-a")
	if err := admin.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-b"}}); err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	asA := tokenClient(t, env.Config, speakerToken(t, cs, &authenticationv1.BoundObjectReference{
		Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID,
	}))
	unbound := tokenClient(t, env.Config, speakerToken(t, cs, nil))

	// What others wrote: the controller's leader Lease and heartbeat summary, its
	// records digest, node-b's record.
	for _, o := range []client.Object{
		lease("herald-controller", "herald-controller-abc"),
		lease("herald-heartbeats", "herald-controller-abc"),
		lease("herald-speaker-node-b", "node-b"),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: heraldNS, Name: "herald-records"}},
	} {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}

	// Without the policy, RBAC lets node-a's speaker write node-b's heartbeat.
	if err := asA.Create(ctx, lease("herald-heartbeat-node-b", "node-b"), client.DryRunAll); err != nil {
		t.Fatalf("before the policy, node-a's speaker could not write node-b's heartbeat: %v", err)
	}
	applyAsAdmin(t, admin, find(t, objs, "ValidatingAdmissionPolicy", "", ownNodePolicy))
	applyAsAdmin(t, admin, find(t, objs, "ValidatingAdmissionPolicyBinding", "", ownNodePolicy))
	waitRefused(t, func() error {
		return asA.Create(ctx, lease("herald-heartbeat-node-b", "node-b"), client.DryRunAll)
	})

	steps := []struct {
		what    string
		do      func() error
		refused string // "" = allowed
	}{
		{"node-b's heartbeat", func() error { return asA.Create(ctx, lease("herald-heartbeat-node-b", "node-b")) }, notOwnLease},
		{"node-b's record", func() error { return asA.Create(ctx, lease("herald-speaker-node-b", "node-b")) }, notOwnLease},
		{"update of node-b's record", func() error { return relabel(ctx, asA, "herald-speaker-node-b") }, notOwnLease},
		{"delete of node-b's record", func() error { return asA.Delete(ctx, lease("herald-speaker-node-b", "")) }, notOwnLease},
		{"the controller's leader Lease", func() error { return relabel(ctx, asA, "herald-controller") }, notOwnLease},
		{"delete of the controller's leader Lease", func() error { return asA.Delete(ctx, lease("herald-controller", "")) }, notOwnLease},
		{"the heartbeat summary", func() error { return relabel(ctx, asA, "herald-heartbeats") }, notOwnLease},
		{"its own record held by node-b", func() error { return asA.Create(ctx, lease("herald-speaker-node-a", "node-b")) }, notHolder},
		{"its own record", func() error { return asA.Create(ctx, lease("herald-speaker-node-a", "node-a")) }, ""},
		{"its own heartbeat", func() error { return asA.Create(ctx, lease("herald-heartbeat-node-a", "node-a")) }, ""},
		{"update of its own record", func() error { return relabel(ctx, asA, "herald-speaker-node-a") }, ""},
		{"delete of its own heartbeat", func() error { return asA.Delete(ctx, lease("herald-heartbeat-node-a", "")) }, ""},
		{"the records digest", func() error {
			return asA.Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: heraldNS, Name: "herald-records"}})
		}, rbacDenied},
		{"a VIPStatus owned by node-b", func() error { return asA.Create(ctx, vipStatus("ip-192-0-2-1", "node-b")) }, notOwnVIP},
		{"a VIPStatus owned by node-a", func() error { return asA.Create(ctx, vipStatus("ip-192-0-2-2", "node-a")) }, ""},
		{"a VIPStatus owned by nobody", func() error { return asA.Create(ctx, vipStatus("ip-192-0-2-3", "")) }, ""},
		{"its own record with a token bound to no pod", func() error {
			return unbound.Create(ctx, lease("herald-speaker-node-a", "node-a"), client.DryRunAll)
		}, notBound},
		{"a VIPStatus with a token bound to no pod", func() error { return unbound.Create(ctx, vipStatus("ip-192-0-2-4", "")) }, notBound},
	}
	for _, s := range steps {
		err := s.do()
		switch {
		case s.refused == "" && err != nil:
			t.Errorf("%s: refused, want allowed: %v", s.what, err)
		case s.refused != "" && err == nil:
			t.Errorf("%s: allowed, want refused (%q)", s.what, s.refused)
		case s.refused != "" && (!apierrors.IsForbidden(err) || !strings.Contains(err.Error(), s.refused)):
			t.Errorf("%s: %v, want Forbidden saying %q", s.what, err, s.refused)
		}
	}
}

// applyAsAdmin server-side applies o as the cluster admin.
func applyAsAdmin(t *testing.T, c client.Client, o *unstructured.Unstructured) {
	t.Helper()
	err := c.Apply(t.Context(), client.ApplyConfigurationFromUnstructured(o.DeepCopy()), client.ForceOwnership, client.FieldOwner(fieldOwner))
	if err != nil {
		t.Fatalf("%s: %v", describe(o), err)
	}
}

// speakerPodOn creates node and a speaker Pod scheduled on it, as the DaemonSet's
// would be (there is no kubelet: the Pod is only what its token is bound to).
func speakerPodOn(t *testing.T, c client.Client, node string) *corev1.Pod {
	t.Helper()
	if err := c.Create(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: heraldNS, Name: "herald-speaker-" + node},
		Spec: corev1.PodSpec{
			ServiceAccountName: "herald-speaker",
			NodeName:           node,
			Containers:         []corev1.Container{{Name: "speaker", Image: "herald-speaker:dev"}},
		},
	}
	if err := c.Create(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	return pod
}

// speakerToken asks the API server for a token of the speakers' ServiceAccount, bound
// to ref (a Pod: the API server then puts the pod's node into it) or to nothing.
func speakerToken(t *testing.T, cs kubernetes.Interface, ref *authenticationv1.BoundObjectReference) string {
	t.Helper()
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: ptr.To(int64(3600)),
		BoundObjectRef:    ref,
	}}
	got, err := cs.CoreV1().ServiceAccounts(heraldNS).CreateToken(t.Context(), "herald-speaker", req, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token request: %v", err)
	}
	return got.Status.Token
}

// tokenClient is a client of the API server at cfg that authenticates with token only.
func tokenClient(t *testing.T, cfg *rest.Config, token string) client.Client {
	t.Helper()
	c := rest.AnonymousClientConfig(cfg)
	c.BearerToken = token
	cl, err := client.New(c, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// waitRefused waits until write is refused as Forbidden: a new admission policy takes
// effect once the API server's informer has it.
func waitRefused(t *testing.T, write func() error) {
	t.Helper()
	testkit.Eventually(t, 30*time.Second, 100*time.Millisecond, "the admission policy in effect", func() error {
		if err := write(); !apierrors.IsForbidden(err) {
			return fmt.Errorf("the write answers %v", err)
		}
		return nil
	})
}

func lease(name, holder string) *coordinationv1.Lease {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: heraldNS, Name: name}}
	if holder != "" {
		l.Spec.HolderIdentity = ptr.To(holder)
	}
	return l
}

// relabel reads the Lease name and writes it back with one more label.
func relabel(ctx context.Context, c client.Client, name string) error {
	l := &coordinationv1.Lease{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: heraldNS, Name: name}, l); err != nil {
		return err
	}
	l.Labels = map[string]string{"touched": "true"}
	return c.Update(ctx, l)
}

func vipStatus(name, node string) *heraldv1.VIPStatus {
	return &heraldv1.VIPStatus{
		ObjectMeta: metav1.ObjectMeta{Namespace: heraldNS, Name: name},
		Status:     heraldv1.VIPStatusStatus{IP: "192.0.2.1", Node: node},
	}
}
