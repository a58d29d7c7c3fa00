package lab

import (
	"context"
	"fmt"
	"syscall"

	"herald.dev/herald/internal/lab/netlab"
)

// The faults a lab can suffer, as the end-to-end tests and the demo inflict them. Each
// one acts on the processes and links the state records, from any process.

// proc returns the recorded process name of host.
func (s *State) proc(host, name string) (netlab.Proc, error) {
	p, ok := s.Procs[host+"-"+name]
	if !ok {
		return netlab.Proc{}, fmt.Errorf("lab: no %s on %s", name, host)
	}
	return p, nil
}

// KillSpeaker kills the speaker of node and its group with SIGKILL: no goodbye to its
// peers, no withdrawal, as when a node's process dies.
func (s *State) KillSpeaker(node string) error {
	if _, err := s.Worker(node); err != nil {
		return err
	}
	p, err := s.proc(node, "speaker")
	if err != nil {
		return err
	}
	return p.Kill()
}

// StopSpeaker sends SIGTERM to the speaker of node, as a kubelet stopping its pod
// would, and waits until it has exited.
func (s *State) StopSpeaker(node string) error {
	if _, err := s.Worker(node); err != nil {
		return err
	}
	p, err := s.proc(node, "speaker")
	if err != nil {
		return err
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	if !p.WaitGone(stopTimeout) {
		return fmt.Errorf("lab: speaker of %s (pid %d) still runs %v after SIGTERM", node, p.Pid, stopTimeout)
	}
	return nil
}

// FreezeSpeaker stops the speaker of node with SIGSTOP, as a stalled process or a
// paused VM: it neither answers nor says anything, its sockets keep queueing what
// arrives, and it goes on from where it was when ThawSpeaker sends SIGCONT.
func (s *State) FreezeSpeaker(node string) error { return s.signalSpeaker(node, syscall.SIGSTOP) }

// ThawSpeaker lets a speaker frozen by FreezeSpeaker run again; a running one is
// unaffected.
func (s *State) ThawSpeaker(node string) error { return s.signalSpeaker(node, syscall.SIGCONT) }

func (s *State) signalSpeaker(node string, sig syscall.Signal) error {
	return s.signal(node, "speaker", sig)
}

// BeginNodeShutdown makes node's agent report a graceful node shutdown (Ready=False,
// "node is shutting down"), as a kubelet does when systemd says the node goes down;
// CancelNodeShutdown ends it. The node's processes keep running.
func (s *State) BeginNodeShutdown(node string) error { return s.signal(node, "agent", syscall.SIGUSR1) }

// CancelNodeShutdown undoes BeginNodeShutdown.
func (s *State) CancelNodeShutdown(node string) error {
	return s.signal(node, "agent", syscall.SIGUSR2)
}

// signal sends sig to the process of component (speaker, agent) on node.
func (s *State) signal(node, component string, sig syscall.Signal) error {
	if _, err := s.Worker(node); err != nil {
		return err
	}
	p, err := s.proc(node, component)
	if err != nil {
		return err
	}
	return p.Signal(sig)
}

// StartSpeaker starts node's speaker again, as Up started it, and waits until it is
// ready. A speaker that runs already is an error.
func (s *State) StartSpeaker(ctx context.Context, node string) error {
	return s.StartSpeakers(ctx, node)
}

// StartSpeakers starts the speakers of nodes at once, as the kubelets of nodes
// restarting them together would, and waits until each is ready.
func (s *State) StartSpeakers(ctx context.Context, nodes ...string) error {
	type started struct {
		h HostInfo
		p netlab.Proc
	}
	var all []started
	for _, node := range nodes {
		h, err := s.Worker(node)
		if err != nil {
			return err
		}
		if p, err := s.proc(node, "speaker"); err == nil {
			if p.Alive() {
				return fmt.Errorf("lab: the speaker of %s runs already (pid %d)", node, p.Pid)
			}
			// Killed a moment ago, its threads may still hold its ports.
			if !p.WaitGone(stopTimeout) {
				return fmt.Errorf("lab: the old speaker of %s (pid %d) is still exiting", node, p.Pid)
			}
		}
		np, err := netlab.Spawn(s.RunDir, h.Namespace, h.Name, "speaker", nil, speakerCmd(s, h))
		if err != nil {
			return err
		}
		s.Procs[np.Proc.Key()] = np.Proc
		all = append(all, started{h, np.Proc})
	}
	if err := s.Save(); err != nil {
		return err
	}
	for _, st := range all {
		if err := waitHealthy(ctx, st.h.Namespace, speakerProbe, st.p, readyTimeout); err != nil {
			return fmt.Errorf("lab: the speaker of %s: %w", st.h.Name, err)
		}
	}
	return nil
}

// StartHerald starts herald's controller and then every worker's speaker, as Up does,
// and waits until each is ready: on a lab built WithoutHerald, the moment herald
// replaces the load balancer that served the cluster until then.
func (s *State) StartHerald(ctx context.Context) error {
	h, err := s.Host(CPHost)
	if err != nil {
		return err
	}
	if p, err := s.proc(CPHost, "controller"); err == nil && p.Alive() {
		return fmt.Errorf("lab: herald's controller runs already (pid %d)", p.Pid)
	}
	if err := s.startAgain(ctx, h, "controller", controllerCmd(s), controllerProbe); err != nil {
		return err
	}
	for _, w := range s.Workers() {
		if err := s.StartSpeaker(ctx, w.Name); err != nil {
			return err
		}
	}
	return nil
}

// RestartController stops herald's controller with SIGTERM and starts it again.
func (s *State) RestartController(ctx context.Context) error {
	h, err := s.Host(CPHost)
	if err != nil {
		return err
	}
	if p, err := s.proc(CPHost, "controller"); err == nil {
		if err := p.Stop(stopTimeout); err != nil {
			return err
		}
	}
	return s.startAgain(ctx, h, "controller", controllerCmd(s), controllerProbe)
}

func (s *State) startAgain(ctx context.Context, h HostInfo, name string, cmd []string, probe string) error {
	np, err := netlab.Spawn(s.RunDir, h.Namespace, h.Name, name, nil, cmd)
	if err != nil {
		return err
	}
	p := np.Proc
	s.Procs[p.Key()] = p
	if err := s.Save(); err != nil {
		return err
	}
	return waitHealthy(ctx, h.Namespace, probe, p, readyTimeout)
}

// LinkDown pulls node's cable: eth0 loses carrier, the node keeps its addresses.
func (s *State) LinkDown(ctx context.Context, node string) error {
	h, err := s.Host(node)
	if err != nil {
		return err
	}
	return setLink(ctx, s, h, false)
}

// LinkUp plugs node's cable back in.
func (s *State) LinkUp(ctx context.Context, node string) error {
	h, err := s.Host(node)
	if err != nil {
		return err
	}
	return setLink(ctx, s, h, true)
}
