package netlab

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// stopTimeout is how long Close lets each process shut down after SIGTERM: the control
// plane takes a few seconds to stop etcd and kube-apiserver in order.
const stopTimeout = 15 * time.Second

// Lab is one Ethernet segment (a bridge in a namespace of its own) and the hosts on it.
type Lab struct {
	prefix string
	runDir string

	mu         sync.Mutex
	subnets    []netip.Prefix // the first is the one New was given
	namespaces []string       // created, in order; Close deletes them in reverse
	hosts      map[string]*Host
	procs      []*Process
	built      map[string]string // binaries built into runDir, by package
}

// New creates the bridge namespace <prefix>br with br0 up and the subnet's first address
// on it as the gateway. runDir holds logs and pid files; it is created if missing. On
// error, whatever New created is removed again.
func New(prefix string, subnet netip.Prefix, runDir string) (*Lab, error) {
	if err := checkPrefix(prefix); err != nil {
		return nil, err
	}
	if err := Check(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(runDir, pidDir), 0o755); err != nil {
		return nil, fmt.Errorf("netlab run directory: %w", err)
	}
	l := &Lab{prefix: prefix, runDir: runDir, hosts: map[string]*Host{}, built: map[string]string{}}
	if err := l.buildBridge(); err != nil {
		return nil, errors.Join(err, l.Close())
	}
	if err := l.AddSubnet(subnet); err != nil {
		return nil, errors.Join(err, l.Close())
	}
	return l, nil
}

// Prefix is the prefix of every namespace the lab creates.
func (l *Lab) Prefix() string { return l.prefix }

// RunDir holds the logs of the lab's processes and their pid files.
func (l *Lab) RunDir() string { return l.runDir }

// BridgeNamespace is the namespace holding br0 and the hosts' peer ends.
func (l *Lab) BridgeNamespace() string { return l.prefix + bridgeSuffix }

// Host returns the host called name, or nil.
func (l *Lab) Host(name string) *Host {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.hosts[name]
}

// Gateway is the address br0 has in the subnet holding addr (its first address), which
// hosts use as their default route. ok is false when no subnet of the lab holds addr.
func (l *Lab) Gateway(addr netip.Addr) (gw netip.Addr, ok bool) {
	p, ok := l.subnetOf(addr)
	return p.Addr().Next(), ok
}

// subnetOf returns the lab subnet holding addr.
func (l *Lab) subnetOf(addr netip.Addr) (netip.Prefix, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range l.subnets {
		if p.Contains(addr) {
			return p, true
		}
	}
	return netip.Prefix{}, false
}

func (l *Lab) addNamespace(ns string) error {
	if err := AddNamespace(ns); err != nil {
		// Not recorded, so Close leaves it: it may be another run's.
		if strings.Contains(err.Error(), "File exists") {
			return fmt.Errorf("network namespace %s exists already: a lab with prefix %q is running, or was left behind and netlab.Cleanup removes it", ns, l.prefix)
		}
		return err
	}
	l.mu.Lock()
	l.namespaces = append(l.namespaces, ns)
	l.mu.Unlock()
	return nil
}

// Close stops every process started through the lab and deletes every namespace it
// created, and so every link (a veth pair goes with either end's namespace). It keeps
// going past errors and returns them all; calling it again is harmless.
func (l *Lab) Close() error {
	l.mu.Lock()
	procs, namespaces := l.procs, l.namespaces
	l.procs, l.namespaces, l.hosts = nil, nil, map[string]*Host{}
	l.mu.Unlock()

	var errs []error
	for _, p := range slices.Backward(procs) {
		if err := p.Stop(stopTimeout); err != nil {
			errs = append(errs, err)
		}
		p.forget()
	}
	for _, ns := range slices.Backward(namespaces) {
		if err := DeleteNamespace(ns); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
