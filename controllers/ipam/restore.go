package ipam

import (
	"fmt"
	"net/netip"
)

// Restore records that svc holds ips, as read back from Service.status at controller
// start (the caller restores the oldest Services first, so on a conflict the oldest
// keeps the IP). pool is the recorded herald.dev/ip-allocated-from-pool value; when it
// is empty or stale the allocation is re-homed to the pool that now contains the IPs.
// IPs outside every pool are kept and counted nowhere. Neither serviceAllocation nor
// autoAssign is checked: the Service already has the IPs and we never take them away.
//
// It fails, recording nothing for svc, when an IP is held by a Service svc may not share
// with; the caller then allocates svc anew. Restore replaces what svc held before.
func (a *Allocator) Restore(svc Service, ips []netip.Addr, pool string) error {
	norm, err := validateRestored(svc, ips)
	if err != nil {
		return fmt.Errorf("restoring %s: %w", svc.Key, err)
	}
	a.Release(svc.Key)
	for _, ip := range norm {
		if st := a.ips[ip]; st != nil {
			if err := canShare(st, svc); err != nil {
				return fmt.Errorf("restoring %s: %w", svc.Key, err)
			}
		}
	}
	a.record(svc, norm, pool)
	return nil
}
