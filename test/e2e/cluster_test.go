package e2e

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	heraldv1 "herald.dev/herald/api/v1beta1"
	"herald.dev/herald/internal/lab"
	"herald.dev/herald/internal/lab/netlab"
	"herald.dev/herald/internal/scheme"
)

const (
	heraldNS = "herald-system"
	waitFor  = 60 * time.Second
)

// cluster is a small kind-like cluster in network namespaces: a control plane at
// 172.18.0.2 (real etcd, kube-apiserver, kube-controller-manager) running herald's
// controller, worker namespaces running herald speakers, and a client. As in the full
// lab, herald's CRDs, namespace, ServiceAccounts and RBAC are the manifest's
// (lab.InstallManifest) and its components run under those ServiceAccounts; the test
// itself is cluster admin.
type cluster struct {
	t       testing.TB
	ctx     context.Context
	lab     *netlab.Lab
	cp      *netlab.ControlPlane
	c       client.Client
	herald  string // the herald binary
	workers []*netlab.Host
	client  *netlab.Host
	// controllerKC and speakerKC are kubeconfigs of the manifest's ServiceAccounts.
	controllerKC, speakerKC string
	// speakers by worker name; nil when stopped.
	speakers map[string]*netlab.Process
	// logs of every herald component started, checked for refusals at the end.
	logs map[string]bool
}

// newCluster builds the lab; it fails (never skips) when namespaces cannot be made.
func newCluster(t testing.TB, prefix string, workers int) *cluster {
	t.Helper()
	if err := netlab.Check(); err != nil {
		t.Fatalf("the end-to-end tests need the network-namespace lab: %v", err)
	}
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		t.Fatal("KUBEBUILDER_ASSETS is unset: run `make test`, or export KUBEBUILDER_ASSETS=$(hack/setup-test-binaries.sh)")
	}
	runDir := filepath.Join(os.TempDir(), "herald-e2e", prefix+t.Name())
	_ = os.RemoveAll(runDir)
	if err := netlab.Cleanup(prefix, runDir); err != nil {
		t.Fatalf("cleaning up an earlier run: %v", err)
	}
	netLab, err := netlab.New(prefix, netip.MustParsePrefix("172.18.0.0/16"), runDir)
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t, ctx: context.Background(), lab: netLab, speakers: map[string]*netlab.Process{}, logs: map[string]bool{}}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs of the failed run are in %s", runDir)
		}
		if err := netLab.Close(); err != nil {
			t.Errorf("closing the lab: %v", err)
		}
	})
	// Runs first: no component may have been refused anything by the API server.
	t.Cleanup(func() {
		for _, log := range slices.Sorted(maps.Keys(c.logs)) {
			if lines := lab.Refusals(log); len(lines) > 0 {
				t.Errorf("%s was refused by the API server (missing RBAC?):\n%s", filepath.Base(log), strings.Join(lines, "\n"))
			}
		}
	})
	if c.herald, err = netLab.Build(c.ctx, "herald.dev/herald"); err != nil {
		t.Fatal(err)
	}
	cpHost, err := netLab.AddHost("cp", netip.MustParseAddr("172.18.0.2"))
	if err != nil {
		t.Fatal(err)
	}
	if c.cp, err = netlab.StartControlPlane(c.ctx, cpHost, assets); err != nil {
		t.Fatal(err)
	}
	if c.c, err = client.New(c.cp.Config, client.Options{Scheme: scheme.New()}); err != nil {
		t.Fatal(err)
	}
	root, err := netlab.RepoRoot(c.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lab.InstallManifest(c.ctx, c.c, root); err != nil {
		t.Fatal(err)
	}
	c.controllerKC = filepath.Join(runDir, "controller.kubeconfig")
	c.speakerKC = filepath.Join(runDir, "speaker.kubeconfig")
	for sa, path := range map[types.NamespacedName]string{lab.ControllerAccount: c.controllerKC, lab.SpeakerAccount: c.speakerKC} {
		if err := lab.ServiceAccountKubeconfig(c.ctx, c.cp, sa, 24*time.Hour, path); err != nil {
			t.Fatal(err)
		}
	}
	for i := range workers {
		name := fmt.Sprintf("w%d", i+1)
		h, err := netLab.AddHost(name, netip.AddrFrom4([4]byte{172, 18, 0, byte(3 + i)}))
		if err != nil {
			t.Fatal(err)
		}
		c.workers = append(c.workers, h)
		c.node(name, h.Addr())
	}
	if c.client, err = netLab.AddHost("client", netip.MustParseAddr("172.18.0.100")); err != nil {
		t.Fatal(err)
	}
	p, err := cpHost.Start("controller", c.herald, "controller", "--kubeconfig", c.controllerKC,
		"--namespace", heraldNS, "--leader-elect=false", "--metrics-bind-address", "0", "--metrics-secure=false", "--health-probe-bind-address", "0")
	if err != nil {
		t.Fatal(err)
	}
	c.logs[p.Log] = true
	return c
}

