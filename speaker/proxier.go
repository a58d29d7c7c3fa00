package speaker

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	heraldv1 "herald.dev/herald/api/v1beta1"
	"herald.dev/herald/proxy"
)

// newProxier builds the embedded proxier for this node. Its IPs (one per family, which
// selects iptables and/or ip6tables) are the Node's InternalIPs, the memberlist bind
// address first; its zone is the Node's topology label. Its /healthz reads the Node
// from the informers (cached).
func newProxier(ctx context.Context, api, cached client.Reader, cfg Config, log logr.Logger) (*proxy.Proxier, error) {
	pc := cfg.Proxy
	pc.NodeName = cfg.NodeName
	pc.Registerer = crmetrics.Registry
	pc.Log = log
	pc.Node = func(ctx context.Context) *corev1.Node {
		// Before the informers synced, Get waits for them: not longer than a probe.
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		var n corev1.Node
		if err := cached.Get(ctx, types.NamespacedName{Name: cfg.NodeName}, &n); err != nil {
			return nil
		}
		return &n
	}
	var node corev1.Node
	err := api.Get(ctx, types.NamespacedName{Name: cfg.NodeName}, &node)
	if err != nil {
		log.Info("cannot read this node's Node; the proxier uses the memberlist address only", "error", err.Error())
	}
	pc.NodeIPs = nodeIPs(&node, cfg.Members.BindAddr)
	pc.NodeZone = node.Labels[corev1.LabelTopologyZone]
	p, err := proxy.New(pc)
	if err != nil {
		return nil, fmt.Errorf("service proxy: %w", err)
	}
	return p, nil
}

// nodeIPs returns at most one IP per family: bindAddr for its family, then the Node's
// first InternalIP of the other family.
func nodeIPs(node *corev1.Node, bindAddr string) []netip.Addr {
	var out []netip.Addr
	has := func(a netip.Addr) bool {
		for _, o := range out {
			if o.Is4() == a.Is4() {
				return true
			}
		}
		return false
	}
	if a, err := netip.ParseAddr(bindAddr); err == nil {
		out = append(out, a.Unmap())
	}
	for _, na := range node.Status.Addresses {
		if na.Type != corev1.NodeInternalIP {
			continue
		}
		if a, err := netip.ParseAddr(na.Address); err == nil && !has(a.Unmap()) {
			out = append(out, a.Unmap())
		}
	}
	return out
}

// feedProxier hands the cached Services and EndpointSlices to the proxier after every
// change, from the moment the informers synced until ctx ends. The proxier converts
// only what changed since the previous call and syncs on its own schedule.
func (s *Speaker) feedProxier(ctx context.Context, c cache.Cache) {
	if !c.WaitForCacheSync(ctx) {
		return
	}
	for _, note := range s.proxier.Status().MissingFamilies {
		s.nodeEvent(corev1.EventTypeWarning, heraldv1.ReasonProxyFamilyMissing, note)
	}
	for {
		var svcs corev1.ServiceList
		var slices discoveryv1.EndpointSliceList
		if err := c.List(ctx, &svcs); err != nil {
			s.log.Error(err, "listing Services for the proxier")
		} else if err := c.List(ctx, &slices); err != nil {
			s.log.Error(err, "listing EndpointSlices for the proxier")
		} else {
			services := make([]*corev1.Service, len(svcs.Items))
			for i := range svcs.Items {
				services[i] = &svcs.Items[i]
			}
			eps := make([]*discoveryv1.EndpointSlice, len(slices.Items))
			for i := range slices.Items {
				eps[i] = &slices.Items[i]
			}
			s.proxier.Update(services, eps)
		}
		select {
		case <-ctx.Done():
			return
		case <-s.proxyPoke:
		}
	}
}
