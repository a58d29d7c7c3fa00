package proxy

import (
	"fmt"
	"net/netip"
	"strings"

	"herald.dev/herald/proxy/model"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	netutils "k8s.io/utils/net"
)

// ConvertService reduces a Service to the generator's input, without its
// EndpointSlices, applying the API's defaults where a field may be unset and leaving
// out what kube-proxy ignores: ingress entries with ipMode Proxy or without an IP, and
// externalIPs that are empty. ok is false when the Service must be left out as a whole;
// problems say why, and name the single addresses that were dropped.
//
// Addresses are parsed like kube-proxy's ParseIPSloppy, so "010.0.0.1" (leading zeros,
// still found in objects created before Kubernetes 1.30 validated them away) is the
// IPv4 address 10.0.0.1, as kube-proxy reads it.
func ConvertService(svc *corev1.Service) (out model.Service, problems []model.Problem, ok bool) {
	name := model.ServiceName{Namespace: svc.Namespace, Name: svc.Name}
	problem := func(subject string, err error) {
		problems = append(problems, model.Problem{Service: name, Subject: subject, Err: err})
	}
	spec := &svc.Spec
	out = model.Service{
		Namespace:             svc.Namespace,
		Name:                  svc.Name,
		Type:                  model.ServiceType(spec.Type),
		ExternalTrafficPolicy: model.TrafficPolicy(spec.ExternalTrafficPolicy),
		HealthCheckNodePort:   int(spec.HealthCheckNodePort),
	}
	if spec.InternalTrafficPolicy != nil {
		out.InternalTrafficPolicy = model.TrafficPolicy(*spec.InternalTrafficPolicy)
	}
	if spec.SessionAffinity == corev1.ServiceAffinityClientIP {
		out.SessionAffinityClientIP = true
		// nil is the API default of 3 hours, which the generator's 0 stands for.
		if c := spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
			out.AffinityTimeoutSeconds = int(*c.ClientIP.TimeoutSeconds)
		}
	}

	// A bad cluster IP leaves nothing to attach rules to, and a bad source range would
	// widen who may reach the Service: both skip the whole Service.
	for _, s := range clusterIPs(spec) {
		a, err := parseAddr(s)
		if err != nil {
			problem("", fmt.Errorf("%w: cluster IP %q", model.ErrInvalidAddress, s))
			return out, problems, false
		}
		out.ClusterIPs = append(out.ClusterIPs, a)
	}
	for _, s := range spec.LoadBalancerSourceRanges {
		p, err := parsePrefix(strings.TrimSpace(s))
		if err != nil {
			problem("", fmt.Errorf("%w: load balancer source range %q", model.ErrInvalidPrefix, s))
			return out, problems, false
		}
		out.LoadBalancerSourceRanges = append(out.LoadBalancerSourceRanges, p)
	}

	for _, s := range spec.ExternalIPs {
		if strings.TrimSpace(s) == "" {
			continue // kube-proxy skips empty entries without a word
		}
		a, err := parseAddr(s)
		if err != nil {
			problem(fmt.Sprintf("external IP %q", s), model.ErrInvalidAddress)
			continue
		}
		out.ExternalIPs = append(out.ExternalIPs, a)
	}
	for _, ing := range svc.Status.LoadBalancer.Ingress {
		// proxyutil.IsVIPMode: ipMode nil means VIP. Proxy-mode and hostname-only
		// ingress is the load balancer's business, not the node's.
		if ing.IP == "" || (ing.IPMode != nil && *ing.IPMode != corev1.LoadBalancerIPModeVIP) {
			continue
		}
		a, err := parseAddr(ing.IP)
		if err != nil {
			problem(fmt.Sprintf("load balancer IP %q", ing.IP), model.ErrInvalidAddress)
			continue
		}
		out.LoadBalancerIPs = append(out.LoadBalancerIPs, a)
	}

	out.Ports = make([]model.ServicePort, 0, len(spec.Ports))
	for _, p := range spec.Ports {
		out.Ports = append(out.Ports, model.ServicePort{
			Name:     p.Name,
			Protocol: protocol(p.Protocol),
			Port:     int(p.Port),
			NodePort: int(p.NodePort),
		})
	}
	return out, problems, true
}

