//go:build linux

package nftoracle

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"herald.dev/herald/hack/kporacle/internal/kphost"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/proxy/conntrack"
	"k8s.io/kubernetes/pkg/proxy/healthcheck"
	kpnftables "k8s.io/kubernetes/pkg/proxy/nftables"
	proxyutil "k8s.io/kubernetes/pkg/proxy/util"
	"sigs.k8s.io/knftables"
)

// TableName is the nftables table kube-proxy owns (in the ip or ip6 family).
const TableName = "kube-proxy"

// Oracle runs kube-proxy's nftables proxier for one IP family and reports the
// transactions each sync ran. Feed it objects with the On* methods, then call
// Sync. An Oracle is not safe for concurrent use; with a real NFT, all calls
// that may sync (Sync, and New) must run where nft should act, e.g. inside
// InNetNS.
type Oracle struct {
	proxier *kpnftables.Proxier
	nft     *recordingNFT
	// started is set once the first (initial, full) sync ran.
	started bool
	// forceFull makes the next Sync a full one.
	forceFull bool
}

// Result is what one Sync ran.
type Result struct {
	// Full is true when kube-proxy did a full sync: it (re)created the table,
	// base chains, sets and maps and rewrote every service's chains. A partial
	// sync rewrites only the chains and map elements of services whose
	// Service or endpoints changed.
	Full bool
	// Transaction is the nft -f input of the transactions the sync ran, in
	// order: usually one; a second, earlier one deletes service chains that
	// went stale more than a second before (kube-proxy flushes stale chains
	// and deletes them on a later sync). Services appear in Go map order, so
	// the order of their operations varies from run to run.
	Transaction string
}

// New builds kube-proxy's nftables proxier with kube-proxy's own NewProxier,
// then swaps its host handles for fakes and its nftables for Options.NFT or a
// Fake. NewProxier itself builds a real knftables interface, which runs
// "nft --check" (a dry run, nothing changes) and so needs the nft binary, and
// checks that the kernel is 5.13 or later.
func New(opts Options) (*Oracle, error) {
	params, err := opts.resolve()
	if err != nil {
		return nil, fmt.Errorf("kube-proxy nftables oracle options: %w", err)
	}
	nft := opts.NFT
	if nft == nil {
		nft = knftables.NewFake(params.nftFamily, TableName)
	}
	ctx := klog.NewContext(context.Background(), opts.Logger)
	proxier, err := kpnftables.NewProxier(ctx, params.family, kphost.DefaultSyncPeriod, kphost.DefaultMinSyncPeriod,
		opts.MasqueradeAll, params.masqueradeBit, params.localDetector, opts.NodeName, params.nodeIP,
		nil, nil, params.nodePortAddresses, false)
	if err != nil {
		return nil, fmt.Errorf("kube-proxy nftables NewProxier: %w", err)
	}
	recorder := &recordingNFT{Interface: nft}
	if err := useFakeHost(proxier, recorder, params); err != nil {
		return nil, fmt.Errorf("replace kube-proxy's host handles: %w", err)
	}
	if len(opts.ServiceCIDRs) > 0 {
		proxier.OnServiceCIDRsChanged(opts.ServiceCIDRs)
	}
	return &Oracle{proxier: proxier, nft: recorder}, nil
}

