package speaker

import (
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"herald.dev/herald/internal/testenv"
)

// TestTokenBinding asks a real kube-apiserver, with tokens it issued, which node each
// is bound to: a token bound to a pod on node-a names node-a (gauge 1 for the speaker of
// node-a, 0 for node-b's), a token bound to nothing names none (0).
func TestTokenBinding(t *testing.T) {
	env := testenv.Start(t)
	ctx := t.Context()
	ns := "token-binding"
	env.CreateNamespace(t, ns)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "speaker"}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "speaker-node-a"},
		Spec: corev1.PodSpec{ServiceAccountName: sa.Name, NodeName: node.Name,
			Containers: []corev1.Container{{Name: "speaker", Image: "herald-speaker:dev"}}},
	}
	if err := env.Client.Create(ctx, sa); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	token := func(ref *authenticationv1.BoundObjectReference) *rest.Config {
		tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(3600)), BoundObjectRef: ref},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cfg := rest.AnonymousClientConfig(env.Config)
		cfg.BearerToken = tr.Status.Token
		return cfg
	}
	bound := token(&authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID})
	unbound := token(nil)

	for _, c := range []struct {
		what string
		cfg  *rest.Config
		self string
		want float64
	}{
		{"bound to a pod on its node", bound, "node-a", 1},
		{"bound to a pod on another node", bound, "node-b", 0},
		{"bound to nothing", unbound, "node-a", 0},
	} {
		g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "g"})
		g.Set(-1)
		if err := checkTokenBinding(ctx, c.cfg, c.self, g, logr.Discard()); err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}
		var m dto.Metric
		if err := g.Write(&m); err != nil {
			t.Fatal(err)
		}
		if got := m.GetGauge().GetValue(); got != c.want {
			t.Errorf("%s: herald_speaker_token_node_bound %v, want %v", c.what, got, c.want)
		}
	}
}