// clusterIPs is proxyutil.GetClusterIPByFamily for both families at once: nothing for
// a headless Service ("None") or one without a ClusterIP, spec.clusterIPs when set,
// else the single spec.clusterIP of objects written before dual-stack.
func clusterIPs(spec *corev1.ServiceSpec) []string {
	if spec.ClusterIP == "" || spec.ClusterIP == corev1.ClusterIPNone {
		return nil
	}
	if len(spec.ClusterIPs) > 0 {
		return spec.ClusterIPs
	}
	return []string{spec.ClusterIP}
}

// ConvertEndpointSlice reduces an EndpointSlice to the generator's input and names the
// Service it belongs to (label kubernetes.io/service-name). ok is false for slices
// kube-proxy ignores: FQDN slices and slices without the label. Ports with a nil name
// or a nil or zero port and endpoints without addresses are left out, as kube-proxy
// leaves them out; an unparsable endpoint address is left out and reported.
func ConvertEndpointSlice(slice *discoveryv1.EndpointSlice) (svc model.ServiceName, out model.EndpointSlice, problems []model.Problem, ok bool) {
	svc = model.ServiceName{Namespace: slice.Namespace, Name: slice.Labels[discoveryv1.LabelServiceName]}
	if svc.Name == "" || slice.AddressType == discoveryv1.AddressTypeFQDN {
		return svc, out, nil, false
	}
	for _, p := range slice.Ports {
		if p.Name == nil || p.Port == nil || *p.Port == 0 {
			continue
		}
		pr := model.TCP // the API default
		if p.Protocol != nil {
			pr = protocol(*p.Protocol)
		}
		out.Ports = append(out.Ports, model.EndpointPort{Name: *p.Name, Protocol: pr, Port: int(*p.Port)})
	}
	for i := range slice.Endpoints {
		ep := &slice.Endpoints[i]
		if len(ep.Addresses) == 0 {
			continue
		}
		// kube-proxy uses only the first address.
		a, err := parseAddr(ep.Addresses[0])
		if err != nil {
			problems = append(problems, model.Problem{Service: svc,
				Subject: fmt.Sprintf("endpoint %q of EndpointSlice %s", ep.Addresses[0], slice.Name),
				Err:     model.ErrInvalidAddress})
			continue
		}
		c := &ep.Conditions
		e := model.Endpoint{
			IP:          a,
			Ready:       c.Ready == nil || *c.Ready,
			Serving:     c.Serving == nil || *c.Serving,
			Terminating: c.Terminating != nil && *c.Terminating,
		}
		if ep.NodeName != nil {
			e.NodeName = *ep.NodeName
		}
		if h := ep.Hints; h != nil {
			for _, z := range h.ForZones {
				e.ZoneHints = append(e.ZoneHints, z.Name)
			}
			for _, n := range h.ForNodes {
				e.NodeHints = append(e.NodeHints, n.Name)
			}
		}
		out.Endpoints = append(out.Endpoints, e)
	}
	return svc, out, problems, true
}

// protocol applies the API default (TCP) to an unset protocol. Unknown values pass
// through: the generator reports them.
func protocol(p corev1.Protocol) model.Protocol {
	if p == "" {
		return model.TCP
	}
	return model.Protocol(p)
}

// parseAddr parses like netutils.ParseIPSloppy and unmaps IPv4-mapped IPv6 addresses,
// which kube-proxy treats as IPv4.
func parseAddr(s string) (netip.Addr, error) {
	ip := netutils.ParseIPSloppy(s)
	a, ok := netip.AddrFromSlice(ip)
	if !ok {
		return netip.Addr{}, fmt.Errorf("%w %q", model.ErrInvalidAddress, s)
	}
	return a.Unmap(), nil
}

// parsePrefix parses like netutils.ParseCIDRSloppy; host bits are kept (the generator
// prints the network).
func parsePrefix(s string) (netip.Prefix, error) {
	ip, ipnet, err := netutils.ParseCIDRSloppy(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%w %q", model.ErrInvalidPrefix, s)
	}
	a, ok := netip.AddrFromSlice(ip)
	if !ok {
		return netip.Prefix{}, fmt.Errorf("%w %q", model.ErrInvalidPrefix, s)
	}
	ones, bits := ipnet.Mask.Size()
	a = a.Unmap()
	if a.Is4() && bits == 128 {
		ones -= 96 // an IPv4-mapped range: count the IPv4 bits only
	}
	if ones < 0 {
		return netip.Prefix{}, fmt.Errorf("%w %q", model.ErrInvalidPrefix, s)
	}
	return netip.PrefixFrom(a, ones), nil
}
