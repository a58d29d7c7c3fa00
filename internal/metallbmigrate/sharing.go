package metallbmigrate

import (
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"herald.dev/herald/controllers/ipam"
)

// SharedIP is an IP that Services of several namespaces share under MetalLB. herald
// shares an IP across namespaces only in a pool with spec.allowCrossNamespaceSharing;
// without it the oldest Service keeps the IP and the others get new ones.
type SharedIP struct {
	IP       string
	Services []string // namespace/name, sorted
	// Pool is the converted pool holding the IP, "" if none does.
	Pool string
}

// SharedAcrossNamespaces finds the IPs in the Services' status that Services of more
// than one namespace hold, sorted by IP, with the pool among pools (converted objects)
// that holds each.
func SharedAcrossNamespaces(svcs []corev1.Service, pools []*unstructured.Unstructured) []SharedIP {
	holders := map[netip.Addr][]string{}
	for i := range svcs {
		s := &svcs[i]
		if s.Spec.Type != corev1.ServiceTypeLoadBalancer {
			continue
		}
		for _, in := range s.Status.LoadBalancer.Ingress {
			if ip, err := netip.ParseAddr(in.IP); err == nil {
				holders[ip.Unmap()] = append(holders[ip.Unmap()], s.Namespace+"/"+s.Name)
			}
		}
	}
	var out []SharedIP
	for ip, keys := range holders {
		namespaces := map[string]bool{}
		for _, k := range keys {
			ns, _, _ := strings.Cut(k, "/")
			namespaces[ns] = true
		}
		if len(namespaces) < 2 {
			continue
		}
		slices.Sort(keys)
		out = append(out, SharedIP{IP: ip.String(), Services: keys, Pool: poolHolding(pools, ip)})
	}
	slices.SortFunc(out, func(a, b SharedIP) int {
		return netip.MustParseAddr(a.IP).Compare(netip.MustParseAddr(b.IP))
	})
	return out
}

// poolHolding names the converted IPAddressPool whose addresses contain ip.
func poolHolding(objs []*unstructured.Unstructured, ip netip.Addr) string {
	for _, o := range objs {
		if o.GetKind() != "IPAddressPool" {
			continue
		}
		addrs, _, _ := unstructured.NestedStringSlice(o.Object, "spec", "addresses")
		ranges, err := ipam.ParseAddresses(addrs)
		if err != nil {
			continue
		}
		for _, r := range ranges {
			if r.Contains(ip) {
				return o.GetName()
			}
		}
	}
	return ""
}

// WriteSharedIPs tells the user which pools need allowCrossNamespaceSharing to keep
// MetalLB's sharing across namespaces.
func WriteSharedIPs(w io.Writer, shared []SharedIP) {
	for _, s := range shared {
		where := "the pool holding it"
		if s.Pool != "" {
			where = fmt.Sprintf("IPAddressPool %q", s.Pool)
		}
		fmt.Fprintf(w, "warning: IP %s is shared by Services of different namespaces (%s). herald shares an IP across namespaces only when its pool allows it: set spec.allowCrossNamespaceSharing: true on %s, or only the oldest of them keeps the IP and the others get new ones.\n",
			s.IP, strings.Join(s.Services, ", "), where)
	}
}
