package labtest

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"herald.dev/herald/internal/lab"
	"herald.dev/herald/internal/lab/netlab"
	"herald.dev/herald/internal/scheme"
	"herald.dev/herald/internal/testkit"
)

// The light clusters' addressing: kind's network, as in the full lab.
var (
	Subnet     = lab.Subnet
	cpAddr     = netip.MustParseAddr("172.18.0.2")
	clientAddr = netip.MustParseAddr("172.18.0.100")
)

// Cluster is a small kind-like cluster in network namespaces, lighter than the full lab
// (no pods, no agents: the tests create Nodes and EndpointSlices themselves): a control
// plane at 172.18.0.2 with real etcd, kube-apiserver and kube-controller-manager, worker
// hosts w1, w2, ... from 172.18.0.3 with a Node each, and a client at 172.18.0.100. The
// test is cluster admin; herald's components run as the test starts them (Start), under
// the manifest's ServiceAccounts, and the test fails if the API server refused them
// anything.
type Cluster struct {
	Net    *netlab.Lab
	CP     *netlab.ControlPlane
	API    client.Client        // cluster admin, with herald's types
	Kube   kubernetes.Interface // cluster admin
	Herald string               // the herald binary
	// Workers and Client are the hosts AddWorkers and AddClient made.
	Workers []*netlab.Host
	Client  *netlab.Host
	// ControllerKubeconfig and SpeakerKubeconfig hold tokens of the manifest's
	// ServiceAccounts (ServiceAccountKubeconfigs).
	ControllerKubeconfig, SpeakerKubeconfig string
	// SpeakerTokensBoundToPods makes StartSpeaker run each speaker with a token bound
	// to a Pod on its node (lab.PodBoundKubeconfig) instead of SpeakerKubeconfig, as the
	// manifest's admission policy requires once installed.
	SpeakerTokensBoundToPods bool

	tb   testing.TB
	logs []string // of the herald components started, checked for refusals at the end
}

// NewCluster is NewControlPlane, herald's manifest installed with kubeconfigs of its
// ServiceAccounts, the given number of workers, and the client.
func NewCluster(tb testing.TB, prefix string, workers int) *Cluster {
	tb.Helper()
	c := NewControlPlane(tb, prefix)
	if _, err := lab.InstallManifest(context.Background(), c.API, c.repoRoot()); err != nil {
		tb.Fatal(err)
	}
	c.ServiceAccountKubeconfigs()
	c.AddWorkers(workers)
	c.AddClient()
	return c
}

// NewControlPlane builds a lab with the control plane and the herald binary, and
// nothing of herald's installed.
func NewControlPlane(tb testing.TB, prefix string) *Cluster {
	tb.Helper()
	assets := Assets(tb)
	c := &Cluster{tb: tb, Net: NewNet(tb, prefix, Subnet)}
	// Runs before the lab closes: herald's components run under the manifest's
	// ServiceAccounts, so a refusal means its RBAC lacks something.
	tb.Cleanup(func() {
		for _, log := range c.logs {
			if lines := lab.Refusals(log); len(lines) > 0 {
				tb.Errorf("%s was refused by the API server (missing RBAC in %s?):\n%s", filepath.Base(log), lab.Manifest, strings.Join(lines, "\n"))
			}
		}
	})
	ctx := context.Background()
	var err error
	if c.Herald, err = c.Net.Build(ctx, "herald.dev/herald/cmd/herald"); err != nil {
		tb.Fatal(err)
	}
	cp := AddHost(tb, c.Net, lab.CPHost, cpAddr)
	if c.CP, err = netlab.StartControlPlane(ctx, cp, assets); err != nil {
		tb.Fatal(err)
	}
	if c.API, err = client.New(c.CP.Config, client.Options{Scheme: scheme.New()}); err != nil {
		tb.Fatal(err)
	}
	if c.Kube, err = kubernetes.NewForConfig(c.CP.Config); err != nil {
		tb.Fatal(err)
	}
	return c
}

