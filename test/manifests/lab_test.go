package manifests

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	heraldv1 "herald.dev/herald/api/v1beta1"
	"herald.dev/herald/internal/lab"
	"herald.dev/herald/internal/lab/labtest"
	"herald.dev/herald/internal/lab/netlab"
	"herald.dev/herald/internal/testkit"
)

const (
	// labPrefix names this package's network namespaces (hmf-cp, hmf-w1, ...).
	labPrefix  = "hmf-"
	fieldOwner = "herald-manifests-test"
)

// labEnv is a control plane in the lab (labtest.NewControlPlane) with nothing of
// herald's installed: the tests apply the manifests themselves.
type labEnv struct {
	*labtest.Cluster
	ctx context.Context
}

func newLab(t *testing.T) *labEnv {
	t.Helper()
	return &labEnv{Cluster: labtest.NewControlPlane(t, labPrefix), ctx: context.Background()}
}

// apply server-side applies obj as the cluster admin, for real or as a dry run.
func (e *labEnv) apply(obj *unstructured.Unstructured, dryRun bool) error {
	opts := []client.ApplyOption{client.ForceOwnership, client.FieldOwner(fieldOwner)}
	if dryRun {
		opts = append(opts, client.DryRunAll)
	}
	return e.API.Apply(e.ctx, client.ApplyConfigurationFromUnstructured(obj.DeepCopy()), opts...)
}

func describe(o *unstructured.Unstructured) string {
	if o.GetNamespace() == "" {
		return o.GetKind() + " " + o.GetName()
	}
	return o.GetKind() + " " + o.GetNamespace() + "/" + o.GetName()
}

// TestManifestsOnARealAPIServer applies config/manifests/herald.yaml (and the kind
// overlay) to a real kube-apiserver: with server-side dry-run, then Pod Security, then
// for real, and runs herald's controller and speakers under the manifests'
// ServiceAccounts.
func TestManifestsOnARealAPIServer(t *testing.T) {
	assets := labtest.Assets(t)
	objs := readObjects(t, rendered)
	kindObjs, err := lab.DecodeObjects(kustomize(t, "config/kind"))
	if err != nil {
		t.Fatalf("config/kind: %v", err)
	}
	env := newLab(t)

	// Namespaced objects need their namespace to exist even in a dry run; the
	// manifest's own Namespace object is applied for real first.
	ns := find(t, objs, "Namespace", "", heraldNS)
	if err := env.apply(ns, false); err != nil {
		t.Fatalf("applying %s: %v", describe(ns), err)
	}

	t.Run("server-side dry-run", func(t *testing.T) {
		monitoring := env.monitoringObjects(t, assets)
		for _, set := range []struct {
			name string
			objs []*unstructured.Unstructured
		}{{rendered, objs}, {"config/kind", kindObjs}, {"config/prometheus and config/grafana", monitoring}} {
			for _, o := range set.objs {
				if err := env.apply(o, true); err != nil {
					t.Errorf("%s: %s refused by the API server: %v", set.name, describe(o), err)
				}
			}
		}
		// A dry run must have left nothing behind.
		var d appsv1.Deployment
		err := env.API.Get(env.ctx, types.NamespacedName{Namespace: heraldNS, Name: "herald-controller"}, &d)
		if !apierrors.IsNotFound(err) {
			t.Errorf("after the dry run, Deployment herald-controller: %v (want NotFound)", err)
		}
	})

	t.Run("pod security", func(t *testing.T) { env.podSecurity(t, objs) })

	t.Run("components under their ServiceAccounts", func(t *testing.T) { env.runAsServiceAccounts(t, objs) })
}

