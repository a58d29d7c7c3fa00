//go:build linux

package compare

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// This file generates random but valid Services and EndpointSlices (a "world") and
// random changes to them. Both sides of the comparison get exactly these objects:
// kube-proxy through the informer handlers, herald through proxy.ConvertService and
// proxy.ConvertEndpointSlice.
//
// "Valid" means what the API server would store (defaults applied, e.g. protocols
// and sessionAffinityConfig set) plus one restriction for determinism: kube-proxy
// itself is nondeterministic when one endpoint IP appears twice in a Service with
// conflicting data (it keeps whichever slice it visits first, in map order), so
// repairDuplicates makes such copies agree (see there).

// Node names: localNode is the node both proxies run on.
const (
	localNode = "node-a"
	zoneA     = "zone-a"
)

var remoteNodes = []string{"node-b", "node-c"}

// world is the set of objects in the cluster, keyed "namespace/name".
type world struct {
	services map[string]*v1.Service
	slices   map[string]*discoveryv1.EndpointSlice
	alloc    *allocator
}

func (w *world) clone() *world {
	c := &world{services: map[string]*v1.Service{}, slices: map[string]*discoveryv1.EndpointSlice{}, alloc: w.alloc}
	for k, s := range w.services {
		c.services[k] = s.DeepCopy()
	}
	for k, s := range w.slices {
		c.slices[k] = s.DeepCopy()
	}
	return c
}

func key(ns, name string) string { return ns + "/" + name }

// sortedKeys returns a map's keys in order, so that the generator's use of the random
// source does not depend on Go's map iteration order.
func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// slicesOf returns the keys of the slices labelled for Service ns/name.
func (w *world) slicesOf(ns, name string) []string {
	var out []string
	for _, k := range sortedKeys(w.slices) {
		s := w.slices[k]
		if s.Namespace == ns && s.Labels[discoveryv1.LabelServiceName] == name {
			out = append(out, k)
		}
	}
	return out
}

// allocator hands out unique names, addresses and ports. It is shared by a world and
// its clones, so that an address once used is never reused with other meaning (kube-proxy
// and herald would agree anyway, but unique values keep failures readable).
type allocator struct {
	r         *rand.Rand
	serial    int
	nodePorts map[int32]bool
	podIPs    map[netip.Addr]bool
	vips      int
}

func newAllocator(r *rand.Rand) *allocator {
	return &allocator{r: r, nodePorts: map[int32]bool{}, podIPs: map[netip.Addr]bool{}}
}

func (a *allocator) next() int { a.serial++; return a.serial }

// nodePort returns an unused port of the NodePort range (also used for
// healthCheckNodePort, which shares the range).
func (a *allocator) nodePort() int32 {
	for {
		p := int32(30000 + a.r.IntN(2768))
		if !a.nodePorts[p] {
			a.nodePorts[p] = true
			return p
		}
	}
}

// vip returns a fresh address of family 4 or 6 from one of the pools below.
func (a *allocator) vip(family int, pool string) string {
	a.vips++
	n := a.vips
	if family == 4 {
		base := map[string]string{"cluster": "172.30", "lb": "5.6"}[pool]
		if pool == "external" {
			return fmt.Sprintf("192.168.%d.%d", 99+n/250, n%250+1)
		}
		return fmt.Sprintf("%s.%d.%d", base, n/250, n%250+1)
	}
	prefix := map[string]string{"cluster": "fd00:30::", "external": "2001:db8:99::", "lb": "2001:db8:1::"}[pool]
	return fmt.Sprintf("%s%x", prefix, n)
}

// podIP returns an unused pod address. Most come from a small "hot" range, where string
// order and numeric order differ often ("10.180.0.10" < "10.180.0.9", "fd00:180::10" <
// "fd00:180::9"), which matters because kube-proxy writes endpoints sorted as strings;
// the rest from a wide range, so that long runs do not run out.
func (a *allocator) podIP(family int) string {
	for try := 0; ; try++ {
		var ip netip.Addr
		hot := try < 5 && chance(a.r, 70)
		switch {
		case family == 4 && hot:
			ip = netip.AddrFrom4([4]byte{10, 180, 0, byte(1 + a.r.IntN(40))})
		case family == 4:
			ip = netip.AddrFrom4([4]byte{10, 180, byte(1 + a.r.IntN(15)), byte(1 + a.r.IntN(254))})
		default:
			var b [16]byte
			copy(b[:], netip.MustParseAddr("fd00:180::").AsSlice())
			if hot {
				b[15] = byte(1 + a.r.IntN(0x40))
			} else {
				b[13], b[14], b[15] = byte(1+a.r.IntN(2)), byte(a.r.IntN(16)), byte(a.r.IntN(256))
			}
			ip = netip.AddrFrom16(b)
		}
		if !a.podIPs[ip] {
			a.podIPs[ip] = true
			return ip.String()
		}
	}
}

// chance reports true with probability percent/100.
func chance(r *rand.Rand, percent int) bool { return r.IntN(100) < percent }

