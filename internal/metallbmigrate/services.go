package metallbmigrate

import (
	"fmt"
	"io"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	heraldv1 "herald.dev/herald/api/v1beta1"
)

// ServiceNote is one Service that carries MetalLB's annotations.
type ServiceNote struct {
	Service     string   // namespace/name
	IPs         []string // status.loadBalancer.ingress
	Annotations []string // MetalLB's, as name=value
	// Problems are what would go wrong under herald with the converted objects.
	Problems []string
}

// readAliases are the herald annotations whose MetalLB names herald reads.
var readAliases = []string{
	heraldv1.AnnotationLoadBalancerIPs,
	heraldv1.AnnotationAddressPool,
	heraldv1.AnnotationAllowSharedIP,
	heraldv1.AnnotationAllocatedFromPool,
}

// SummarizeServices lists the Services with MetalLB annotations, sorted, and what
// would go wrong for them once herald serves them with the given pools: a pool they
// ask for that herald will not have (the Service keeps its IP, with a Warning, but
// gets no other until such a pool exists), a MetalLB annotation herald does not read.
func SummarizeServices(svcs []corev1.Service, pools []string) []ServiceNote {
	known := map[string]bool{}
	for _, a := range readAliases {
		for _, n := range heraldv1.MetalLBAliases(a) {
			known[n] = true
		}
	}
	var out []ServiceNote
	for i := range svcs {
		s := &svcs[i]
		n := ServiceNote{Service: s.Namespace + "/" + s.Name}
		for k, v := range s.Annotations {
			if !strings.HasPrefix(k, heraldv1.MetalLBPrefix) && !strings.HasPrefix(k, heraldv1.MetalLBLegacyPrefix) {
				continue
			}
			n.Annotations = append(n.Annotations, k+"="+v)
			if !known[k] {
				n.Problems = append(n.Problems, fmt.Sprintf("herald does not read %s", k))
			}
		}
		if len(n.Annotations) == 0 {
			continue
		}
		for _, in := range s.Status.LoadBalancer.Ingress {
			if in.IP != "" {
				n.IPs = append(n.IPs, in.IP)
			}
		}
		pool := heraldv1.LookupAnnotation(s.Annotations, heraldv1.AnnotationAddressPool)
		if pool.Value != "" && !slices.Contains(pools, pool.Value) {
			n.Problems = append(n.Problems, fmt.Sprintf("%s asks for pool %q, which herald will not have: the Service keeps its IP with an AllocationFailed Warning until a pool of that name exists", pool.From, pool.Value))
		}
		slices.Sort(n.Annotations)
		slices.Sort(n.Problems)
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b ServiceNote) int { return strings.Compare(a.Service, b.Service) })
	return out
}

// WriteServiceSummary prints notes for a person: one line per Service, then its
// problems indented.
func WriteServiceSummary(w io.Writer, notes []ServiceNote) {
	if len(notes) == 0 {
		fmt.Fprintln(w, "No Service carries MetalLB annotations.")
		return
	}
	fmt.Fprintf(w, "%d Service(s) carry MetalLB annotations; herald reads them as they are (herald.dev/ names win where both are set):\n", len(notes))
	for _, n := range notes {
		ips := "no IP"
		if len(n.IPs) > 0 {
			ips = strings.Join(n.IPs, ",")
		}
		fmt.Fprintf(w, "  %s (%s): %s\n", n.Service, ips, strings.Join(n.Annotations, " "))
		for _, p := range n.Problems {
			fmt.Fprintf(w, "    problem: %s\n", p)
		}
	}
}
