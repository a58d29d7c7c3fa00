package lab

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"herald.dev/herald/internal/lab/netlab"
	"herald.dev/herald/internal/memberkey"
	"herald.dev/herald/internal/netns"
)

// The command lines of the lab's components. They are derived from the state alone, so
// that a fault command can start a speaker again exactly as Up did. herald's components
// authenticate as the manifest's ServiceAccounts; the agents, standing in for kubelets,
// as the cluster admin. Their metrics are plain HTTP (--metrics-secure=false): the lab
// and its tests scrape them without a token.

func controllerCmd(s *State) []string {
	return []string{s.Herald, "controller", "--kubeconfig", s.ControllerKubeconfig, "--namespace", HeraldNamespace,
		"--leader-elect=false", "--metrics-bind-address", controllerMetrics, "--metrics-secure=false", "--health-probe-bind-address", controllerProbe}
}

// speakerStateDir holds, per node, what a restarting speaker leaves its successor (the
// node's /run/herald). It lives as long as the lab: a new lab starts without it.
const speakerStateDir = "speaker-state"

// speakerCmd runs the speaker with its proxier, as the manifest's DaemonSet does, so
// that the client reaches the pods through the VIPs.
func speakerCmd(s *State, h HostInfo) []string {
	cmd := []string{s.Herald, "speaker", "--kubeconfig", s.SpeakerKubeconfig, "--node-name", h.Name,
		"--ml-bind-addr", h.Addr.String(), "--namespace", HeraldNamespace,
		"--metrics-bind-address", speakerMetrics, "--metrics-secure=false", "--health-probe-bind-address", speakerProbe,
		// The node's /run/herald: what a restarting speaker leaves its successor.
		"--state-dir", filepath.Join(s.RunDir, speakerStateDir, h.Name),
		// The Secret volume the node's agent keeps, as the DaemonSet mounts it.
		"--ml-secret-key-path", filepath.Join(memberlistDir(s.RunDir, h.Name), memberkey.DataKey)}
	return append(append(cmd, proxierArgs(s)...), s.SpeakerArgs...)
}

// proxierArgs turn on the speaker's proxier (iptables unless the lab says nftables)
// for the lab's pod network, both families of it in a dual-stack lab.
func proxierArgs(s *State) []string {
	cidrs := ClusterCIDR.String()
	if s.DualStack {
		cidrs += "," + ClusterCIDR6.String()
	}
	mode := s.Proxy
	if mode == "" {
		mode = "iptables"
	}
	return []string{"--cluster-cidr=" + cidrs, "--proxy=" + mode}
}

// agentCmd runs `hack/lab agent` for worker h. It creates pod namespaces with `ip netns
// add`, whose bind mount must land in the mount namespace everyone else sees: `ip netns
// exec`, which starts every lab process, gives its command a private mount namespace
// (to mount the node's /sys) from which such mounts never propagate back. So the agent
// command is wrapped in nsenter, which moves it back to the mount namespace of the
// process running Up while it stays in the worker's network namespace. Up waits for the
// agents to register, so nsenter has long entered that namespace when Up returns.
func agentCmd(s *State, h HostInfo) (wrapper, cmd []string) {
	cmd = []string{s.LabBin, "agent", "--node", h.Name, "--node-ip", h.Addr.String(),
		"--pod-cidr", h.PodCIDR.String(), "--kubeconfig", s.Kubeconfig,
		"--netns-prefix", s.Prefix, "--dir", agentDir(s.RunDir, h.Name),
		"--heartbeat", agentHeartbeat.String(),
		"--secret-volume", HeraldNamespace + "/" + memberkey.SecretName + ":" + memberlistDir(s.RunDir, h.Name)}
	if h.Addr6.IsValid() {
		cmd = append(cmd, "--node-ip6", h.Addr6.String(), "--pod-cidr6", h.PodCIDR6.String())
	}
	wrapper = []string{"nsenter", "--mount=/proc/" + strconv.Itoa(os.Getpid()) + "/ns/mnt", "--"}
	return wrapper, cmd
}

// waitHealthy polls http://addr/readyz inside the namespace ns until it answers 200,
// failing early when the process exits.
func waitHealthy(ctx context.Context, ns, addr string, p netlab.Proc, limit time.Duration) error {
	return WaitHTTP(ctx, ns, "http://"+addr+"/readyz", p, limit)
}

// WaitHTTP waits until url, asked from namespace ns, answers 200 OK while p runs, up to
// limit. Its error says why not: p's exit or refusals by the API server, with the end
// of p's log.
func WaitHTTP(ctx context.Context, ns, url string, p netlab.Proc, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	hc := &http.Client{Transport: &http.Transport{DialContext: netns.Dialer(ns)}, Timeout: time.Second}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if resp, err := hc.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if !p.Alive() {
			return fmt.Errorf("lab: %s exited before it was ready; %s ends:\n%s", p.Key(), p.Log, netlab.LogTail(p.Log, 15))
		}
		select {
		case <-ctx.Done():
			if refused := Refusals(p.Log); len(refused) > 0 {
				return fmt.Errorf("lab: %s not ready after %v: the API server refused it %d times (missing RBAC in %s?), first:\n%s",
					p.Key(), limit, len(refused), Manifest, refused[0])
			}
			return fmt.Errorf("lab: %s not ready after %v; %s ends:\n%s", p.Key(), limit, p.Log, netlab.LogTail(p.Log, 15))
		case <-time.After(200 * time.Millisecond):
		}
	}
}