// pick returns a random element.
func pick[T any](r *rand.Rand, list ...T) T { return list[r.IntN(len(list))] }

// weighted returns the index chosen with the given weights.
func weighted(r *rand.Rand, weights ...int) int {
	total := 0
	for _, w := range weights {
		total += w
	}
	n := r.IntN(total)
	for i, w := range weights {
		if n < w {
			return i
		}
		n -= w
	}
	return len(weights) - 1
}

// newWorld generates 1..maxServices Services with their slices.
func newWorld(r *rand.Rand, maxServices int) *world {
	w := &world{services: map[string]*v1.Service{}, slices: map[string]*discoveryv1.EndpointSlice{}, alloc: newAllocator(r)}
	n := 1 + r.IntN(maxServices)
	for range n {
		w.addService(r)
	}
	// Slices whose Service is gone (deleted first, or not created yet).
	if chance(r, 40) {
		svc := w.addService(r)
		delete(w.services, key(svc.Namespace, svc.Name))
	}
	// The same endpoint IP in two slices of a Service (a pod IP reused, or a pod moving
	// between slices), identical or one copy terminating.
	for range n / 3 {
		if chance(r, 50) {
			w.duplicateEndpoint(r)
		}
	}
	return w
}

var namespaces = []string{"ns1", "ns2", "default"}

// addService adds a random Service and its EndpointSlices.
func (w *world) addService(r *rand.Rand) *v1.Service {
	return w.addServiceNamed(r, pick(r, namespaces...), fmt.Sprintf("svc%d", w.alloc.next()))
}

// addServiceNamed adds a random Service ns/name and its EndpointSlices.
func (w *world) addServiceNamed(r *rand.Rand, ns, name string) *v1.Service {
	a := w.alloc
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	spec := &svc.Spec
	kind := weighted(r, 30, 20, 35, 10, 5) // ClusterIP, NodePort, LoadBalancer, headless, ExternalName
	switch kind {
	case 0:
		spec.Type = v1.ServiceTypeClusterIP
	case 1:
		spec.Type = v1.ServiceTypeNodePort
	case 2:
		spec.Type = v1.ServiceTypeLoadBalancer
	case 3:
		spec.Type = v1.ServiceTypeClusterIP
	case 4:
		spec.Type = v1.ServiceTypeExternalName
		spec.ExternalName = "example.com"
	}

	// Families: single-stack IPv4 or IPv6, or dual-stack with either primary.
	var families []int
	switch weighted(r, 45, 25, 20, 10) {
	case 0:
		families = []int{4}
	case 1:
		families = []int{6}
	case 2:
		families = []int{4, 6}
	case 3:
		families = []int{6, 4}
	}
	if kind != 4 {
		for _, f := range families {
			spec.IPFamilies = append(spec.IPFamilies, ipFamily(f))
		}
		spec.IPFamilyPolicy = ptr.To(v1.IPFamilyPolicySingleStack)
		if len(families) == 2 {
			spec.IPFamilyPolicy = ptr.To(pick(r, v1.IPFamilyPolicyPreferDualStack, v1.IPFamilyPolicyRequireDualStack))
		}
	}
	switch kind {
	case 3:
		spec.ClusterIP, spec.ClusterIPs = v1.ClusterIPNone, []string{v1.ClusterIPNone}
	case 4:
	default:
		for _, f := range families {
			spec.ClusterIPs = append(spec.ClusterIPs, a.vip(f, "cluster"))
		}
		spec.ClusterIP = spec.ClusterIPs[0]
	}

	if kind != 4 {
		nPorts := 1 + weighted(r, 50, 35, 15)
		spec.Ports = randomPorts(r, nPorts)
		if kind == 3 && chance(r, 30) {
			spec.Ports = nil // headless without ports is allowed
		}
	}
	if kind == 0 || kind == 1 || kind == 2 {
		if chance(r, 25) {
			spec.ExternalIPs = randomAddrs(r, a, families, "external", 1+r.IntN(2))
		}
		spec.SessionAffinity = v1.ServiceAffinityNone
		if chance(r, 25) {
			setClientIP(r, svc)
		}
		if chance(r, 60) {
			spec.InternalTrafficPolicy = ptr.To(pick(r, v1.ServiceInternalTrafficPolicyCluster, v1.ServiceInternalTrafficPolicyLocal))
		}
	}
	if kind == 2 && chance(r, 15) {
		spec.AllocateLoadBalancerNodePorts = ptr.To(false)
	}
	if kind == 2 {
		status := &svc.Status.LoadBalancer
		for range r.IntN(3) {
			status.Ingress = append(status.Ingress, randomIngress(r, a, families))
		}
		if chance(r, 30) {
			spec.LoadBalancerSourceRanges = randomSourceRanges(r)
		}
	}
	if kind == 1 || kind == 2 || len(spec.ExternalIPs) > 0 {
		spec.ExternalTrafficPolicy = pick(r, v1.ServiceExternalTrafficPolicyCluster, v1.ServiceExternalTrafficPolicyLocal)
	}
	w.normalizeService(svc)
	w.services[key(svc.Namespace, svc.Name)] = svc

	// Slices: headless Services have them too (kube-proxy ignores the Service);
	// ExternalName Services have none.
	if kind != 4 {
		for _, f := range families {
			for range weighted(r, 15, 50, 25, 10) {
				w.addSlice(r, svc, f)
			}
		}
	}
	return svc
}

