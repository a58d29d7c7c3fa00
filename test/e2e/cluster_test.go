package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	heraldv1 "herald.dev/herald/api/v1beta1"
	"herald.dev/herald/internal/lab/labtest"
	"herald.dev/herald/internal/lab/netlab"
)

const (
	heraldNS = "herald-system"
	waitFor  = 60 * time.Second
)

// cluster is a light cluster (labtest.Cluster) running herald's controller, on which
// the speaker and failover tests start and stop speakers.
type cluster struct {
	*labtest.Cluster
	t testing.TB
	// speakers by worker name, the last started.
	speakers map[string]*netlab.Process
}

// newCluster builds the cluster with three workers and the walkthrough's pool, and
// starts herald's controller and a speaker on every worker, joining memberlist every
// second, with speakerArgs added. It fails (never skips) when namespaces cannot be made.
func newCluster(t testing.TB, prefix string, speakerArgs ...string) *cluster {
	t.Helper()
	c := &cluster{Cluster: labtest.NewCluster(t, prefix, 3), t: t, speakers: map[string]*netlab.Process{}}
	c.Start(c.CP.Host, "controller", "controller", "--kubeconfig", c.ControllerKubeconfig,
		"--namespace", heraldNS, "--leader-elect=false", "--metrics-bind-address", "0", "--metrics-secure=false", "--health-probe-bind-address", "0")
	c.pool()
	for _, w := range c.Workers {
		c.startSpeaker(w, append([]string{"--ml-join-interval", "1s"}, speakerArgs...)...)
	}
	return c
}

// startSpeaker runs `herald speaker` in the worker's namespace and waits until it is
// ready.
func (c *cluster) startSpeaker(h *netlab.Host, extra ...string) {
	c.t.Helper()
	c.speakers[h.Name()] = c.StartSpeaker(h, extra...)
}

// metrics reads a speaker's /metrics, "" when it does not answer.
func (c *cluster) metrics(h *netlab.Host) string {
	hc := &http.Client{Transport: &http.Transport{DialContext: h.DialContext}, Timeout: 2 * time.Second}
	resp, err := hc.Get("http://" + labtest.SpeakerMetrics + "/metrics")
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

// pool creates the walkthrough's pool and an L2Advertisement of every pool.
func (c *cluster) pool() {
	c.t.Helper()
	ctx := c.t.Context()
	if err := c.API.Create(ctx, &heraldv1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Namespace: heraldNS, Name: "my-ippool"},
		Spec: heraldv1.IPAddressPoolSpec{Addresses: []heraldv1.AddressRange{"172.18.255.200-172.18.255.250"}}}); err != nil {
		c.t.Fatal(err)
	}
	if err := c.API.Create(ctx, &heraldv1.L2Advertisement{ObjectMeta: metav1.ObjectMeta{Namespace: heraldNS, Name: "my-l2-advertise"}}); err != nil {
		c.t.Fatal(err)
	}
}

// rebalance asks for svc's IPs (namespace default) to go where the hash places them,
// as `herald rebalance` does: with no fail-back, a node that comes back gets nothing
// back until then.
func (c *cluster) rebalance(svc string) {
	c.t.Helper()
	rebalanceService(c.t, c.API, keyIn("default", svc))
}
