// Package testenv starts a real kube-apiserver and etcd (envtest) with herald's CRDs
// installed, for tests of everything the API server decides.
package testenv

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"herald.dev/herald/internal/scheme"
)

// ServiceCIDRs are the tests' ClusterIP ranges: both families, so dual-stack Services
// can be tested, and large enough for thousands of Services.
const ServiceCIDRs = "10.96.0.0/16,fd00:10:96::/108"

// Env is a running control plane.
type Env struct {
	Config *rest.Config
	Client client.Client
	env    *envtest.Environment
}

// RepoRoot is the repository's top directory.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Environment describes a control plane from the binaries in assets, with herald's
// CRDs installed and the given ClusterIP ranges. Without options kube-apiserver serves
// on loopback at a free port.
func Environment(assets, serviceCIDRs string, opts ...Option) *envtest.Environment {
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(RepoRoot(), "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
	}
	env.ControlPlane.GetAPIServer().Configure().Set("service-cluster-ip-range", serviceCIDRs)
	for _, o := range opts {
		o(env)
	}
	return env
}

// Option changes how Environment sets up the control plane.
type Option func(*envtest.Environment)

// ServeOn makes kube-apiserver listen on, advertise and put in its serving certificate
// addr instead of loopback, so that other network namespaces (the lab's nodes) can reach
// it; the kubeconfigs envtest writes then point there. The port must be set (FreePort
// finds one): envtest replaces the address with loopback when the port is missing.
func ServeOn(addr netip.AddrPort) Option {
	return func(env *envtest.Environment) {
		api := env.ControlPlane.GetAPIServer()
		api.SecureServing.Address = addr.Addr().String()
		api.SecureServing.Port = fmt.Sprint(addr.Port())
		// The `kubernetes` Service's endpoint is the advertised address; kube-apiserver
		// would derive it from the bind address, but saying so keeps it obvious.
		api.Configure().Set("advertise-address", addr.Addr().String())
	}
}

// StateIn keeps etcd's data and kube-apiserver's certificates in new, empty
// directories inside dir instead of under /tmp (an earlier run's are removed first:
// its etcd data would hold its objects). envtest removes its own directories when it
// is stopped, but a control plane killed on the way out (a lab torn down by SIGKILL)
// leaves them behind, 120 MB of etcd data each; inside dir they go with the run
// directory.
func StateIn(dir string) (Option, error) {
	etcd, certs := filepath.Join(dir, "etcd"), filepath.Join(dir, "apiserver-certs")
	for _, d := range []string{etcd, certs} {
		if err := os.RemoveAll(d); err != nil {
			return nil, fmt.Errorf("control plane state: %w", err)
		}
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("control plane state: %w", err)
		}
	}
	return func(env *envtest.Environment) {
		if env.ControlPlane.Etcd == nil {
			env.ControlPlane.Etcd = &envtest.Etcd{}
		}
		env.ControlPlane.Etcd.DataDir = etcd
		env.ControlPlane.GetAPIServer().CertDir = certs
	}, nil
}

// NoCRDs starts the control plane without herald's CRDs, for whoever installs them
// itself: the lab applies them, with the rest of config/manifests/herald.yaml, so that
// the manifest is the one source of what the cluster holds.
func NoCRDs() Option {
	return func(env *envtest.Environment) {
		env.CRDDirectoryPaths = nil
		env.ErrorIfCRDPathMissing = false
	}
}

// FreePort returns a TCP port nobody listens on at addr right now, for ServeOn.
func FreePort(addr netip.Addr) (uint16, error) {
	l, err := net.Listen("tcp", netip.AddrPortFrom(addr, 0).String())
	if err != nil {
		return 0, fmt.Errorf("finding a free port on %s: %w", addr, err)
	}
	defer l.Close()
	return uint16(l.Addr().(*net.TCPAddr).Port), nil
}

// Start brings up kube-apiserver and etcd from $KUBEBUILDER_ASSETS (built by
// hack/setup-test-binaries.sh) and stops them when the test ends. Without the
// binaries the test fails, saying how to build them.
func Start(tb testing.TB) *Env {
	tb.Helper()
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		tb.Fatal("KUBEBUILDER_ASSETS is not set: run `make test`, or export KUBEBUILDER_ASSETS=$(hack/setup-test-binaries.sh)")
	}
	for _, b := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(assets, b)); err != nil {
			tb.Fatalf("KUBEBUILDER_ASSETS=%s lacks %s: run hack/setup-test-binaries.sh", assets, b)
		}
	}
	env := Environment(assets, ServiceCIDRs)
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop() // Start may fail after launching the processes (e.g. a bad CRD)
		tb.Fatalf("starting kube-apiserver and etcd: %v", err)
	}
	tb.Cleanup(func() {
		if err := env.Stop(); err != nil {
			tb.Errorf("stopping envtest: %v", err)
		}
	})
	// Tests create objects fast; the default client rate limit would be what they measure.
	cfg.QPS, cfg.Burst = 1000, 2000
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		tb.Fatalf("client: %v", err)
	}
	return &Env{Config: cfg, Client: c, env: env}
}

// Kubeconfig writes a kubeconfig for a new user of the API server, in the given groups
// ("system:masters" for a cluster admin; none for a user allowed nothing), and returns
// its path, for tests of commands that take --kubeconfig.
func (e *Env) Kubeconfig(tb testing.TB, user string, groups ...string) string {
	tb.Helper()
	u, err := e.env.AddUser(envtest.User{Name: user, Groups: groups}, nil)
	if err != nil {
		tb.Fatalf("adding user %s: %v", user, err)
	}
	b, err := u.KubeConfig()
	if err != nil {
		tb.Fatalf("kubeconfig of %s: %v", user, err)
	}
	path := filepath.Join(tb.TempDir(), user+".kubeconfig")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

// CreateNamespace creates the namespace name, failing the test if it cannot.
func (e *Env) CreateNamespace(tb testing.TB, name string) {
	tb.Helper()
	if err := e.Client.Create(tb.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		tb.Fatalf("creating namespace %s: %v", name, err)
	}
}