func ipFamily(f int) v1.IPFamily {
	if f == 6 {
		return v1.IPv6Protocol
	}
	return v1.IPv4Protocol
}

func addrType(f int) discoveryv1.AddressType {
	if f == 6 {
		return discoveryv1.AddressTypeIPv6
	}
	return discoveryv1.AddressTypeIPv4
}

var portNames = []string{"http", "p80", "dns", "metrics", "grpc", "p443", "a", "zz"}

// randomPorts returns n service ports with unique names and unique port/protocol
// pairs; a single port is often unnamed.
func randomPorts(r *rand.Rand, n int) []v1.ServicePort {
	names := slices.Clone(portNames)
	r.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	var out []v1.ServicePort
	used := map[string]bool{}
	for i := range n {
		p := v1.ServicePort{Name: names[i]}
		if n == 1 && chance(r, 40) {
			p.Name = ""
		}
		for {
			p.Protocol = []v1.Protocol{v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP}[weighted(r, 60, 25, 15)]
			p.Port = pick(r, int32(53), 80, 443, 8080, 9090, 5353, 1234, 65535, 1)
			if !used[fmt.Sprint(p.Port, p.Protocol)] {
				used[fmt.Sprint(p.Port, p.Protocol)] = true
				break
			}
		}
		p.TargetPort = intstr.FromInt32(pick(r, p.Port, 8080, 9376, 5000))
		out = append(out, p)
	}
	return out
}

// randomAddrs returns n addresses of the given pool, mostly of the Service's families.
func randomAddrs(r *rand.Rand, a *allocator, families []int, pool string, n int) []string {
	var out []string
	for range n {
		f := pick(r, families...)
		if chance(r, 10) {
			f = 10 - f // the other family: ignored by both proxiers of a single-stack Service
		}
		out = append(out, a.vip(f, pool))
	}
	return out
}

// randomIngress returns a load balancer ingress entry: an IP in VIP mode (ipMode unset
// or VIP), in Proxy mode (ignored), or a hostname only (ignored).
func randomIngress(r *rand.Rand, a *allocator, families []int) v1.LoadBalancerIngress {
	if chance(r, 8) {
		return v1.LoadBalancerIngress{Hostname: "lb.example.com"}
	}
	ing := v1.LoadBalancerIngress{IP: randomAddrs(r, a, families, "lb", 1)[0]}
	switch weighted(r, 50, 25, 25) {
	case 1:
		ing.IPMode = ptr.To(v1.LoadBalancerIPModeVIP)
	case 2:
		ing.IPMode = ptr.To(v1.LoadBalancerIPModeProxy)
	}
	return ing
}

// sourceRangePool mixes families, ranges containing the node IPs (192.168.0.2,
// fd00::2) or kube-proxy's loopback fallback, "allow all" ranges, host bits and the
// whitespace padding validation lets through.
var sourceRangePool = []string{
	"203.0.113.0/25", "192.168.0.0/16", "10.0.0.0/8", " 198.51.100.0/24 ", "203.0.113.77/24",
	"0.0.0.0/0", "127.0.0.0/8", "2001:db8::/32", "fd00::/8", "::/0", "::1/128", "2001:db8:5::/48",
}

func randomSourceRanges(r *rand.Rand) []string {
	n := 1 + r.IntN(3)
	var out []string
	for _, i := range r.Perm(len(sourceRangePool))[:n] {
		out = append(out, sourceRangePool[i])
	}
	return out
}

func setClientIP(r *rand.Rand, svc *v1.Service) {
	svc.Spec.SessionAffinity = v1.ServiceAffinityClientIP
	svc.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{
		TimeoutSeconds: ptr.To(pick(r, int32(10800), 1, 60, 86400)),
	}}
}

