//go:build kind

package kind

// The environment of the suite (what hack/kind/test.sh hands over) and the helpers the
// tests share: kubectl, docker and the client container.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

const (
	heraldNS = "herald-system"
	// clientIP is the walkthrough's `mypc`, outside the cluster on the kind network.
	clientIP = "172.18.0.100"
	// network is the Docker network kind puts its nodes on.
	network = "kind"
	// waitLong bounds the waits for the cluster to converge (rollouts, Ready nodes).
	waitLong = 5 * time.Minute
)

// walkthrough are the Services of hack/demo/services.yaml and the IPs the walkthrough
// shows them getting from the pool 172.18.255.200-250 (config/samples).
var (
	walkthrough = []string{"svc1", "svc2", "svc3"}
	wantVIPs    = []string{"172.18.255.200", "172.18.255.201", "172.18.255.202"}
)

// env is what the suite runs with, from the environment hack/kind/test.sh sets.
type env struct {
	root     string // the repository
	cluster  string // the kind cluster's name
	kind     string // the kind CLI
	kubectl  string
	helm     string
	herald   string // bin/herald
	netshoot string // the client's image
	whoami   string // the webpods' image
	client   string // the client container's name
	cpIP     string // the control-plane node's address on the kind network
}

var e env

// TestMain checks that everything the suite needs is there and fails the run, naming
// what is missing, when it is not. It starts the client container and removes it at
// the end (HERALD_KIND_KEEP=1 keeps it, and whatever the tests installed).
func TestMain(m *testing.M) {
	if err := setup(); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: the kind e2e suite cannot run: %v\n", err)
		os.Exit(1)
	}
	code := m.Run()
	if os.Getenv("HERALD_KIND_KEEP") == "" {
		if out, err := exec.Command("docker", "rm", "-f", e.client).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "removing the client container %s: %v: %s\n", e.client, err, out)
		}
	}
	os.Exit(code)
}

