package lab

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"herald.dev/herald/internal/lab/netlab"
	"herald.dev/herald/internal/netns"
)

// A node's death as a whole, unlike a speaker's (KillSpeaker): the node's agent, the
// kubelet stand-in, dies too, so its Lease goes unrenewed and kube-controller-manager's
// node lifecycle controller marks the Node Ready=Unknown and its pods not ready after
// node-monitor-grace-period (50 s), as in a cluster whose node lost power.

// KillNode kills node as a power cut would: its cable is pulled, so neither the node nor
// its pods answer or forward anything any more, and its speaker and agent are killed
// with SIGKILL, each with its group (the pods' servers run inside the agent and die with
// it). StartNode brings it back.
func (s *State) KillNode(ctx context.Context, node string) error {
	if _, err := s.Worker(node); err != nil {
		return err
	}
	errs := []error{s.LinkDown(ctx, node)}
	for _, name := range []string{"speaker", "agent"} {
		p, err := s.proc(node, name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if p.Alive() { // a speaker killed before stays dead
			errs = append(errs, p.Kill())
		}
	}
	return errors.Join(errs...)
}

// StartNode boots node again after KillNode: the cable back in, then its agent, which
// rebuilds its pods and renews the node's Lease, then its speaker. It returns once the
// agent has renewed the Lease and reported the Node Ready and the speaker is ready.
func (s *State) StartNode(ctx context.Context, node string) error {
	h, err := s.Worker(node)
	if err != nil {
		return err
	}
	for _, name := range []string{"speaker", "agent"} {
		if p, err := s.proc(node, name); err == nil {
			if p.Alive() {
				return fmt.Errorf("lab: the %s of %s runs already (pid %d): the node is not dead", name, node, p.Pid)
			}
			if !p.WaitGone(stopTimeout) {
				return fmt.Errorf("lab: the old %s of %s (pid %d) is still exiting", name, node, p.Pid)
			}
		}
	}
	if err := s.LinkUp(ctx, node); err != nil {
		return err
	}
	started := time.Now()
	wrapper, cmd := agentCmd(s, h)
	np, err := netlab.Spawn(s.RunDir, h.Namespace, h.Name, "agent", wrapper, cmd)
	if err != nil {
		return err
	}
	s.Procs[np.Key()] = np.Proc
	if err := s.Save(); err != nil {
		return err
	}
	if err := s.waitAgent(ctx, np.Proc, started); err != nil {
		return err
	}
	return s.StartSpeaker(ctx, node)
}

// waitAgent waits until the agent p, started at started, has renewed its node's Lease
// since and the Node is Ready.
func (s *State) waitAgent(ctx context.Context, p netlab.Proc, started time.Time) error {
	kube, err := s.kube()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	var last error
	for {
		lease, err := kube.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, p.Host, metav1.GetOptions{})
		switch {
		case err != nil:
			last = err
		case lease.Spec.RenewTime == nil || lease.Spec.RenewTime.Before(&metav1.MicroTime{Time: started}):
			last = fmt.Errorf("lease %s not renewed since the agent started", p.Host)
		default:
			n, err := kube.CoreV1().Nodes().Get(ctx, p.Host, metav1.GetOptions{})
			if err == nil && nodeReady(n) {
				return nil
			}
			last = fmt.Errorf("Node %s not Ready (%v)", p.Host, err)
		}
		if !p.Alive() {
			return fmt.Errorf("lab: agent of %s exited; %s ends:\n%s", p.Host, p.Log, netlab.LogTail(p.Log, 15))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("lab: agent of %s: %w (%v); %s ends:\n%s", p.Host, ctx.Err(), last, p.Log, netlab.LogTail(p.Log, 15))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// kube is a client of the lab's API server, as cluster admin, for a process other than
// the one that built the lab: it dials from the control plane's namespace, where the
// API server serves.
func (s *State) kube() (kubernetes.Interface, error) {
	cp, err := s.Host(CPHost)
	if err != nil {
		return nil, err
	}
	rc, err := clientcmd.BuildConfigFromFlags("", s.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("lab: kubeconfig: %w", err)
	}
	rc.Dial = netns.Dialer(cp.Namespace)
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("lab: client: %w", err)
	}
	return kube, nil
}
