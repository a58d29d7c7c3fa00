//go:build linux

package oracle

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	sysctltest "k8s.io/component-helpers/node/util/sysctl/testing"
	"k8s.io/klog/v2"
	kpiptables "k8s.io/kubernetes/pkg/proxy/iptables"
)

// Sysctls kube-proxy's iptables proxier reads or writes.
const (
	sysctlRouteLocalnet         = "net/ipv4/conf/all/route_localnet"
	sysctlConntrackTCPBeLiberal = "net/netfilter/nf_conntrack_tcp_be_liberal"
)

// monitorTimeout bounds the wait for NewProxier's Monitor goroutine to start.
const monitorTimeout = 10 * time.Second

// Oracle runs kube-proxy's iptables proxier for one IP family against fake
// iptables, conntrack, nfacct, sysctls and interfaces, and reports what each
// sync would have applied. Feed it objects with the On* methods, then call
// Sync. An Oracle is not safe for concurrent use.
type Oracle struct {
	proxier *kpiptables.Proxier
	ipt     *recordingIPTables
	// started is set once the first (initial, full) sync ran.
	started bool
	// forceFull makes the next Sync a forced full one.
	forceFull bool
}

// New builds kube-proxy's iptables proxier with kube-proxy's own NewProxier.
// NewProxier probes nfacct support over a netlink socket (one read-only
// request, the socket is closed again); nothing else touches the host.
func New(opts Options) (*Oracle, error) {
	params, err := opts.resolve()
	if err != nil {
		return nil, fmt.Errorf("kube-proxy oracle options: %w", err)
	}
	ipt := newRecordingIPTables(opts.IPv6, !opts.NoRandomFully)
	sysctl := sysctltest.NewFake()
	sysctl.Settings[sysctlRouteLocalnet] = 0
	sysctl.Settings[sysctlConntrackTCPBeLiberal] = 0
	if opts.ConntrackTCPBeLiberal {
		sysctl.Settings[sysctlConntrackTCPBeLiberal] = 1
	}
	ctx := klog.NewContext(context.Background(), opts.Logger)
	proxier, err := kpiptables.NewProxier(ctx, params.family, ipt, sysctl,
		params.syncPeriod, DefaultMinSyncPeriod, opts.MasqueradeAll, params.localhostNodePorts,
		params.masqueradeBit, params.localDetector, opts.NodeName, params.primaryNodeIP,
		nil, nil, params.nodePortAddresses, false)
	if err != nil {
		return nil, fmt.Errorf("kube-proxy NewProxier: %w", err)
	}
	if err := useFakeHost(proxier, opts); err != nil {
		return nil, fmt.Errorf("replace kube-proxy's host handles with fakes: %w", err)
	}
	select {
	case <-ipt.monitorReady:
	case <-time.After(monitorTimeout):
		return nil, errors.New("kube-proxy's proxier never registered its iptables monitor")
	}
	return &Oracle{proxier: proxier, ipt: ipt}, nil
}

// OnServiceAdd records a new Service, as kube-proxy's informer would.
func (o *Oracle) OnServiceAdd(svc *v1.Service) { o.proxier.OnServiceAdd(svc) }

// OnServiceUpdate records a changed Service.
func (o *Oracle) OnServiceUpdate(old, svc *v1.Service) { o.proxier.OnServiceUpdate(old, svc) }

// OnServiceDelete records a deleted Service.
func (o *Oracle) OnServiceDelete(svc *v1.Service) { o.proxier.OnServiceDelete(svc) }

// OnEndpointSliceAdd records a new EndpointSlice. Slices are tied to their
// Service by the kubernetes.io/service-name label.
func (o *Oracle) OnEndpointSliceAdd(slice *discoveryv1.EndpointSlice) {
	o.proxier.OnEndpointSliceAdd(slice)
}

// OnEndpointSliceUpdate records a changed EndpointSlice.
func (o *Oracle) OnEndpointSliceUpdate(old, slice *discoveryv1.EndpointSlice) {
	o.proxier.OnEndpointSliceUpdate(old, slice)
}

// OnEndpointSliceDelete records a deleted EndpointSlice.
func (o *Oracle) OnEndpointSliceDelete(slice *discoveryv1.EndpointSlice) {
	o.proxier.OnEndpointSliceDelete(slice)
}

// OnTopologyChange records this node's topology labels (topology.kubernetes.io/zone
// and friends, used for topology-aware routing); kube-proxy then does a full sync.
func (o *Oracle) OnTopologyChange(labels map[string]string) {
	o.proxier.OnTopologyChange(labels)
}

// ForceFullSync makes the next Sync a full one, as when kube-proxy's canary
// chain disappears (a firewall reload flushed iptables).
func (o *Oracle) ForceFullSync() { o.forceFull = true }

// Sync runs one kube-proxy sync synchronously and returns what it applied.
// The first Sync is kube-proxy's initial full sync (informers synced); later
// ones are partial unless ForceFullSync or OnTopologyChange was called, or the
// previous sync failed. A sync whose iptables-restore the fake rejected
// returns its Result and an error.
func (o *Oracle) Sync() (Result, error) {
	o.ipt.takeCalls()
	switch {
	case !o.started:
		o.proxier.OnServiceSynced()
		o.proxier.OnEndpointSlicesSynced()
		o.started = true
	case o.forceFull:
		o.ipt.reload()
	default:
		// Once initialized, OnServiceSynced just runs syncProxyRules again.
		o.proxier.OnServiceSynced()
	}
	o.forceFull = false
	return resultOf(o.ipt.takeCalls())
}

// resultOf turns the calls one sync made into its Result.
func resultOf(restores []restoreCall, ensuredRules []string) (Result, error) {
	if len(restores) != 1 {
		return Result{}, fmt.Errorf("kube-proxy sync made %d iptables-restore calls, want 1 (set Options.Logger to see why)", len(restores))
	}
	restore := restores[0]
	result := Result{Full: len(ensuredRules) > 0, Payload: restore.payload, EnsuredRules: ensuredRules}
	tables, err := SplitTables(restore.payload)
	if err != nil {
		return result, fmt.Errorf("kube-proxy's iptables-restore payload: %w", err)
	}
	result.Filter, result.NAT = tables["filter"], tables["nat"]
	if restore.err != nil {
		return result, fmt.Errorf("kube-proxy's iptables-restore payload rejected by the fake iptables: %w", restore.err)
	}
	return result, nil
}

// Dump returns the simulated tables after all syncs so far, in iptables-save
// format: nat, filter and mangle, each with every chain (built-in ones
// included) and its rules. It is the end state independent of how partial
// syncs split the work, and includes the ensured jump rules.
func (o *Oracle) Dump() (string, error) {
	var buf bytes.Buffer
	if err := o.ipt.SaveInto("", &buf); err != nil {
		return "", fmt.Errorf("save the fake iptables tables: %w", err)
	}
	return buf.String(), nil
}