// node creates a Node with addr as InternalIP, the way a kubelet registers.
func (c *cluster) node(name string, addr netip.Addr) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}}
	c.create(n)
	// kube-controller-manager annotates new Nodes meanwhile: retry on conflict.
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		if err := c.c.Get(c.ctx, client.ObjectKeyFromObject(n), n); err != nil {
			return err
		}
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: addr.String()}, {Type: corev1.NodeHostName, Address: name}}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now()}}
		return c.c.Status().Update(c.ctx, n)
	})
	if err != nil {
		c.t.Fatalf("node %s status: %v", name, err)
	}
}

func (c *cluster) create(obj client.Object) {
	c.t.Helper()
	if err := c.c.Create(c.ctx, obj); err != nil {
		c.t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

// startSpeaker runs `herald speaker` in the worker's namespace and waits until it is
// ready (informers synced, memberlist joined, responders up).
func (c *cluster) startSpeaker(h *netlab.Host, extra ...string) {
	c.t.Helper()
	args := append([]string{c.herald, "speaker", "--kubeconfig", c.speakerKC, "--node-name", h.Name(),
		"--ml-bind-addr", h.Addr().String(), "--namespace", heraldNS,
		// Plain HTTP: metric() scrapes without a token.
		"--metrics-bind-address", "127.0.0.1:7474", "--metrics-secure=false", "--health-probe-bind-address", "127.0.0.1:7475"}, extra...)
	p, err := h.Start("speaker", args...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.speakers[h.Name()] = p
	c.logs[p.Log] = true
	hc := &http.Client{Transport: &http.Transport{DialContext: h.DialContext}, Timeout: time.Second}
	deadline := time.Now().Add(waitFor)
	for {
		resp, err := hc.Get("http://127.0.0.1:7475/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if p.Exited() || time.Now().After(deadline) {
			c.t.Fatalf("speaker on %s did not become ready; log %s:\n%s", h.Name(), p.Log, tail(p.Log))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// metric reads one sample of a speaker's /metrics (its first line starting so).
func (c *cluster) metrics(h *netlab.Host) string {
	hc := &http.Client{Transport: &http.Transport{DialContext: h.DialContext}, Timeout: 2 * time.Second}
	resp, err := hc.Get("http://127.0.0.1:7474/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			return b.String()
		}
	}
}

// lbService creates a LoadBalancer Service without selector and an EndpointSlice
// with one ready endpoint on node, and waits for its external IP.
func (c *cluster) lbService(name, node string, mutate func(*corev1.Service)) netip.Addr {
	c.t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{
			{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}
	if mutate != nil {
		mutate(svc)
	}
	c.create(svc)
	c.create(&discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name + "-1",
			Labels: map[string]string{discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: "e2e.herald.dev"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.244.1.10"}, NodeName: ptr.To(node),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](8080)}},
	})
	deadline := time.Now().Add(waitFor)
	for {
		var s corev1.Service
		if err := c.c.Get(c.ctx, types.NamespacedName{Namespace: "default", Name: name}, &s); err == nil && len(s.Status.LoadBalancer.Ingress) > 0 {
			return netip.MustParseAddr(s.Status.LoadBalancer.Ingress[0].IP)
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("Service %s got no external IP", name)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// pool creates the walkthrough's pool and an L2Advertisement of every pool.
func (c *cluster) pool() {
	c.create(&heraldv1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Namespace: heraldNS, Name: "my-ippool"},
		Spec: heraldv1.IPAddressPoolSpec{Addresses: []heraldv1.AddressRange{"172.18.255.200-172.18.255.250"}}})
	c.create(&heraldv1.L2Advertisement{ObjectMeta: metav1.ObjectMeta{Namespace: heraldNS, Name: "my-l2-advertise"}})
}

// workerByMAC names the worker whose eth0 has mac.
func (c *cluster) workerByMAC(mac string) *netlab.Host {
	for _, h := range c.workers {
		if h.MAC().String() == mac {
			return h
		}
	}
	c.t.Fatalf("MAC %s belongs to no worker", mac)
	return nil
}

func (c *cluster) worker(name string) *netlab.Host {
	for _, h := range c.workers {
		if h.Name() == name {
			return h
		}
	}
	c.t.Fatalf("no worker %s", name)
	return nil
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}