// useFakeHost replaces what NewProxier built for itself and has no parameter
// for: nftables (with the recorder), conntrack (kube-proxy's in-memory fake:
// UDP cleanup finds nothing to delete), the health-check server (kube-proxy's
// fake: no port is opened for healthCheckNodePorts) and the interface list.
// kphost.Replace checks each field's name and type.
func useFakeHost(p *kpnftables.Proxier, nft *recordingNFT, params proxierParams) error {
	if _, err := kphost.Replace[knftables.Interface](p, "nftables", nft); err != nil {
		return err
	}
	if _, err := kphost.Replace[conntrack.Interface](p, "conntrack", conntrack.NewFake()); err != nil {
		return err
	}
	if _, err := kphost.Replace(p, "serviceHealthServer", healthcheck.NewFakeServiceHealthServer()); err != nil {
		return err
	}
	network, err := kphost.FakeNetwork(params.interfaceAddrs)
	if err != nil {
		return err
	}
	if _, err := kphost.Replace[proxyutil.NetworkInterfacer](p, "networkInterfacer", network); err != nil {
		return err
	}
	// Checked now so that Sync's reads cannot fail later.
	if _, err := kphost.Field[bool](p, "needFullSync"); err != nil {
		return err
	}
	if _, err := kphost.Field[time.Time](p, "lastFullSync"); err != nil {
		return err
	}
	return nil
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

// OnTopologyChange records this node's topology labels (used for
// topology-aware routing); kube-proxy's next sync is then a full one.
func (o *Oracle) OnTopologyChange(labels map[string]string) {
	o.proxier.OnTopologyChange(labels)
}

// OnServiceCIDRsChanged replaces the ServiceCIDRs (all families; kube-proxy
// keeps those of its own). It takes effect on the next full sync.
func (o *Oracle) OnServiceCIDRsChanged(cidrs []string) { o.proxier.OnServiceCIDRsChanged(cidrs) }

// ForceFullSync makes the next Sync a full one, as kube-proxy does after a
// failed sync. (The nftables proxier has no canary chain to watch.)
func (o *Oracle) ForceFullSync() { o.forceFull = true }

// Sync runs one kube-proxy sync synchronously and returns the transactions it
// ran. The first Sync is kube-proxy's initial full sync (informers synced);
// later ones are partial unless ForceFullSync or OnTopologyChange was called,
// the previous sync failed, or an hour passed since the last full sync. A sync
// whose transaction nftables rejected returns its Result and an error.
func (o *Oracle) Sync() (Result, error) {
	o.nft.take()
	if o.forceFull {
		o.setNeedFullSync()
		o.forceFull = false
	}
	full := o.nextSyncIsFull()
	if !o.started {
		// The first call only marks Services synced; the second one, with
		// both informers synced, runs the initial sync.
		o.proxier.OnServiceSynced()
		o.proxier.OnEndpointSlicesSynced()
		o.started = true
	} else {
		// Once initialized, OnServiceSynced just runs syncProxyRules again.
		o.proxier.OnServiceSynced()
	}
	runs := o.nft.take()
	result := Result{Full: full, Transaction: joinRuns(runs)}
	if len(runs) == 0 {
		return result, errors.New("kube-proxy's sync ran no nftables transaction (set Options.Logger to see why)")
	}
	// The last transaction is the sync itself; an earlier one deletes stale
	// chains, and kube-proxy only logs its failure.
	if err := runs[len(runs)-1].err; err != nil {
		return result, fmt.Errorf("kube-proxy's nftables transaction failed: %w", err)
	}
	return result, nil
}

// nextSyncIsFull repeats syncProxyRules' own test.
func (o *Oracle) nextSyncIsFull() bool {
	need, _ := kphost.Get[bool](o.proxier, "needFullSync")
	last, _ := kphost.Get[time.Time](o.proxier, "lastFullSync")
	return need || time.Since(last) > proxyutil.FullSyncPeriod
}

// setNeedFullSync sets the flag kube-proxy sets after a failed sync.
func (o *Oracle) setNeedFullSync() {
	field, _ := kphost.Field[bool](o.proxier, "needFullSync")
	field.SetBool(true)
}

// Dump returns the Fake's ruleset after all syncs so far, as "nft -f" input:
// knftables' Dump (the table, then chains, sets and maps sorted by name, then
// each chain's rules in order, then each set's and map's elements) with the
// elements of each set and map sorted. knftables keeps elements in the order
// they were added, which is kube-proxy's Go map order and means nothing to
// nftables; sorting makes Dump deterministic. It fails when Options.NFT was
// not a *knftables.Fake; for a real nftables, list the table with nft.
func (o *Oracle) Dump() (string, error) {
	fake, ok := o.nft.Interface.(*knftables.Fake)
	if !ok {
		return "", fmt.Errorf("Dump needs a *knftables.Fake, the oracle runs %T", o.nft.Interface)
	}
	return SortElements(fake.Dump()), nil
}

// SortElements sorts each run of "add element <family> <table> <set> ..."
// lines that name the same set or map, in a knftables Fake's Dump: nftables
// keeps no element order, so two dumps of the same table compare equal after it.
func SortElements(dump string) string {
	lines := strings.SplitAfter(dump, "\n")
	setOf := func(line string) string {
		fields := strings.Fields(line)
		if len(fields) < 5 || fields[0] != "add" || fields[1] != "element" {
			return ""
		}
		return fields[4]
	}
	for start := 0; start < len(lines); {
		set := setOf(lines[start])
		end := start + 1
		for set != "" && end < len(lines) && setOf(lines[end]) == set {
			end++
		}
		slices.Sort(lines[start:end])
		start = end
	}
	return strings.Join(lines, "")
}

// Populate feeds services and then slices to o, as informers do before
// kube-proxy's first sync; after that, each one is an update kube-proxy
// queues for the next sync.
func Populate(o *Oracle, services []*v1.Service, slices []*discoveryv1.EndpointSlice) {
	for _, svc := range services {
		o.OnServiceAdd(svc)
	}
	for _, slice := range slices {
		o.OnEndpointSliceAdd(slice)
	}
}