// normalizeService applies what the API server guarantees after a change: NodePorts
// exist exactly for NodePort and LoadBalancer Services (unless allocation is off), a
// healthCheckNodePort exactly for LoadBalancer Services with externalTrafficPolicy
// Local, externalTrafficPolicy only on externally reachable Services, load balancer
// fields only on LoadBalancer Services.
func (w *world) normalizeService(svc *v1.Service) {
	spec := &svc.Spec
	if spec.Type == v1.ServiceTypeExternalName {
		return
	}
	wantNodePorts := spec.Type == v1.ServiceTypeNodePort ||
		(spec.Type == v1.ServiceTypeLoadBalancer && (spec.AllocateLoadBalancerNodePorts == nil || *spec.AllocateLoadBalancerNodePorts))
	for i := range spec.Ports {
		p := &spec.Ports[i]
		switch {
		case !wantNodePorts:
			p.NodePort = 0
		case p.NodePort == 0:
			p.NodePort = w.alloc.nodePort()
		}
	}
	if spec.Type != v1.ServiceTypeLoadBalancer {
		spec.AllocateLoadBalancerNodePorts = nil
		spec.LoadBalancerSourceRanges = nil
		svc.Status.LoadBalancer = v1.LoadBalancerStatus{}
	}
	external := spec.Type == v1.ServiceTypeNodePort || spec.Type == v1.ServiceTypeLoadBalancer || len(spec.ExternalIPs) > 0
	switch {
	case !external:
		spec.ExternalTrafficPolicy = ""
	case spec.ExternalTrafficPolicy == "" && spec.Type != v1.ServiceTypeClusterIP:
		spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyCluster
	}
	needsHC := spec.Type == v1.ServiceTypeLoadBalancer && spec.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal
	switch {
	case !needsHC:
		spec.HealthCheckNodePort = 0
	case spec.HealthCheckNodePort == 0:
		spec.HealthCheckNodePort = w.alloc.nodePort()
	}
}

// addSlice adds a random EndpointSlice of address family f for svc.
func (w *world) addSlice(r *rand.Rand, svc *v1.Service, f int) *discoveryv1.EndpointSlice {
	a := w.alloc
	es := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: svc.Namespace,
			Name:      fmt.Sprintf("%s-%d", svc.Name, a.next()),
			Labels:    map[string]string{discoveryv1.LabelServiceName: svc.Name},
		},
		AddressType: addrType(f),
	}
	for _, p := range svc.Spec.Ports {
		if chance(r, 10) {
			continue // a slice may lack a port (e.g. pods without that named port)
		}
		target := p.TargetPort.IntVal
		if chance(r, 15) {
			target = pick(r, int32(8081), 9000, 53)
		}
		es.Ports = append(es.Ports, discoveryv1.EndpointPort{Name: ptr.To(p.Name), Port: ptr.To(target), Protocol: ptr.To(p.Protocol)})
	}
	switch {
	case chance(r, 5):
		// A port no Service port matches.
		es.Ports = append(es.Ports, discoveryv1.EndpointPort{Name: ptr.To("other"), Port: ptr.To[int32](7777), Protocol: ptr.To(v1.ProtocolTCP)})
	case chance(r, 3):
		// A port without a number, which kube-proxy skips.
		es.Ports = append(es.Ports, discoveryv1.EndpointPort{Name: ptr.To("nonum"), Protocol: ptr.To(v1.ProtocolUDP)})
	}
	withHints := chance(r, 15)
	for range weighted(r, 10, 25, 25, 20, 10, 10) {
		ep := randomEndpoint(r, a, f)
		if withHints {
			setHints(r, &ep)
		}
		es.Endpoints = append(es.Endpoints, ep)
	}
	w.slices[key(es.Namespace, es.Name)] = es
	return es
}

func randomEndpoint(r *rand.Rand, a *allocator, f int) discoveryv1.Endpoint {
	ep := discoveryv1.Endpoint{Addresses: []string{a.podIP(f)}}
	switch weighted(r, 10, 45, 35, 10) {
	case 0:
	case 1:
		ep.NodeName = ptr.To(localNode)
	case 2:
		ep.NodeName = ptr.To(remoteNodes[0])
	case 3:
		ep.NodeName = ptr.To(remoteNodes[1])
	}
	ep.Conditions = randomConditions(r)
	return ep
}

// randomConditions covers ready/serving/terminating, including unset (nil) values and
// combinations the EndpointSlice controller would not write.
func randomConditions(r *rand.Rand) discoveryv1.EndpointConditions {
	t, f := ptr.To(true), ptr.To(false)
	switch weighted(r, 45, 10, 15, 8, 7, 15) {
	case 0:
		return discoveryv1.EndpointConditions{Ready: t, Serving: t, Terminating: f}
	case 1:
		return discoveryv1.EndpointConditions{}
	case 2:
		return discoveryv1.EndpointConditions{Ready: f, Serving: t, Terminating: t}
	case 3:
		return discoveryv1.EndpointConditions{Ready: f, Serving: f, Terminating: t}
	case 4:
		return discoveryv1.EndpointConditions{Ready: f, Serving: f, Terminating: f}
	default:
		b := func() *bool { return pick(r, nil, t, f) }
		return discoveryv1.EndpointConditions{Ready: b(), Serving: b(), Terminating: b()}
	}
}

// setHints gives an endpoint topology hints (zone and sometimes node), used when every
// ready endpoint of a port has them.
func setHints(r *rand.Rand, ep *discoveryv1.Endpoint) {
	h := &discoveryv1.EndpointHints{}
	h.ForZones = []discoveryv1.ForZone{{Name: pick(r, zoneA, "zone-b")}}
	if chance(r, 40) {
		h.ForNodes = []discoveryv1.ForNode{{Name: pick(r, localNode, remoteNodes[0])}}
	}
	ep.Hints = h
}

