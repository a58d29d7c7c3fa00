package speaker

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	heraldv1 "herald.dev/herald/api/v1beta1"
	"herald.dev/herald/internal/poolapi"
	"herald.dev/herald/speaker/claims"
	"herald.dev/herald/speaker/election"
)

// Inputs are the objects one election pass reads, as the informers hold them.
type Inputs struct {
	Services       []*corev1.Service
	EndpointSlices []*discoveryv1.EndpointSlice
	Nodes          []*corev1.Node
	Advertisements []*heraldv1.L2Advertisement
	Pools          []*heraldv1.IPAddressPool
	// PoolOf names the pool of an IP ("" when none), from Pools (poolapi.Index):
	// a Service's pool follows from its IP, never from its annotations.
	PoolOf func(netip.Addr) string
	// Members are the names of the live memberlist members.
	Members []string
	// LBClass is the loadBalancerClass herald serves besides Services without one.
	LBClass            string
	IgnoreExcludeLabel bool
	// Claims are the IPs each speaker announces, by node (this one and its live
	// peers; in an arbitrated election also the last claims of the electors it
	// cannot hear): whose claims are current are the election's incumbents. Nil: placement
	// by hash alone.
	Claims map[string]claims.Set
}

// Problem is an object the election had to leave out, with why.
type Problem struct {
	Object string // kind/namespace/name
	Err    error
}

func (p Problem) String() string { return p.Object + ": " + p.Err.Error() }

// BuildView turns the objects into the election's inputs. It never fails as a whole:
// an object it cannot read (a bad selector, an unparsable IP) is left out and
// reported, so one bad object does not stop every other IP from being announced.
func BuildView(in Inputs) (election.View, []election.Service, []Problem) {
	var problems []Problem
	v := election.View{
		Members:            slices.Clone(in.Members),
		IgnoreExcludeLabel: in.IgnoreExcludeLabel,
	}
	if len(in.Claims) > 0 {
		v.Incumbents = claims.Incumbents(in.Claims, claims.Tokens(in.Services))
	}
	for _, n := range in.Nodes {
		v.Nodes = append(v.Nodes, nodeView(n))
	}
	for _, ad := range in.Advertisements {
		a, err := advertisementView(ad, in.Pools)
		if err != nil {
			problems = append(problems, Problem{"L2Advertisement/" + ad.Namespace + "/" + ad.Name, err})
			continue
		}
		v.Advertisements = append(v.Advertisements, a)
	}
	endpoints := endpointsByService(in.EndpointSlices)
	var services []election.Service
	for _, svc := range in.Services {
		if !heraldv1.Announceable(svc, in.LBClass) {
			continue
		}
		s, err := serviceView(svc, endpoints[svc.Namespace+"/"+svc.Name], in.PoolOf)
		if err != nil {
			problems = append(problems, Problem{"Service/" + svc.Namespace + "/" + svc.Name, err})
			continue
		}
		services = append(services, s)
	}
	return v, services, problems
}

func nodeView(n *corev1.Node) election.Node {
	out := election.Node{Name: n.Name, Labels: n.Labels, Leaving: leavingReason(n)}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeNetworkUnavailable && c.Status == corev1.ConditionTrue {
			out.NetworkUnavailable = true
		}
	}
	return out
}

// Taints that say a node is going away: kubectl's for a node shut down for good
// (non-graceful node shutdown) and the cluster autoscaler's for a node it deletes.
const (
	taintOutOfService      = corev1.TaintNodeOutOfService
	taintAutoscalerDeletes = "ToBeDeletedByClusterAutoscaler"
)

// kubeletShuttingDown is what the kubelet's Ready condition says from the moment its
// graceful node shutdown begins (systemd's inhibitor lock told it the node goes down):
// the speaker, a system-node-critical pod, is stopped last, and a restart of the
// speaker alone never says it.
const kubeletShuttingDown = "node is shutting down"

// leavingReason says why an operator, the cluster autoscaler or the node itself is
// emptying n ("" when nothing says so). Its VIPs move, make-before-break, while it
// still runs.
func leavingReason(n *corev1.Node) string {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionFalse && strings.Contains(c.Message, kubeletShuttingDown) {
			return "shutting down"
		}
	}
	for _, t := range n.Spec.Taints {
		switch t.Key {
		case taintOutOfService:
			return "tainted " + taintOutOfService
		case taintAutoscalerDeletes:
			return "tainted " + taintAutoscalerDeletes
		}
	}
	if n.Spec.Unschedulable {
		return "cordoned"
	}
	return ""
}