// monitoringObjects installs the Prometheus Operator's PodMonitor and PrometheusRule
// CRDs (hack/setup-test-binaries.sh puts them beside the binaries) and returns the
// objects of config/prometheus and config/grafana, so that the dry run checks them
// against those schemas: a misspelt field is refused there as it would be on a cluster
// with kube-prometheus-stack.
func (e *labEnv) monitoringObjects(t *testing.T, assets string) []*unstructured.Unstructured {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(assets, "monitoring-crds", "*.yaml"))
	if err != nil || len(paths) < 2 {
		t.Fatalf("%s/monitoring-crds lacks the PodMonitor and PrometheusRule CRDs (%v, %v): run hack/setup-test-binaries.sh", assets, paths, err)
	}
	var crds []*unstructured.Unstructured
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := lab.DecodeObjects(data)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		for _, o := range objs {
			if err := e.apply(o, false); err != nil {
				t.Fatalf("installing %s: %v", describe(o), err)
			}
		}
		crds = append(crds, objs...)
	}
	if err := lab.WaitEstablished(e.ctx, e.API, crds); err != nil {
		t.Fatal(err)
	}
	var out []*unstructured.Unstructured
	for _, dir := range []string{"config/prometheus", "config/grafana"} {
		objs, err := lab.DecodeObjects(kustomize(t, dir))
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		out = append(out, objs...)
	}
	return out
}

// podSecurity creates, with dry-run, Pods from the workloads' templates in namespaces
// enforcing each Pod Security level: the controller passes "restricted", the speaker
// only "privileged", which herald-system enforces.
func (e *labEnv) podSecurity(t *testing.T, objs []*unstructured.Unstructured) {
	for _, level := range []string{"restricted", "baseline"} {
		err := e.API.Create(e.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "psa-" + level, Labels: map[string]string{
			"pod-security.kubernetes.io/enforce": level, "pod-security.kubernetes.io/enforce-version": "latest"}}})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	controller := into[appsv1.Deployment](t, find(t, objs, "Deployment", heraldNS, "herald-controller")).Spec.Template
	speaker := into[appsv1.DaemonSet](t, find(t, objs, "DaemonSet", heraldNS, "herald-speaker")).Spec.Template
	for _, tc := range []struct {
		pod      string
		template corev1.PodTemplateSpec
		ns       string
		admitted bool
	}{
		{"controller", controller, "psa-restricted", true},
		{"controller", controller, heraldNS, true},
		{"speaker", speaker, heraldNS, true},
		{"speaker", speaker, "psa-baseline", false},
		{"speaker", speaker, "psa-restricted", false},
	} {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: tc.ns, Name: "psa-" + tc.pod, Labels: tc.template.Labels},
			Spec:       tc.template.Spec,
		}
		err := e.API.Create(e.ctx, pod, client.DryRunAll)
		switch {
		case tc.admitted && err != nil:
			t.Errorf("the %s's Pod in %s: %v", tc.pod, tc.ns, err)
		case !tc.admitted && err == nil:
			t.Errorf("the %s's Pod was admitted in %s: is Pod Security admission on?", tc.pod, tc.ns)
		case !tc.admitted && !strings.Contains(err.Error(), "violates PodSecurity"):
			t.Errorf("the %s's Pod in %s refused, but not by Pod Security: %v", tc.pod, tc.ns, err)
		}
	}
}

