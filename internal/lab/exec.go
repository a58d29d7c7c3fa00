package lab

import (
	"context"
	"fmt"
	"io"
	"os/exec"

	"herald.dev/herald/internal/lab/agent"
	"herald.dev/herald/internal/lab/netlab"
)

// Kubectl runs the lab's kubectl inside the control plane's namespace, the only place
// (with the other lab namespaces) that reaches the API server, and returns its output.
func (s *State) Kubectl(ctx context.Context, args ...string) ([]byte, error) {
	cp, err := s.Host(CPHost)
	if err != nil {
		return nil, err
	}
	return netlab.Run(ctx, "ip", append([]string{"netns", "exec", cp.Namespace, s.KubectlBin, "--kubeconfig", s.Kubeconfig}, args...)...)
}

// KubectlCommand is Kubectl as a command to run with the caller's terminal.
func (s *State) KubectlCommand(ctx context.Context, args ...string) (*exec.Cmd, error) {
	cp, err := s.Host(CPHost)
	if err != nil {
		return nil, err
	}
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", cp.Namespace, s.KubectlBin, "--kubeconfig", s.Kubeconfig}, args...)...), nil
}

// ExecCommand runs args inside a lab namespace named by a host (cp, worker, client) or
// by a pod ("webpod1", or "namespace/name"), with the caller's terminal. The command
// runs with the environment's KUBECONFIG pointing at the lab, so kubectl finds it.
func (s *State) ExecCommand(ctx context.Context, target string, stdin io.Reader, stdout, stderr io.Writer, args ...string) (*exec.Cmd, error) {
	if len(args) == 0 {
		return nil, fmt.Errorf("lab exec %s: no command", target)
	}
	ns, err := s.namespaceOf(target)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns}, args...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	cmd.Env = append(cmd.Environ(), "KUBECONFIG="+s.Kubeconfig)
	return cmd, nil
}

// Exec runs args in the namespace of target and returns their output.
func (s *State) Exec(ctx context.Context, target string, args ...string) ([]byte, error) {
	ns, err := s.namespaceOf(target)
	if err != nil {
		return nil, err
	}
	return netlab.Run(ctx, "ip", append([]string{"netns", "exec", ns}, args...)...)
}

func (s *State) namespaceOf(target string) (string, error) {
	if h, err := s.Host(target); err == nil {
		return h.Namespace, nil
	}
	pods, err := s.Pods()
	if err != nil {
		return "", err
	}
	for _, p := range pods {
		if p.Name == target && p.Namespace == "default" || p.Namespace+"/"+p.Name == target {
			return p.NetNS, nil
		}
	}
	return "", fmt.Errorf("lab: %q is neither a host (%s) nor a pod the agents run", target, s.hostNames())
}

// Pods are the pods the agents run, from their records.
func (s *State) Pods() ([]agent.PodRecord, error) {
	var out []agent.PodRecord
	for _, w := range s.Workers() {
		recs, err := agent.ReadRecords(agentDir(s.RunDir, w.Name))
		if err != nil {
			return nil, err
		}
		out = append(out, recs...)
	}
	return out, nil
}