// advertisementView resolves the pools an L2Advertisement names or selects.
func advertisementView(ad *heraldv1.L2Advertisement, pools []*heraldv1.IPAddressPool) (election.Advertisement, error) {
	spec := ad.Spec
	a := election.Advertisement{
		Name:       ad.Name,
		AllPools:   len(spec.IPAddressPools) == 0 && len(spec.IPAddressPoolSelectors) == 0,
		Pools:      slices.Clone(spec.IPAddressPools),
		Interfaces: slices.Clone(spec.Interfaces),
	}
	poolSels, err := labelSelectors(spec.IPAddressPoolSelectors, "spec.ipAddressPoolSelectors")
	if err != nil {
		return a, err
	}
	for _, p := range pools {
		for _, s := range poolSels {
			if s.Matches(labels.Set(p.Labels)) {
				a.Pools = append(a.Pools, p.Name)
				break
			}
		}
	}
	if a.NodeSelectors, err = labelSelectors(spec.NodeSelectors, "spec.nodeSelectors"); err != nil {
		return a, err
	}
	if a.ServiceSelectors, err = labelSelectors(spec.ServiceSelectors, "spec.serviceSelectors"); err != nil {
		return a, err
	}
	return a, nil
}

func labelSelectors(in []heraldv1.LabelSelector, field string) ([]labels.Selector, error) {
	out := make([]labels.Selector, 0, len(in))
	for i := range in {
		s, err := in[i].AsSelector()
		if err != nil {
			return nil, fmt.Errorf("%s[%d]: %w", field, i, err)
		}
		out = append(out, s)
	}
	return out, nil
}

// serviceView reads the IPs the controller wrote into status.loadBalancer.ingress and
// the pool they belong to (poolOf of the first). The pool is not read from the
// Service's annotations: its owner may edit them, and the pool decides which
// L2Advertisements, so which nodes and interfaces, announce the IP.
func serviceView(svc *corev1.Service, eps []election.Endpoint, poolOf func(netip.Addr) string) (election.Service, error) {
	s := election.Service{
		Key:       svc.Namespace + "/" + svc.Name,
		Labels:    svc.Labels,
		Local:     svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal,
		Endpoints: eps,
	}
	for i, ing := range svc.Status.LoadBalancer.Ingress {
		if ing.IP == "" {
			continue // a hostname ingress is not ours to announce
		}
		ip, err := netip.ParseAddr(ing.IP)
		if err != nil {
			return s, fmt.Errorf("status.loadBalancer.ingress[%d].ip: %w", i, err)
		}
		s.IPs = append(s.IPs, ip.Unmap())
	}
	if len(s.IPs) == 0 {
		return s, fmt.Errorf("status.loadBalancer.ingress has no IP")
	}
	s.Pool = poolOf(s.IPs[0])
	return s, nil
}

// endpointsByService groups the endpoints of every EndpointSlice by the Service
// ("namespace/name") its kubernetes.io/service-name label names.
func endpointsByService(list []*discoveryv1.EndpointSlice) map[string][]election.Endpoint {
	out := make(map[string][]election.Endpoint)
	for _, sl := range list {
		name := sl.Labels[discoveryv1.LabelServiceName]
		if name == "" {
			continue
		}
		key := sl.Namespace + "/" + name
		for _, ep := range sl.Endpoints {
			e := election.Endpoint{Ready: ep.Conditions.Ready, Serving: ep.Conditions.Serving}
			if ep.NodeName != nil {
				e.Node = *ep.NodeName
			}
			out[key] = append(out[key], e)
		}
	}
	return out
}

// inputs reads what one election pass reads from the informers' cache.
func (s *Speaker) inputs(ctx context.Context) (Inputs, error) {
	var (
		svcs   corev1.ServiceList
		slices discoveryv1.EndpointSliceList
		nodes  corev1.NodeList
		ads    heraldv1.L2AdvertisementList
		pools  heraldv1.IPAddressPoolList
	)
	// The election only reads these: no copy of each cached object, which cost as
	// much as BuildView itself at 10,000 Services (BenchmarkElectionPass).
	if err := s.cache.List(ctx, &svcs, client.UnsafeDisableDeepCopy); err != nil {
		return Inputs{}, err
	}
	if err := s.cache.List(ctx, &slices, client.UnsafeDisableDeepCopy); err != nil {
		return Inputs{}, err
	}
	if err := s.cache.List(ctx, &nodes, client.UnsafeDisableDeepCopy); err != nil {
		return Inputs{}, err
	}
	if err := s.cache.List(ctx, &ads); err != nil {
		return Inputs{}, err
	}
	if err := s.cache.List(ctx, &pools); err != nil {
		return Inputs{}, err
	}
	in := Inputs{
		LBClass:            s.cfg.LBClass,
		IgnoreExcludeLabel: s.cfg.IgnoreExcludeLabel,
	}
	for i := range svcs.Items {
		in.Services = append(in.Services, &svcs.Items[i])
	}
	for i := range slices.Items {
		in.EndpointSlices = append(in.EndpointSlices, &slices.Items[i])
	}
	for i := range nodes.Items {
		in.Nodes = append(in.Nodes, &nodes.Items[i])
	}
	for i := range ads.Items {
		in.Advertisements = append(in.Advertisements, &ads.Items[i])
	}
	for i := range pools.Items {
		in.Pools = append(in.Pools, &pools.Items[i])
	}
	in.PoolOf = poolapi.Index(in.Pools).PoolOf
	return in, nil
}
