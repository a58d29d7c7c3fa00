package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"herald.dev/herald/internal/lab/netlab"
	"herald.dev/herald/internal/testkit"
)

// TestProxierHealthzInNamespace: the proxier answers /livez on kube-proxy's port in the
// node's namespace while it is on, and frees the port when kube-proxy shows up.
func TestProxierHealthzInNamespace(t *testing.T) {
	lab := newLab(t, "hpxh-")
	node := addNode(t, lab)
	h := startProxier(t, node, nil)
	h.p.Update([]*corev1.Service{webService()}, nil)
	testkit.Eventually(t, 10*time.Second, 50*time.Millisecond, "healthy /livez", func() error {
		code, body, err := getInNamespace(node, "172.31.0.3:10256", "/livez")
		if err != nil {
			return err
		}
		if code != http.StatusOK || !strings.Contains(body, `"healthy":true`) || !strings.Contains(body, `"IPv4":{`) {
			return fmt.Errorf("%d %s", code, body)
		}
		return nil
	})
	if code, body, err := getInNamespace(node, "127.0.0.1:10256", "/healthz"); err != nil || code != http.StatusOK ||
		!strings.Contains(body, `"nodeEligible":true`) {
		t.Errorf("/healthz: %d %s %v", code, body, err)
	}

	mustExec(t, node, "iptables", "-t", "mangle", "-N", kubeProxyCanary)
	testkit.Eventually(t, 5*time.Second, 50*time.Millisecond, "port freed for kube-proxy", func() error {
		if _, _, err := getInNamespace(node, "127.0.0.1:10256", "/livez"); err == nil {
			return fmt.Errorf("still answering; status %+v", h.p.Status())
		}
		return nil
	})
}

// getInNamespace sends one HTTP GET from inside the host's namespace.
func getInNamespace(h *netlab.Host, addr, path string) (code int, body string, err error) {
	err = h.Do(func() error {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return err
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.0\r\nHost: %s\r\n\r\n", path, addr); err != nil {
			return err
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		code, body = resp.StatusCode, string(b)
		return err
	})
	return code, body, err
}