func (c *Cluster) repoRoot() string {
	root, err := netlab.RepoRoot(context.Background())
	if err != nil {
		c.tb.Fatal(err)
	}
	return root
}

// ServiceAccountKubeconfigs writes the kubeconfigs herald's controller and speakers run
// with, holding tokens of the manifest's ServiceAccounts, which must exist.
func (c *Cluster) ServiceAccountKubeconfigs() {
	c.tb.Helper()
	c.ControllerKubeconfig = filepath.Join(c.Net.RunDir(), "controller.kubeconfig")
	c.SpeakerKubeconfig = filepath.Join(c.Net.RunDir(), "speaker.kubeconfig")
	for sa, path := range map[types.NamespacedName]string{lab.ControllerAccount: c.ControllerKubeconfig, lab.SpeakerAccount: c.SpeakerKubeconfig} {
		if err := lab.ServiceAccountKubeconfig(context.Background(), c.CP, sa, 24*time.Hour, path); err != nil {
			c.tb.Fatal(err)
		}
	}
}

// AddWorkers adds n worker hosts, w1 at 172.18.0.3 onwards, each with a Ready Node.
func (c *Cluster) AddWorkers(n int) {
	c.tb.Helper()
	for range n {
		i := len(c.Workers)
		h := AddHost(c.tb, c.Net, fmt.Sprintf("w%d", i+1), netip.AddrFrom4([4]byte{172, 18, 0, byte(3 + i)}))
		c.Workers = append(c.Workers, h)
		c.Node(h.Name(), h.Addr())
	}
}

// AddClient adds the client host, which runs nothing of the cluster's.
func (c *Cluster) AddClient() {
	c.tb.Helper()
	c.Client = AddHost(c.tb, c.Net, lab.ClientHost, clientAddr)
}

// Node creates a Ready Node with addr as InternalIP, the way a kubelet registers.
func (c *Cluster) Node(name string, addr netip.Addr) {
	c.tb.Helper()
	ctx := context.Background()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}}}
	if err := c.API.Create(ctx, n); err != nil {
		c.tb.Fatalf("creating Node %s: %v", name, err)
	}
	// kube-controller-manager annotates new Nodes meanwhile: retry on conflict.
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		if err := c.API.Get(ctx, client.ObjectKeyFromObject(n), n); err != nil {
			return err
		}
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: addr.String()}, {Type: corev1.NodeHostName, Address: name}}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now()}}
		return c.API.Status().Update(ctx, n)
	})
	if err != nil {
		c.tb.Fatalf("node %s status: %v", name, err)
	}
}

// Start runs a herald component (args after the herald binary) on host h as process
// name; its log is checked for refusals by the API server when the test ends.
func (c *Cluster) Start(h *netlab.Host, name string, args ...string) *netlab.Process {
	c.tb.Helper()
	p, err := h.Start(name, append([]string{c.Herald}, args...)...)
	if err != nil {
		c.tb.Fatal(err)
	}
	c.logs = append(c.logs, p.Log)
	return p
}

// SpeakerPorts are where StartSpeaker's speakers serve metrics and probes, inside
// their hosts.
const (
	SpeakerMetrics = "127.0.0.1:7474"
	SpeakerProbe   = "127.0.0.1:7475"
)

// StartSpeaker runs `herald speaker` on worker h under the speaker's ServiceAccount,
// with plain-HTTP metrics at SpeakerMetrics, and waits until it is ready (informers
// synced, memberlist joined, responders up). extra flags come last, so they may
// override these (the last of a repeated flag wins).
func (c *Cluster) StartSpeaker(h *netlab.Host, extra ...string) *netlab.Process {
	c.tb.Helper()
	args := append([]string{"speaker", "--kubeconfig", c.speakerKubeconfig(h), "--node-name", h.Name(),
		"--ml-bind-addr", h.Addr().String(), "--namespace", lab.HeraldNamespace,
		"--metrics-bind-address", SpeakerMetrics, "--metrics-secure=false", "--health-probe-bind-address", SpeakerProbe,
		"--state-dir", filepath.Join(c.Net.RunDir(), "state", h.Name())}, extra...)
	p := c.Start(h, "speaker", args...)
	WaitHTTP(c.tb, h, p, "http://"+SpeakerProbe+"/readyz")
	return p
}

