// Package poolapi reads IPAddressPool objects into the allocator's terms
// (controllers/ipam), for the controller and the speakers alike, so that both decide
// which pool an address belongs to from the same reading of the same objects.
package poolapi

import (
	"fmt"

	"k8s.io/apimachinery/pkg/labels"

	heraldv1 "herald.dev/herald/api/v1beta1"
	"herald.dev/herald/controllers/ipam"
)

// FromAPI turns an IPAddressPool into the allocator's view of it.
func FromAPI(p *heraldv1.IPAddressPool) (ipam.Pool, error) {
	addrs := make([]string, len(p.Spec.Addresses))
	for i, a := range p.Spec.Addresses {
		addrs[i] = string(a)
	}
	ranges, err := ipam.ParseAddresses(addrs)
	if err != nil {
		return ipam.Pool{}, fmt.Errorf("spec.addresses: %w", err)
	}
	pool := ipam.Pool{
		Name:                  p.Name,
		Ranges:                ranges,
		AutoAssign:            p.Spec.AutoAssign == nil || *p.Spec.AutoAssign,
		AvoidBuggyIPs:         p.Spec.AvoidBuggyIPs,
		CrossNamespaceSharing: p.Spec.AllowCrossNamespaceSharing,
		Created:               p.CreationTimestamp.Time,
		Terminating:           !p.DeletionTimestamp.IsZero(),
	}
	if sa := p.Spec.AllocateTo; sa != nil {
		alloc := &ipam.Allocation{Priority: sa.Priority, Namespaces: sa.Namespaces}
		if alloc.NamespaceSelectors, err = selectors(sa.NamespaceSelectors); err != nil {
			return ipam.Pool{}, fmt.Errorf("spec.serviceAllocation.namespaceSelectors: %w", err)
		}
		if alloc.ServiceSelectors, err = selectors(sa.ServiceSelectors); err != nil {
			return ipam.Pool{}, fmt.Errorf("spec.serviceAllocation.serviceSelectors: %w", err)
		}
		pool.Allocation = alloc
	}
	return pool, nil
}

func selectors(in []heraldv1.LabelSelector) ([]labels.Selector, error) {
	out := make([]labels.Selector, 0, len(in))
	for i := range in {
		s, err := in[i].AsSelector()
		if err != nil {
			return nil, fmt.Errorf("[%d]: %w", i, err)
		}
		out = append(out, s)
	}
	return out, nil
}

// Index indexes the pools whose addresses parse (the API server refuses the others at
// admission; the controller reports them on the pool's status).
func Index(list []*heraldv1.IPAddressPool) *ipam.PoolIndex {
	pools := make([]ipam.Pool, 0, len(list))
	for _, p := range list {
		if pool, err := FromAPI(p); err == nil {
			pools = append(pools, pool)
		}
	}
	return ipam.NewPoolIndex(pools)
}
