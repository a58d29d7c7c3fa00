//go:build linux

package compare

import (
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"herald.dev/herald/proxy/iptables"
	"herald.dev/herald/proxy/model"
)

// fullSyncDiff runs a fresh full sync of w on both sides and returns the canonical
// differences of the payloads ("" when they agree).
func fullSyncDiff(t *testing.T, e env, fam model.Family, w *world) string {
	s := newSide(t, e, fam)
	s.feed(diff(&world{}, w))
	res, err := s.oracle.Sync()
	if err != nil {
		return "kube-proxy's sync failed: " + err.Error()
	}
	services, _ := heraldServices(w)
	p, err := iptables.Generate(&iptables.Snapshot{Family: fam, Node: e.heraldNode(), Services: services}, iptables.Options{})
	if err != nil {
		return "herald's Generate: " + err.Error()
	}
	return canonicalDiff(res.Filter, string(p.Filter.Text)) + canonicalDiff(res.NAT, string(p.NAT.Text))
}

// shrink removes Services, slices and endpoints from w as long as a fresh full sync
// still shows a difference, and returns the smaller world.
func shrink(t *testing.T, e env, fam model.Family, w *world) *world {
	fails := func(c *world) bool { return fullSyncDiff(t, e, fam, c) != "" }
	for progress := true; progress; {
		progress = false
		for _, k := range sortedKeys(w.services) {
			c := w.clone()
			svc := c.services[k]
			delete(c.services, k)
			for _, sk := range c.slicesOf(svc.Namespace, svc.Name) {
				delete(c.slices, sk)
			}
			if fails(c) {
				w, progress = c, true
			}
		}
		for _, k := range sortedKeys(w.services) {
			for i := 0; i < len(serviceCuts(w.services[k])); i++ {
				c := w.clone()
				serviceCuts(c.services[k])[i](c.services[k])
				if fails(c) {
					w, progress = c, true
					i-- // the next cut now has this index
				}
			}
		}
		for _, k := range sortedKeys(w.slices) {
			c := w.clone()
			delete(c.slices, k)
			if fails(c) {
				w, progress = c, true
			}
		}
		for _, k := range sortedKeys(w.slices) {
			for i := len(w.slices[k].Endpoints) - 1; i >= 0; i-- {
				c := w.clone()
				es := c.slices[k]
				es.Endpoints = append(es.Endpoints[:i:i], es.Endpoints[i+1:]...)
				if fails(c) {
					w, progress = c, true
				}
			}
		}
	}
	return w
}

// worldYAML prints every object of w.
func worldYAML(w *world) string {
	var b strings.Builder
	for _, k := range sortedKeys(w.services) {
		y, _ := yaml.Marshal(w.services[k])
		b.WriteString("---\napiVersion: v1\nkind: Service\n")
		b.Write(y)
	}
	for _, k := range sortedKeys(w.slices) {
		y, _ := yaml.Marshal(w.slices[k])
		b.WriteString("---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n")
		b.Write(y)
	}
	return b.String()
}

// serviceCuts are the ways to make one Service smaller: drop one port (keeping one),
// one source range, one external IP or one ingress entry.
func serviceCuts(svc *v1.Service) []func(*v1.Service) {
	var cuts []func(*v1.Service)
	for i := range svc.Spec.Ports {
		if len(svc.Spec.Ports) > 1 {
			cuts = append(cuts, func(s *v1.Service) { s.Spec.Ports = slices.Delete(s.Spec.Ports, i, i+1) })
		}
	}
	for i := range svc.Spec.LoadBalancerSourceRanges {
		cuts = append(cuts, func(s *v1.Service) {
			s.Spec.LoadBalancerSourceRanges = slices.Delete(s.Spec.LoadBalancerSourceRanges, i, i+1)
		})
	}
	for i := range svc.Spec.ExternalIPs {
		cuts = append(cuts, func(s *v1.Service) { s.Spec.ExternalIPs = slices.Delete(s.Spec.ExternalIPs, i, i+1) })
	}
	for i := range svc.Status.LoadBalancer.Ingress {
		cuts = append(cuts, func(s *v1.Service) {
			s.Status.LoadBalancer.Ingress = slices.Delete(s.Status.LoadBalancer.Ingress, i, i+1)
		})
	}
	return cuts
}