// repairDuplicates makes the copies of one endpoint IP within a Service agree where
// kube-proxy's result would depend on map order. kube-proxy merges a Service's slices in
// map order and keeps, per "ip:port", the first copy seen unless a later copy is not
// terminating (EndpointSliceCache.addEndpoints). So the outcome is fixed only when the
// non-terminating copies are all equal and, if there are none, all copies are equal.
// Otherwise every copy becomes a copy of the first one.
func (w *world) repairDuplicates() {
	type ref struct {
		slice string
		i     int
	}
	copies := map[string][]ref{} // "ns/svc ip" -> copies
	for _, k := range sortedKeys(w.slices) {
		es := w.slices[k]
		for i, ep := range es.Endpoints {
			id := key(es.Namespace, es.Labels[discoveryv1.LabelServiceName]) + " " + ep.Addresses[0]
			copies[id] = append(copies[id], ref{k, i})
		}
	}
	for _, id := range sortedKeys(copies) {
		refs := copies[id]
		if len(refs) < 2 {
			continue
		}
		get := func(x ref) *discoveryv1.Endpoint { return &w.slices[x.slice].Endpoints[x.i] }
		var live, all []*discoveryv1.Endpoint
		for _, x := range refs {
			ep := get(x)
			all = append(all, ep)
			if ep.Conditions.Terminating == nil || !*ep.Conditions.Terminating {
				live = append(live, ep)
			}
		}
		group := live
		if len(live) == 0 {
			group = all
		}
		same := true
		for _, ep := range group[1:] {
			if !reflect.DeepEqual(ep, group[0]) {
				same = false
			}
		}
		if !same {
			for _, ep := range all[1:] {
				*ep = *all[0].DeepCopy()
			}
		}
	}
}

// duplicateEndpoint copies an endpoint of one of the Service's slices into another slice
// of the same family, identical or as a terminating copy.
func (w *world) duplicateEndpoint(r *rand.Rand) string {
	var candidates [][2]string
	for _, a := range sortedKeys(w.slices) {
		for _, b := range sortedKeys(w.slices) {
			sa, sb := w.slices[a], w.slices[b]
			if a != b && len(sa.Endpoints) > 0 && sa.Namespace == sb.Namespace && sa.AddressType == sb.AddressType &&
				sa.Labels[discoveryv1.LabelServiceName] == sb.Labels[discoveryv1.LabelServiceName] {
				candidates = append(candidates, [2]string{a, b})
			}
		}
	}
	if len(candidates) == 0 {
		return ""
	}
	c := pick(r, candidates...)
	from, to := w.slices[c[0]], w.slices[c[1]]
	src := pick(r, from.Endpoints...)
	ep := *src.DeepCopy()
	// Same target ports, so that the copies are the same "ip:port" to kube-proxy.
	to.Ports = nil
	for _, p := range from.Ports {
		to.Ports = append(to.Ports, *p.DeepCopy())
	}
	if chance(r, 50) {
		ep.Conditions = discoveryv1.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(chance(r, 50)), Terminating: ptr.To(true)}
		ep.NodeName = ptr.To(pick(r, localNode, remoteNodes[0]))
	}
	to.Endpoints = append(to.Endpoints, ep)
	return "duplicate endpoint " + ep.Addresses[0] + " into " + c[1]
}

// mutate applies one random change to w and describes it. Changes cover endpoints
// (added, removed, conditions, node), slices (added, deleted, ports), Services (added,
// deleted, ports, policies, affinity, addresses, type) and topology hints.
func (w *world) mutate(r *rand.Rand) string {
	for range 20 {
		if d := w.tryMutate(r); d != "" {
			return d
		}
	}
	return "add service " + w.describeNew(w.addService(r))
}

func (w *world) describeNew(svc *v1.Service) string { return key(svc.Namespace, svc.Name) }