// runAsServiceAccounts applies the manifests for real, then runs two controller
// replicas and two speakers in the lab with kubeconfigs holding tokens of the
// manifests' ServiceAccounts: the memberlist Secret is created, a Service gets an
// address that one speaker announces, Events are recorded, the HTTPS metrics endpoints
// answer only the metrics reader, the leader Lease moves when the leader stops, and no
// component is ever refused by the API server.
func (e *labEnv) runAsServiceAccounts(t *testing.T, objs []*unstructured.Unstructured) {
	for _, o := range objs {
		if err := e.apply(o, false); err != nil {
			t.Fatalf("applying %s: %v", describe(o), err)
		}
	}
	if err := lab.WaitEstablished(e.ctx, e.API, objs); err != nil {
		t.Fatal(err)
	}
	// The manifests' ServiceAccounts run everything; the harness fails the test if the
	// API server refused any component anything: that is what proves the RBAC enough.
	e.ServiceAccountKubeconfigs()
	// The manifest's admission policy lets a speaker write only with its pod's token.
	e.SpeakerTokensBoundToPods = true
	e.AddWorkers(2)
	e.AddClient()
	workers, clientHost := e.Workers, e.Client

	// Controllers: the first becomes leader before the second starts, so stopping the
	// first later moves the Lease.
	// Metrics are served as the manifests serve them: HTTPS behind the API server's
	// authentication and authorization, whose reviews the components' RBAC must allow.
	startController := func(name, metrics, probe string) *netlab.Process {
		p := e.Start(e.CP.Host, name, "controller", "--kubeconfig", e.ControllerKubeconfig, "--namespace", heraldNS,
			"--metrics-bind-address", metrics, "--metrics-secure=true", "--health-probe-bind-address", probe, "--leader-elect=true")
		labtest.WaitHTTP(t, e.CP.Host, p, "http://"+probe+"/readyz")
		return p
	}
	first := startController("controller1", "127.0.0.1:7472", "127.0.0.1:7473")
	leader := e.waitLeader(t, "")
	startController("controller2", "127.0.0.1:7482", "127.0.0.1:7483")

	// The controller creates the memberlist Secret the speakers need.
	var secret corev1.Secret
	testkit.Eventually(t, labtest.Wait, labtest.Interval, "the memberlist Secret", func() error {
		return e.API.Get(e.ctx, types.NamespacedName{Namespace: heraldNS, Name: "herald-memberlist"}, &secret)
	})

	// Speakers read the key through the API (no file at --ml-secret-key-path), which
	// exercises their Secret rule, and run the iptables proxier in their node's namespace.
	// HTTPS metrics, as the manifests serve them (the last --metrics-secure wins).
	for _, h := range workers {
		e.StartSpeaker(h, "--ml-secret-key-path", filepath.Join(e.Net.RunDir(), "no-such-dir", "secretkey"), "--metrics-secure=true")
	}

	// The walkthrough's pool and advertisement, from config/samples.
	samples, err := lab.DecodeObjects(kustomize(t, "config/samples"))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range samples {
		if err := e.apply(o, false); err != nil {
			t.Fatalf("applying %s: %v", describe(o), err)
		}
	}

	ip := e.LBService("svc1", "w1", nil)
	if pool := netip.MustParsePrefix("172.18.255.192/26"); !pool.Contains(ip) {
		t.Errorf("svc1 got %s, outside the sample pool", ip)
	}
	macs := map[string]string{}
	for _, h := range workers {
		macs[h.MAC().String()] = h.Name()
	}
	testkit.Eventually(t, labtest.Wait, labtest.Interval, fmt.Sprintf("one speaker answering ARP for %s", ip), func() error {
		got, err := lab.WhoHas(clientHost.Namespace(), ip, time.Second)
		if err != nil {
			return err
		}
		if len(got) != 1 || macs[got[0]] == "" {
			return fmt.Errorf("MACs answering: %v (workers: %v)", got, macs)
		}
		return nil
	})
	testkit.Eventually(t, labtest.Wait, labtest.Interval, "Events IPAllocated (controller) and Announcing (speaker) on svc1", func() error {
		evs, err := e.Kube.EventsV1().Events("default").List(e.ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		var reasons []string
		for _, ev := range evs.Items {
			if ev.Regarding.Name == "svc1" {
				reasons = append(reasons, ev.Reason)
			}
		}
		if !slices.Contains(reasons, "IPAllocated") || !slices.Contains(reasons, "Announcing") {
			return fmt.Errorf("reasons so far: %v", reasons)
		}
		return nil
	})

	// The metrics endpoints of the leader (which allocated) and of a speaker answer only
	// the herald-metrics-reader token of config/prometheus.
	tokens := e.metricsTokens(t)
	e.secureMetrics(t, tokens, e.CP.Host, "https://127.0.0.1:7472/metrics", "herald_allocations_total")
	// The speaker found its token bound to its node (a pod there), as the policy needs.
	e.secureMetrics(t, tokens, workers[0], "https://"+labtest.SpeakerMetrics+"/metrics", "herald_speaker_token_node_bound 1")

	// The owner publishes itself in svc1's VIPStatus (the speakers' vipstatuses rule).
	testkit.Eventually(t, labtest.Wait, labtest.Interval, "the VIPStatus of "+ip.String()+" names the node answering ARP", func() error {
		var v heraldv1.VIPStatus
		if err := e.API.Get(e.ctx, types.NamespacedName{Namespace: "default", Name: heraldv1.VIPStatusName(ip)}, &v); err != nil {
			return err
		}
		got, err := lab.WhoHas(clientHost.Namespace(), ip, time.Second)
		if err != nil {
			return err
		}
		if v.Status.Node == "" || len(got) != 1 || macs[got[0]] != v.Status.Node || v.Status.MAC != got[0] {
			return fmt.Errorf("status %+v; MACs answering ARP %v (workers: %v)", v.Status, got, macs)
		}
		return nil
	})

	// The leader stops (releasing its Lease); the standby takes over and serves.
	if err := first.Stop(10 * time.Second); err != nil {
		t.Logf("stopping controller1: %v", err)
	}
	e.waitLeader(t, leader)
	e.LBService("svc2", "w2", nil)

	// svc2 stops being a LoadBalancer: the new leader clears its status and the pool
	// annotation (the release path's writes) and reports IPReleased.
	svc := &corev1.Service{}
	err = retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		if err := e.API.Get(e.ctx, types.NamespacedName{Namespace: "default", Name: "svc2"}, svc); err != nil {
			return err
		}
		svc.Spec.Type = corev1.ServiceTypeClusterIP
		svc.Spec.ExternalTrafficPolicy = ""
		svc.Spec.AllocateLoadBalancerNodePorts = nil
		for i := range svc.Spec.Ports {
			svc.Spec.Ports[i].NodePort = 0
		}
		return e.API.Update(e.ctx, svc)
	})
	if err != nil {
		t.Fatalf("making svc2 a ClusterIP Service: %v", err)
	}
	testkit.Eventually(t, labtest.Wait, labtest.Interval, "svc2 released (no ingress, no pool annotation, Event IPReleased)", func() error {
		if err := e.API.Get(e.ctx, types.NamespacedName{Namespace: "default", Name: "svc2"}, svc); err != nil {
			return err
		}
		if len(svc.Status.LoadBalancer.Ingress) > 0 || len(svc.Annotations) > 0 {
			return fmt.Errorf("ingress %v, annotations %v", svc.Status.LoadBalancer.Ingress, svc.Annotations)
		}
		evs, err := e.Kube.EventsV1().Events("default").List(e.ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, ev := range evs.Items {
			if ev.Regarding.Name == "svc2" && ev.Reason == "IPReleased" {
				return nil
			}
		}
		return errors.New("no Event IPReleased yet")
	})
}