// speakerKubeconfig is the kubeconfig the speaker on h runs with.
func (c *Cluster) speakerKubeconfig(h *netlab.Host) string {
	if !c.SpeakerTokensBoundToPods {
		return c.SpeakerKubeconfig
	}
	path := filepath.Join(c.Net.RunDir(), "speaker-"+h.Name()+".kubeconfig")
	if err := lab.PodBoundKubeconfig(context.Background(), c.CP, lab.SpeakerAccount, h.Name(), 24*time.Hour, path); err != nil {
		c.tb.Fatal(err)
	}
	return path
}

// LBService creates a LoadBalancer Service without selector, port http 80 → 8080, and
// an EndpointSlice with one ready endpoint on node, and returns the external IP the
// controller gives it. mutate, when not nil, edits the Service first.
func (c *Cluster) LBService(name, node string, mutate func(*corev1.Service)) netip.Addr {
	c.tb.Helper()
	svc := testkit.LBService("default", name, testkit.TargetPort(8080))
	if mutate != nil {
		mutate(svc)
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name + "-1",
			Labels: map[string]string{discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: "labtest.herald.dev"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.244.1.10"}, NodeName: ptr.To(node),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](8080)}},
	}
	for _, o := range []client.Object{svc, slice} {
		if err := c.API.Create(context.Background(), o); err != nil {
			c.tb.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
	return WaitIngress(c.tb, c.API, client.ObjectKeyFromObject(svc))
}

// WaitIngress waits until the Service has an external IP and returns its first.
func WaitIngress(tb testing.TB, c client.Client, key client.ObjectKey) netip.Addr {
	tb.Helper()
	var ip netip.Addr
	testkit.Eventually(tb, Wait, Interval, "an external IP for Service "+key.String(), func() error {
		var err error
		ip, err = Ingress(context.Background(), c, key)
		return err
	})
	return ip
}

// ErrNoIngress is Ingress's error for a Service without an external IP.
var ErrNoIngress = errors.New("status.loadBalancer.ingress is empty")

// Ingress returns the Service's first external IP, ErrNoIngress while it has none.
func Ingress(ctx context.Context, c client.Client, key client.ObjectKey) (netip.Addr, error) {
	var svc corev1.Service
	if err := c.Get(ctx, key, &svc); err != nil {
		return netip.Addr{}, err
	}
	if len(svc.Status.LoadBalancer.Ingress) == 0 {
		return netip.Addr{}, ErrNoIngress
	}
	return netip.ParseAddr(svc.Status.LoadBalancer.Ingress[0].IP)
}

// WorkerByMAC names the worker whose eth0 has mac.
func (c *Cluster) WorkerByMAC(mac string) *netlab.Host {
	c.tb.Helper()
	for _, h := range c.Workers {
		if h.MAC().String() == mac {
			return h
		}
	}
	c.tb.Fatalf("MAC %s belongs to no worker", mac)
	return nil
}

// Worker returns the worker called name.
func (c *Cluster) Worker(name string) *netlab.Host {
	c.tb.Helper()
	for _, h := range c.Workers {
		if h.Name() == name {
			return h
		}
	}
	c.tb.Fatalf("no worker %s", name)
	return nil
}

// HostOfMAC names the lab host whose eth0 has mac, for messages.
func (c *Cluster) HostOfMAC(mac string) string {
	for _, h := range append([]*netlab.Host{c.CP.Host, c.Client}, c.Workers...) {
		if h != nil && h.MAC().String() == mac {
			return h.Name()
		}
	}
	return "not a lab host"
}