// tryMutate attempts one kind of change; "" means it did not apply to this world.
func (w *world) tryMutate(r *rand.Rand) string {
	svcKeys := sortedKeys(w.services)
	sliceKeys := sortedKeys(w.slices)
	var proxied []string // Services with a cluster IP and ports
	for _, k := range svcKeys {
		if s := w.services[k]; s.Spec.Type != v1.ServiceTypeExternalName && s.Spec.ClusterIP != v1.ClusterIPNone {
			proxied = append(proxied, k)
		}
	}
	var nonEmpty []string
	for _, k := range sliceKeys {
		if len(w.slices[k].Endpoints) > 0 {
			nonEmpty = append(nonEmpty, k)
		}
	}

	switch weighted(r, 14, 10, 16, 5, 6, 5, 5, 6, 5, 8, 4, 3, 5, 3, 4, 3, 4, 2, 4, 4) {
	case 0: // endpoint added
		if len(sliceKeys) == 0 {
			return ""
		}
		k := pick(r, sliceKeys...)
		es := w.slices[k]
		f := 4
		if es.AddressType == discoveryv1.AddressTypeIPv6 {
			f = 6
		}
		ep := randomEndpoint(r, w.alloc, f)
		if len(es.Endpoints) > 0 && es.Endpoints[0].Hints != nil {
			setHints(r, &ep)
		}
		es.Endpoints = append(es.Endpoints, ep)
		return "add endpoint " + ep.Addresses[0] + " to " + k
	case 1: // endpoint removed
		if len(nonEmpty) == 0 {
			return ""
		}
		k := pick(r, nonEmpty...)
		es := w.slices[k]
		i := r.IntN(len(es.Endpoints))
		ip := es.Endpoints[i].Addresses[0]
		es.Endpoints = slices.Delete(es.Endpoints, i, i+1)
		return "remove endpoint " + ip + " from " + k
	case 2: // conditions changed
		if len(nonEmpty) == 0 {
			return ""
		}
		k := pick(r, nonEmpty...)
		ep := &w.slices[k].Endpoints[r.IntN(len(w.slices[k].Endpoints))]
		old := ep.Conditions
		for reflect.DeepEqual(ep.Conditions, old) {
			ep.Conditions = randomConditions(r)
		}
		return fmt.Sprintf("conditions of %s in %s: %s -> %s", ep.Addresses[0], k, conds(old), conds(ep.Conditions))
	case 3: // endpoint moved to another node
		if len(nonEmpty) == 0 {
			return ""
		}
		k := pick(r, nonEmpty...)
		ep := &w.slices[k].Endpoints[r.IntN(len(w.slices[k].Endpoints))]
		old := ptr.Deref(ep.NodeName, "")
		n := pick(r, localNode, remoteNodes[0], "")
		if n == old {
			return ""
		}
		ep.NodeName = nil
		if n != "" {
			ep.NodeName = ptr.To(n)
		}
		return fmt.Sprintf("node of %s in %s: %q -> %q", ep.Addresses[0], k, old, n)
	case 4: // slice added
		if len(proxied) == 0 {
			return ""
		}
		svc := w.services[pick(r, proxied...)]
		f := 4
		if svc.Spec.IPFamilies[r.IntN(len(svc.Spec.IPFamilies))] == v1.IPv6Protocol {
			f = 6
		}
		es := w.addSlice(r, svc, f)
		return "add slice " + key(es.Namespace, es.Name)
	case 5: // slice deleted
		if len(sliceKeys) == 0 {
			return ""
		}
		k := pick(r, sliceKeys...)
		delete(w.slices, k)
		return "delete slice " + k
	case 6: // slice target port changed
		var withPorts []string
		for _, k := range sliceKeys {
			if len(w.slices[k].Ports) > 0 && w.slices[k].Ports[0].Port != nil {
				withPorts = append(withPorts, k)
			}
		}
		if len(withPorts) == 0 {
			return ""
		}
		k := pick(r, withPorts...)
		p := &w.slices[k].Ports[0]
		old := *p.Port
		p.Port = ptr.To(pick(r, old%60000+1, 8443, 80))
		if *p.Port == old {
			return ""
		}
		return fmt.Sprintf("target port of %s %q: %d -> %d", k, *p.Name, old, *p.Port)
	case 7: // service added
		return "add service " + w.describeNew(w.addService(r))
	case 8: // service deleted, mostly with its slices
		if len(svcKeys) == 0 {
			return ""
		}
		k := pick(r, svcKeys...)
		svc := w.services[k]
		delete(w.services, k)
		if chance(r, 70) {
			for _, sk := range w.slicesOf(svc.Namespace, svc.Name) {
				delete(w.slices, sk)
			}
			return "delete service " + k + " and its slices"
		}
		return "delete service " + k + " (slices stay)"
	case 9: // service ports changed
		if len(proxied) == 0 {
			return ""
		}
		k := pick(r, proxied...)
		return "ports of " + k + ": " + w.changePorts(r, w.services[k])
	case 10: // externalTrafficPolicy flipped
		var ext []string
		for _, k := range proxied {
			if s := w.services[k]; s.Spec.ExternalTrafficPolicy != "" {
				ext = append(ext, k)
			}
		}
		if len(ext) == 0 {
			return ""
		}
		k := pick(r, ext...)
		s := w.services[k]
		if s.Spec.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal {
			s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyCluster
		} else {
			s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
		}
		w.normalizeService(s)
		return "externalTrafficPolicy of " + k + " -> " + string(s.Spec.ExternalTrafficPolicy)
	case 11: // internalTrafficPolicy changed
		if len(proxied) == 0 {
			return ""
		}
		k := pick(r, proxied...)
		s := w.services[k]
		old := ptr.Deref(s.Spec.InternalTrafficPolicy, "")
		if old == v1.ServiceInternalTrafficPolicyLocal {
			s.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyCluster)
		} else {
			s.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyLocal)
		}
		return "internalTrafficPolicy of " + k + " -> " + string(*s.Spec.InternalTrafficPolicy)
	case 12: // session affinity toggled or its timeout changed
		if len(proxied) == 0 {
			return ""
		}
		k := pick(r, proxied...)
		s := w.services[k]
		switch {
		case s.Spec.SessionAffinity != v1.ServiceAffinityClientIP:
			setClientIP(r, s)
			return "ClientIP affinity on for " + k
		case chance(r, 50):
			s.Spec.SessionAffinity, s.Spec.SessionAffinityConfig = v1.ServiceAffinityNone, nil
			return "ClientIP affinity off for " + k
		default:
			old := *s.Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds
			setClientIP(r, s)
			if *s.Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds == old {
				return ""
			}
			return fmt.Sprintf("affinity timeout of %s: %d -> %d", k, old, *s.Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds)
		}
	case 13: // externalIPs changed
		if len(proxied) == 0 {
			return ""
		}
		k := pick(r, proxied...)
		s := w.services[k]
		if len(s.Spec.ExternalIPs) > 0 && chance(r, 50) {
			s.Spec.ExternalIPs = s.Spec.ExternalIPs[1:]
		} else {
			s.Spec.ExternalIPs = append(s.Spec.ExternalIPs, randomAddrs(r, w.alloc, svcFamilies(s), "external", 1)...)
		}
		if len(s.Spec.ExternalIPs) == 0 {
			s.Spec.ExternalIPs = nil
		}
		if s.Spec.ExternalTrafficPolicy == "" && len(s.Spec.ExternalIPs) > 0 {
			s.Spec.ExternalTrafficPolicy = pick(r, v1.ServiceExternalTrafficPolicyCluster, v1.ServiceExternalTrafficPolicyLocal)
		}
		w.normalizeService(s)
		return fmt.Sprintf("externalIPs of %s -> %v", k, s.Spec.ExternalIPs)
	case 14: // load balancer ingress changed
		lbs := w.ofType(proxied, v1.ServiceTypeLoadBalancer)
		if len(lbs) == 0 {
			return ""
		}
		k := pick(r, lbs...)
		s := w.services[k]
		ing := &s.Status.LoadBalancer.Ingress
		switch {
		case len(*ing) > 0 && chance(r, 35):
			*ing = (*ing)[1:]
		case len(*ing) > 0 && chance(r, 35):
			i := &(*ing)[r.IntN(len(*ing))]
			if i.IPMode != nil && *i.IPMode == v1.LoadBalancerIPModeProxy {
				i.IPMode = nil
			} else {
				i.IPMode = ptr.To(v1.LoadBalancerIPModeProxy)
			}
		default:
			*ing = append(*ing, randomIngress(r, w.alloc, svcFamilies(s)))
		}
		if len(*ing) == 0 {
			*ing = nil
		}
		return "load balancer ingress of " + k
	case 15: // loadBalancerSourceRanges changed
		lbs := w.ofType(proxied, v1.ServiceTypeLoadBalancer)
		if len(lbs) == 0 {
			return ""
		}
		k := pick(r, lbs...)
		s := w.services[k]
		if len(s.Spec.LoadBalancerSourceRanges) > 0 && chance(r, 40) {
			s.Spec.LoadBalancerSourceRanges = nil
		} else {
			s.Spec.LoadBalancerSourceRanges = randomSourceRanges(r)
		}
		return fmt.Sprintf("loadBalancerSourceRanges of %s -> %q", k, s.Spec.LoadBalancerSourceRanges)
	case 16: // type changed
		if len(proxied) == 0 {
			return ""
		}
		k := pick(r, proxied...)
		s := w.services[k]
		old := s.Spec.Type
		s.Spec.Type = pick(r, v1.ServiceTypeClusterIP, v1.ServiceTypeNodePort, v1.ServiceTypeLoadBalancer)
		if s.Spec.Type == old {
			return ""
		}
		if s.Spec.Type != v1.ServiceTypeClusterIP && s.Spec.ExternalTrafficPolicy == "" {
			s.Spec.ExternalTrafficPolicy = pick(r, v1.ServiceExternalTrafficPolicyCluster, v1.ServiceExternalTrafficPolicyLocal)
		}
		if s.Spec.Type == v1.ServiceTypeLoadBalancer {
			for range 1 + r.IntN(2) {
				s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, randomIngress(r, w.alloc, svcFamilies(s)))
			}
		}
		w.normalizeService(s)
		return fmt.Sprintf("type of %s: %s -> %s", k, old, s.Spec.Type)
	case 17: // topology hints added or removed on a whole slice
		if len(nonEmpty) == 0 {
			return ""
		}
		k := pick(r, nonEmpty...)
		es := w.slices[k]
		on := es.Endpoints[0].Hints == nil
		for i := range es.Endpoints {
			es.Endpoints[i].Hints = nil
			if on {
				setHints(r, &es.Endpoints[i])
			}
		}
		return fmt.Sprintf("hints on %s: %v", k, on)
	case 18:
		return w.duplicateEndpoint(r)
	case 19: // a deleted Service comes back while its slices stayed
		var orphans []string
		for _, k := range sliceKeys {
			es := w.slices[k]
			if _, ok := w.services[key(es.Namespace, es.Labels[discoveryv1.LabelServiceName])]; !ok {
				orphans = append(orphans, k)
			}
		}
		if len(orphans) == 0 {
			return ""
		}
		es := w.slices[pick(r, orphans...)]
		svc := w.addServiceNamed(r, es.Namespace, es.Labels[discoveryv1.LabelServiceName])
		return "re-create service " + key(svc.Namespace, svc.Name) + " for its remaining slices"
	}
	return ""
}

