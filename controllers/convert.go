package controllers

import (
	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	heraldv1 "herald.dev/herald/api/v1beta1"
	"herald.dev/herald/controllers/ipam"
)

// serviceFromAPI turns a LoadBalancer Service into the allocator's view of it.
// nsLabels are the labels of the Service's namespace. An error means the Service asks
// for something malformed (bad annotation); it is reported as an Event.
func serviceFromAPI(svc *corev1.Service, nsLabels map[string]string) (ipam.Service, error) {
	out := ipam.Service{
		Key:             svc.Namespace + "/" + svc.Name,
		Namespace:       svc.Namespace,
		Labels:          svc.Labels,
		NamespaceLabels: nsLabels,
		Pool:            heraldv1.LookupAnnotation(svc.Annotations, heraldv1.AnnotationAddressPool).Value,
		Created:         svc.CreationTimestamp.Time,
	}
	sharing := heraldv1.LookupAnnotation(svc.Annotations, heraldv1.AnnotationAllowSharedIP)
	out.SharingKey, out.SharingKeyFrom = sharing.Value, sharing.From
	if svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal {
		// Local traffic reaches only pods on the announcing node, so Services sharing
		// an IP must select the same pods.
		out.BackendKey = labels.Set(svc.Spec.Selector).String()
	}
	for _, p := range svc.Spec.Ports {
		proto := p.Protocol
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		out.Ports = append(out.Ports, ipam.Port{Protocol: string(proto), Port: p.Port})
	}
	for _, f := range svc.Spec.IPFamilies {
		if f == corev1.IPv6Protocol {
			out.Families = append(out.Families, ipam.IPv6)
		} else {
			out.Families = append(out.Families, ipam.IPv4)
		}
	}
	if len(out.Families) == 0 {
		// The API server always fills ipFamilies; be lenient with hand-made objects.
		out.Families = []ipam.Family{ipam.IPv4}
	}
	switch {
	case svc.Spec.IPFamilyPolicy == nil:
		out.Policy = ipam.SingleStack
	case *svc.Spec.IPFamilyPolicy == corev1.IPFamilyPolicyRequireDualStack:
		out.Policy = ipam.RequireDualStack
	case *svc.Spec.IPFamilyPolicy == corev1.IPFamilyPolicyPreferDualStack:
		out.Policy = ipam.PreferDualStack
	}
	ips, err := requestedIPs(svc)
	if err != nil {
		return out, err
	}
	out.RequestedIPs = ips
	return out, nil
}

// requestedIPs reads herald.dev/loadBalancerIPs (or MetalLB's name for it) or
// spec.loadBalancerIP. Errors name the annotation the Service set.
func requestedIPs(svc *corev1.Service) ([]netip.Addr, error) {
	found := heraldv1.LookupAnnotation(svc.Annotations, heraldv1.AnnotationLoadBalancerIPs)
	ann, name := found.Value, found.From
	spec := strings.TrimSpace(svc.Spec.LoadBalancerIP)
	switch {
	case ann != "" && spec != "":
		return nil, fmt.Errorf("both annotation %s and spec.loadBalancerIP are set; use one", name)
	case spec != "":
		ip, err := netip.ParseAddr(spec)
		if err != nil {
			return nil, fmt.Errorf("spec.loadBalancerIP %q is not an IP address", spec)
		}
		return []netip.Addr{ip.Unmap()}, nil
	case ann == "":
		return nil, nil
	}
	parts := strings.Split(ann, ",")
	if len(parts) > 2 {
		return nil, fmt.Errorf("annotation %s=%q: at most two IPs, one per family", name, ann)
	}
	var ips []netip.Addr
	for _, p := range parts {
		ip, err := netip.ParseAddr(strings.TrimSpace(p))
		if err != nil {
			return nil, fmt.Errorf("annotation %s=%q: %q is not an IP address", name, ann, strings.TrimSpace(p))
		}
		ips = append(ips, ip.Unmap())
	}
	if len(ips) == 2 && ips[0].Is4() == ips[1].Is4() {
		return nil, fmt.Errorf("annotation %s=%q: two IPs must be of different families", name, ann)
	}
	return ips, nil
}

// ingressIPs returns the IPs in status.loadBalancer.ingress.
func ingressIPs(svc *corev1.Service) []netip.Addr {
	var ips []netip.Addr
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if ip, err := netip.ParseAddr(in.IP); err == nil {
			ips = append(ips, ip.Unmap())
		}
	}
	return ips
}
