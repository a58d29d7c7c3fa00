package netlab_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"herald.dev/herald/internal/lab/labtest"
	"herald.dev/herald/internal/lab/netlab"
	"herald.dev/herald/internal/testkit"
)

// TestControlPlaneInNamespace runs etcd, kube-apiserver and kube-controller-manager in
// a namespace of the lab, serving on the host's bridge address, and uses them from the
// root namespace through the host and through another node.
func TestControlPlaneInNamespace(t *testing.T) {
	assets := labtest.Assets(t)
	l := newLab(t, "nl-cp-")
	cpHost := addHost(t, l, "cp", "172.18.0.2")
	w1 := addHost(t, l, "w1", "172.18.0.3")

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	cp, err := netlab.StartControlPlane(ctx, cpHost, assets)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("control plane ready in %s", time.Since(start).Round(time.Millisecond))

	kubeconfig, err := os.ReadFile(cp.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(kubeconfig), "server: https://172.18.0.2:6443") {
		t.Fatalf("kubeconfig does not point at the bridge address:\n%s", kubeconfig)
	}

	cs := clientset(t, cp.Config)
	nss, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !hasNamespace(nss.Items, "kube-system") {
		t.Fatalf("namespaces: %v", nss.Items)
	}

	// A node reaches the API over the bridge, as the lab's speakers will.
	viaW1, err := cp.RESTConfigVia(w1)
	if err != nil {
		t.Fatal(err)
	}
	// kube-apiserver writes the kubernetes Service's EndpointSlice from a loop of its
	// own, which may not have run yet when /readyz first answers.
	viaW1Client := clientset(t, viaW1)
	testkit.Eventually(t, time.Minute, 200*time.Millisecond, "the kubernetes Service's EndpointSlice through w1", func() error {
		eps, err := viaW1Client.DiscoveryV1().EndpointSlices("default").Get(ctx, "kubernetes", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(eps.Endpoints) != 1 || !slices.Equal(eps.Endpoints[0].Addresses, []string{"172.18.0.2"}) {
			return fmt.Errorf("endpoints %+v, want the advertised 172.18.0.2", eps.Endpoints)
		}
		return nil
	})

	// kube-controller-manager connected through the same kubeconfig: its
	// ServiceAccount controller makes the default ServiceAccount.
	testkit.Eventually(t, time.Minute, 200*time.Millisecond, "the default ServiceAccount from kube-controller-manager", func() error {
		_, err := cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err
	})

	// Close stops etcd and kube-apiserver too, though envtest gave them process
	// groups of their own.
	out, err := runIP("netns", "pids", cpHost.Namespace())
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	pids := strings.Fields(string(out))
	if len(pids) < 4 { // controlplane, etcd, kube-apiserver, kube-controller-manager
		t.Fatalf("processes in %s: %v", cpHost.Namespace(), pids)
	}
	start = time.Now()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("Close took %s", time.Since(start).Round(time.Millisecond))
	for _, pid := range pids {
		if st, err := os.ReadFile("/proc/" + pid + "/stat"); err == nil && !strings.Contains(string(st), ") Z") {
			t.Errorf("pid %s still runs after Close: %s", pid, st)
		}
	}
}

func clientset(t *testing.T, cfg *rest.Config) *kubernetes.Clientset {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func hasNamespace(items []corev1.Namespace, name string) bool {
	for _, i := range items {
		if i.Name == name {
			return true
		}
	}
	return false
}