func (w *world) ofType(keys []string, t v1.ServiceType) []string {
	var out []string
	for _, k := range keys {
		if w.services[k].Spec.Type == t {
			out = append(out, k)
		}
	}
	return out
}

func svcFamilies(s *v1.Service) []int {
	var out []int
	for _, f := range s.Spec.IPFamilies {
		if f == v1.IPv6Protocol {
			out = append(out, 6)
		} else {
			out = append(out, 4)
		}
	}
	return out
}

// changePorts adds, removes, renumbers or changes the protocol of a Service port.
func (w *world) changePorts(r *rand.Rand, s *v1.Service) string {
	ports := &s.Spec.Ports
	used := func(port int32, proto v1.Protocol) bool {
		return slices.ContainsFunc(*ports, func(p v1.ServicePort) bool { return p.Port == port && p.Protocol == proto })
	}
	switch {
	case len(*ports) > 1 && chance(r, 30):
		i := r.IntN(len(*ports))
		name := (*ports)[i].Name
		*ports = slices.Delete(*ports, i, i+1)
		return "remove " + name
	case len(*ports) < 3 && chance(r, 40):
		var free []string
		for _, n := range portNames {
			if !slices.ContainsFunc(*ports, func(p v1.ServicePort) bool { return p.Name == n }) {
				free = append(free, n)
			}
		}
		if len(*ports) == 1 && (*ports)[0].Name == "" {
			(*ports)[0].Name = pick(r, free...) // a second port needs names on both
		}
		p := randomPorts(r, 2)[1]
		p.Name = pick(r, free...)
		for p.Name == (*ports)[0].Name {
			p.Name = pick(r, free...)
		}
		if used(p.Port, p.Protocol) {
			return ""
		}
		*ports = append(*ports, p)
		w.normalizeService(s)
		return "add " + p.Name
	default:
		if len(*ports) == 0 {
			return ""
		}
		p := &(*ports)[r.IntN(len(*ports))]
		if chance(r, 50) {
			proto := pick(r, v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP)
			if used(p.Port, proto) {
				return ""
			}
			old := p.Protocol
			p.Protocol = proto
			return fmt.Sprintf("protocol of %q: %s -> %s", p.Name, old, proto)
		}
		port := pick(r, int32(81), 8443, 53, 2000)
		if used(port, p.Protocol) {
			return ""
		}
		old := p.Port
		p.Port = port
		return fmt.Sprintf("port %q: %d -> %d", p.Name, old, port)
	}
}