// metricsTokens are bearer tokens for the metrics endpoints.
type metricsTokens struct {
	reader, other string
}

// metricsTokens applies config/prometheus but for its Prometheus Operator objects
// (PodMonitors, PrometheusRule: the lab has no monitoring.coreos.com CRDs): the
// ServiceAccount, its token Secret and the binding to
// the ClusterRole herald-metrics-reader that herald.yaml installs. It returns a token
// of the ServiceAccount the PodMonitors' Secret belongs to, and one of a ServiceAccount
// bound to nothing.
func (e *labEnv) metricsTokens(t *testing.T) metricsTokens {
	t.Helper()
	objs, err := lab.DecodeObjects(kustomize(t, "config/prometheus"))
	if err != nil {
		t.Fatalf("config/prometheus: %v", err)
	}
	for _, o := range objs {
		if o.GroupVersionKind().Group == "monitoring.coreos.com" {
			continue
		}
		if err := e.apply(o, false); err != nil {
			t.Fatalf("applying %s: %v", describe(o), err)
		}
	}
	reader := podMonitorsServiceAccount(t, objs)
	other := types.NamespacedName{Namespace: "default", Name: "not-a-metrics-reader"}
	if err := e.API.Create(e.ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: other.Namespace, Name: other.Name}}); err != nil {
		t.Fatal(err)
	}
	return metricsTokens{reader: e.token(t, reader), other: e.token(t, other)}
}