func setup() error {
	wd, err := os.Getwd()
	if err != nil {
		return fmt.Errorf("working directory: %w", err)
	}
	e.root = filepath.Clean(filepath.Join(wd, "..", ".."))
	e.cluster = cmp(os.Getenv("CLUSTER"), "herald-kind")
	e.client = cmp(os.Getenv("CLIENT"), "herald-kind-client")
	var missing []string
	for _, v := range []struct {
		name string
		dst  *string
		file bool
	}{
		{"KIND", &e.kind, true}, {"KUBECTL", &e.kubectl, true}, {"HELM", &e.helm, true},
		{"HERALD", &e.herald, true}, {"NETSHOOT_IMAGE", &e.netshoot, false}, {"WHOAMI_IMAGE", &e.whoami, false},
	} {
		*v.dst = os.Getenv(v.name)
		switch {
		case *v.dst == "":
			missing = append(missing, "$"+v.name+" is not set")
		case v.file:
			if _, err := exec.LookPath(*v.dst); err != nil {
				missing = append(missing, fmt.Sprintf("$%s=%s is not an executable", v.name, *v.dst))
			}
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s (make test-kind sets them: hack/kind/test.sh)", strings.Join(missing, "; "))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if _, err := run(ctx, "docker", "info"); err != nil {
		return fmt.Errorf("docker does not answer (make kind-docker starts it): %w", err)
	}
	for _, img := range []string{"herald-controller:dev", "herald-speaker:dev", e.netshoot, e.whoami} {
		if _, err := run(ctx, "docker", "image", "inspect", img); err != nil {
			return fmt.Errorf("image %s is missing (hack/kind/herald-images.sh, hack/kind/tool-images.sh build them): %w", img, err)
		}
	}
	clusters, err := run(ctx, e.kind, "get", "clusters")
	if err != nil {
		return fmt.Errorf("kind get clusters: %w", err)
	}
	if !slices.Contains(strings.Fields(clusters), e.cluster) {
		return fmt.Errorf("no kind cluster %s (KUBE_PROXY_MODE=none hack/kind/up.sh creates it)", e.cluster)
	}
	if _, err := kubectl(ctx, "get", "nodes"); err != nil {
		return fmt.Errorf("the API server of %s does not answer: %w", e.cluster, err)
	}
	if out, err := kubectl(ctx, "-n", "kube-system", "get", "daemonset", "kube-proxy", "--ignore-not-found", "-o", "name"); err != nil {
		return err
	} else if out != "" {
		return fmt.Errorf("cluster %s runs kube-proxy: the suite needs one created with kubeProxyMode none (make kind-down, then make test-kind)", e.cluster)
	}
	if e.cpIP, err = nodeIP(ctx, e.cluster+"-control-plane"); err != nil {
		return err
	}
	// The images of this tree, in every node: pods that ran older ones are replaced
	// when herald is installed (a fresh install per run, see installKustomize).
	if err := loadImages(ctx, "herald-controller:dev", "herald-speaker:dev", e.whoami, e.netshoot); err != nil {
		return err
	}
	// The client, like the walkthrough's `mypc`: on the kind network, not in the cluster.
	if running, _ := run(ctx, "docker", "inspect", "-f", "{{.State.Running}}", e.client); running != "true" {
		_, _ = run(ctx, "docker", "rm", "-f", e.client)
		if _, err := run(ctx, "docker", "run", "-d", "--rm", "--name", e.client, "--network", network, "--ip", clientIP,
			"--cap-add", "NET_ADMIN", "--cap-add", "NET_RAW", e.netshoot, "sleep", "infinity"); err != nil {
			return fmt.Errorf("starting the client container %s: %w", e.client, err)
		}
	}
	return nil
}

// loadImages runs kind load docker-image for the images that some node lacks or has
// in another version (the same ID in Docker and in the nodes' containerd): loading all
// four into four nodes takes over a minute on a small machine.
func loadImages(ctx context.Context, images ...string) error {
	nodes, err := run(ctx, e.kind, "get", "nodes", "--name", e.cluster)
	if err != nil {
		return err
	}
	var stale []string
	for _, img := range images {
		id, err := run(ctx, "docker", "image", "inspect", "-f", "{{.Id}}", img)
		if err != nil {
			return err
		}
		for _, n := range strings.Fields(nodes) {
			if got, _ := run(ctx, "docker", "exec", n, "crictl", "inspecti", "-o", "go-template", "--template", "{{.status.id}}", img); got != id {
				stale = append(stale, img)
				break
			}
		}
	}
	if len(stale) == 0 {
		return nil
	}
	t0 := time.Now()
	if _, err := run(ctx, e.kind, append([]string{"load", "docker-image", "--name", e.cluster}, stale...)...); err != nil {
		return fmt.Errorf("kind load docker-image: %w", err)
	}
	fmt.Fprintf(os.Stderr, "kind: %s loaded into %s in %s\n", strings.Join(stale, ", "), e.cluster, time.Since(t0).Round(time.Second))
	return nil
}

func cmp(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// run runs a command and returns its standard output, trimmed; the error carries its
// standard error.
func run(ctx context.Context, name string, args ...string) (string, error) {
	return runIn(ctx, nil, name, args...)
}

func runIn(ctx context.Context, stdin []byte, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	if err := cmd.Run(); err != nil {
		return strings.TrimSpace(out.String()), fmt.Errorf("%s %s: %w: %s", filepath.Base(name), strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return strings.TrimSpace(out.String()), nil
}

func kubectl(ctx context.Context, args ...string) (string, error) {
	return run(ctx, e.kubectl, append([]string{"--context", "kind-" + e.cluster}, args...)...)
}

// k runs kubectl and fails the test on an error.
func k(t testing.TB, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitLong+time.Minute)
	defer cancel()
	out, err := kubectl(ctx, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// kApply applies a manifest given as text.
func kApply(t testing.TB, manifest string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if _, err := runIn(ctx, []byte(manifest), e.kubectl, append([]string{"--context", "kind-" + e.cluster, "apply", "-f", "-"}, args...)...); err != nil {
		t.Fatal(err)
	}
}

// docker runs docker and fails the test on an error.
func docker(t testing.TB, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	out, err := run(ctx, "docker", args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// inClient runs a shell script in the client container.
func inClient(t testing.TB, script string, args ...string) string {
	t.Helper()
	return docker(t, append([]string{"exec", e.client, "sh", "-c", script, "sh"}, args...)...)
}

func nodeIP(ctx context.Context, node string) (string, error) {
	ip, err := run(ctx, "docker", "inspect", "-f", fmt.Sprintf("{{(index .NetworkSettings.Networks %q).IPAddress}}", network), node)
	if err != nil || ip == "" {
		return "", fmt.Errorf("no address of %s on the docker network %s: %v", node, network, err)
	}
	return ip, nil
}

// nodeMACs maps the kind network MAC of every node container of the cluster (running
// or not) to the node's name.
func nodeMACs(t testing.TB) map[string]string {
	t.Helper()
	ids := strings.Fields(docker(t, "ps", "-aq", "--filter", "label=io.x-k8s.kind.cluster="+e.cluster))
	if len(ids) == 0 {
		t.Fatalf("no node containers of cluster %s", e.cluster)
	}
	out := docker(t, append([]string{"inspect", "-f", fmt.Sprintf("{{.Name}} {{(index .NetworkSettings.Networks %q).MacAddress}}", network)}, ids...)...)
	macs := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) == 2 {
			macs[strings.ToLower(f[1])] = strings.TrimPrefix(f[0], "/")
		}
	}
	return macs
}

// arpMACs asks for ip with count broadcast ARP requests 200 ms apart from the client
// and returns every MAC that answered, sorted, with how many replies each sent.
func arpMACs(t testing.TB, ip string, count int) map[string]int {
	t.Helper()
	// arping (Habets') -r prints the MAC of each reply; exit 1 means no reply.
	out, err := run(t.Context(), "docker", "exec", e.client, "arping", "-r", "-c", fmt.Sprint(count), "-W", "0.2", "-w", "1", "-i", "eth0", ip)
	var ee *exec.ExitError
	if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 1) {
		t.Fatalf("arping %s: %v", ip, err)
	}
	macs := map[string]int{}
	for _, m := range strings.Fields(out) {
		macs[strings.ToLower(m)]++
	}
	return macs
}

// arpOwner returns the node whose MAC alone answers ARP for ip, or fails the test
// saying who answered.
func arpOwner(t testing.TB, ip string) string {
	t.Helper()
	macs := arpMACs(t, ip, 5)
	names := nodeMACs(t)
	if len(macs) != 1 {
		t.Fatalf("ARP for %s: %d MACs answered, want exactly one: %s", ip, len(macs), describeMACs(macs, names))
	}
	for mac := range macs {
		if n, ok := names[mac]; ok {
			return n
		}
		t.Fatalf("ARP for %s: %s answered, which is no node container of %s", ip, mac, e.cluster)
	}
	return ""
}

func describeMACs(macs map[string]int, names map[string]string) string {
	var s []string
	for m, n := range macs {
		s = append(s, fmt.Sprintf("%s (%s, %d replies)", m, cmp(names[m], "not a node"), n))
	}
	slices.Sort(s)
	return cmp(strings.Join(s, ", "), "none")
}

// waitUntil polls cond every second until it returns true or timeout passes, then
// fails the test with cond's last message.
func waitUntil(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) time.Duration {
	t.Helper()
	start := time.Now()
	last := ""
	for {
		ok, msg := cond()
		if ok {
			return time.Since(start)
		}
		last = msg
		if time.Since(start) > timeout {
			t.Fatalf("%s: not after %s: %s", what, timeout, last)
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("%s: %v", what, t.Context().Err())
		case <-time.After(time.Second):
		}
	}
}

// serviceIP is the first LoadBalancer IP of a Service in namespace default, or "".
func serviceIP(t testing.TB, svc string) string {
	t.Helper()
	return k(t, "get", "service", svc, "-o", "jsonpath={.status.loadBalancer.ingress[0].ip}")
}

// vipStatus is what the speakers publish about one IP (VIPStatus .status).
type vipStatus struct {
	IP            string `json:"ip"`
	Node          string `json:"node"`
	MAC           string `json:"mac"`
	LeaderChanges int64  `json:"leaderChanges"`
	Reason        string `json:"reason"`
}

// vipStatuses returns the VIPStatus of every IP in namespace default, by IP.
func vipStatuses(t testing.TB) map[string]vipStatus {
	t.Helper()
	var list struct {
		Items []struct {
			Status vipStatus `json:"status"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(k(t, "get", "vips", "-o", "json")), &list); err != nil {
		t.Fatalf("kubectl get vips: %v", err)
	}
	out := map[string]vipStatus{}
	for _, i := range list.Items {
		out[i.Status.IP] = i.Status
	}
	return out
}

// curls sends n requests to http://ip/ from the client, one at a time, and counts the
// answers by the pod that gave them ("" counts the failures).
func curls(t testing.TB, ip string, n int) map[string]int {
	t.Helper()
	out := inClient(t, `for i in $(seq "$2"); do h=$(curl -s --connect-timeout 1 --max-time 3 "http://$1/" | sed -n 's/^Hostname: //p'); echo "${h:--}"; done`, ip, fmt.Sprint(n))
	got := map[string]int{}
	for _, l := range strings.Split(out, "\n") {
		if l == "-" {
			l = ""
		}
		got[l]++
	}
	return got
}