func conds(c discoveryv1.EndpointConditions) string {
	b := func(p *bool) string {
		if p == nil {
			return "-"
		}
		return fmt.Sprint(*p)
	}
	return "ready=" + b(c.Ready) + ",serving=" + b(c.Serving) + ",terminating=" + b(c.Terminating)
}

// event is one informer notification: Add (old nil), Update or Delete (new nil).
type event struct {
	oldSvc, newSvc     *v1.Service
	oldSlice, newSlice *discoveryv1.EndpointSlice
}

// diff lists the notifications that turn before into after, Services first.
func diff(before, after *world) []event {
	var out []event
	for _, k := range sortedKeys(unionKeys(before.services, after.services)) {
		o, n := before.services[k], after.services[k]
		if o == nil || n == nil || !reflect.DeepEqual(o, n) {
			out = append(out, event{oldSvc: o, newSvc: n})
		}
	}
	for _, k := range sortedKeys(unionKeys(before.slices, after.slices)) {
		o, n := before.slices[k], after.slices[k]
		if o == nil || n == nil || !reflect.DeepEqual(o, n) {
			out = append(out, event{oldSlice: o, newSlice: n})
		}
	}
	return out
}

func unionKeys[V any](a, b map[string]V) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

// summary is a one-line description of a world, for failure messages.
func (w *world) summary() string {
	var b strings.Builder
	types := map[string]int{}
	for _, s := range w.services {
		t := string(s.Spec.Type)
		if s.Spec.ClusterIP == v1.ClusterIPNone {
			t = "Headless"
		}
		types[t]++
	}
	eps := 0
	for _, s := range w.slices {
		eps += len(s.Endpoints)
	}
	fmt.Fprintf(&b, "%d services %v, %d slices, %d endpoints", len(w.services), types, len(w.slices), eps)
	return b.String()
}