// token returns a token of sa (lab.ServiceAccountToken).
func (e *labEnv) token(t *testing.T, sa types.NamespacedName) string {
	t.Helper()
	token, err := lab.ServiceAccountToken(e.ctx, e.CP, sa, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// secureMetrics checks an HTTPS metrics endpoint from inside host's namespace: without
// a token it answers 401, with the token of an account not bound to
// herald-metrics-reader 403, with the reader's token 200 and metrics, one of them a
// sample whose line starts with want. Each answer comes from the lab's kube-apiserver,
// which the component asks with a TokenReview and a SubjectAccessReview.
func (e *labEnv) secureMetrics(t *testing.T, tokens metricsTokens, h *netlab.Host, url, want string) {
	t.Helper()
	hc := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{
		DialContext: h.DialContext,
		// Self-signed, as in the manifests (no --metrics-cert-dir).
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // see above
	}}
	get := func(token string) (int, string, error) {
		req, err := http.NewRequestWithContext(e.ctx, http.MethodGet, url, nil)
		if err != nil {
			return 0, "", err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}
	// Plain HTTP is not served on the secure port.
	if plain, err := hc.Get("http" + strings.TrimPrefix(url, "https")); err == nil {
		plain.Body.Close()
		if plain.StatusCode == http.StatusOK {
			t.Errorf("%s: plain HTTP answered 200", url)
		}
	}
	for _, tc := range []struct {
		who   string
		token string
		code  int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"a ServiceAccount without herald-metrics-reader", tokens.other, http.StatusForbidden},
		{"the herald-metrics-reader ServiceAccount", tokens.reader, http.StatusOK},
	} {
		code, body, err := get(tc.token)
		if err != nil {
			t.Errorf("%s with %s: %v", url, tc.who, err)
			continue
		}
		t.Logf("%s with %s: %d", url, tc.who, code)
		if code != tc.code {
			t.Errorf("%s with %s: %d, want %d; body:\n%.300s", url, tc.who, code, tc.code, body)
			continue
		}
		if code == http.StatusOK && !hasSample(body, want) {
			t.Errorf("%s with %s: no sample line starting with %s in:\n%.2000s", url, tc.who, want, body)
		}
	}
}

// hasSample says whether a Prometheus text exposition has a sample line (not a
// comment) starting with prefix.
func hasSample(body, prefix string) bool {
	for line := range strings.Lines(body) {
		if strings.HasPrefix(line, prefix) {
			return true
		}
	}
	return false
}

// waitLeader waits until the controller Lease has a holder other than not, and
// returns it.
func (e *labEnv) waitLeader(t *testing.T, not string) string {
	t.Helper()
	var holder string
	testkit.Eventually(t, labtest.Wait, labtest.Interval, "a controller leader other than "+strings.TrimSpace(not+" (none)"), func() error {
		var l coordinationv1.Lease
		if err := e.API.Get(e.ctx, types.NamespacedName{Namespace: heraldNS, Name: "herald-controller"}, &l); err != nil {
			return err
		}
		holder = ptr.Deref(l.Spec.HolderIdentity, "")
		if holder == "" || holder == not {
			return fmt.Errorf("holder %q", holder)
		}
		return nil
	})
	return holder
}
