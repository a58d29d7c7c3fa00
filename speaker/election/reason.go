package election

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// Reason says, in one machine-readable word fit for an Event reason, why an IP has no
// owner.
type Reason string

// Reasons an IP of a Service is announced by nobody: first those of the Services holding
// it (none active), then those of the nodes (no candidate left).
const (
	// ReasonNoPool: the IP is in no IPAddressPool.
	ReasonNoPool Reason = "NoPool"
	// ReasonNoAdvertisement: no L2Advertisement announces the pool, or their
	// serviceSelectors refuse the Service.
	ReasonNoAdvertisement Reason = "NoAdvertisement"
	// ReasonNoEndpoints: no endpoint of the Service is ready or serving, on any node.
	ReasonNoEndpoints Reason = "NoEndpoints"

	// ReasonNoLiveSpeaker: no live memberlist member with a Node object.
	ReasonNoLiveSpeaker Reason = "NoLiveSpeaker"
	// ReasonNetworkUnavailable: the remaining nodes have NetworkUnavailable=True.
	ReasonNetworkUnavailable Reason = "NetworkUnavailable"
	// ReasonExcluded: the remaining nodes carry ExcludeLabel.
	ReasonExcluded Reason = "Excluded"
	// ReasonNotSelected: the nodeSelectors of the advertisements select none of the
	// remaining nodes.
	ReasonNotSelected Reason = "NotSelected"
	// ReasonNoLocalEndpoint: externalTrafficPolicy Local and none of the remaining nodes
	// has a ready or serving endpoint of the Service.
	ReasonNoLocalEndpoint Reason = "NoLocalEndpoint"
)

// serviceReasonOrder ranks the Service reasons by how far the Service got.
var serviceReasonOrder = []Reason{ReasonNoPool, ReasonNoAdvertisement, ReasonNoEndpoints}

// inactiveReason explains a group none of whose Services is active. The reason is that
// of the Service that got furthest; the message gives every Service's.
func inactiveReason(g *group, services []service) (Reason, string) {
	var reason Reason
	var details []string
	for _, sv := range services {
		if slices.Index(serviceReasonOrder, sv.reason) > slices.Index(serviceReasonOrder, reason) {
			reason = sv.reason
		}
		details = append(details, sv.detail)
	}
	return reason, fmt.Sprintf("not announcing %s: %s", ipList(g.ips), strings.Join(sortedSet(details), "; "))
}

// stage is one filter that removed live nodes.
type stage struct {
	reason           Reason
	nodes            []string
	singular, plural string // predicate for one node / several
}

// noCandidate explains a group with active Services but no candidate: it walks the
// filters in order, names what each removed, and returns the reason of the last one that
// removed anything (the one that removed the last candidates).
func (c *cluster) noCandidate(g *group, active []*service, selected bitset) (Reason, string) {
	prefix := "no node may announce " + ipList(g.ips) + ": "
	if c.live == 0 {
		return ReasonNoLiveSpeaker, prefix + "no speaker is alive"
	}
	var notSelected, noEndpoint []string
	for i, n := range c.names {
		if selected.has(i) {
			noEndpoint = append(noEndpoint, n)
		} else {
			notSelected = append(notSelected, n)
		}
	}
	var adNames, localServices []string
	for _, sv := range active {
		for _, a := range sv.ads {
			adNames = append(adNames, c.ads[a].Name)
		}
		if sv.Local {
			localServices = append(localServices, sv.Key)
		}
	}
	ads := strings.Join(sortedSet(adNames), ", ")
	locals := strings.Join(sortedSet(localServices), ", ")
	stages := []stage{
		{ReasonNoLiveSpeaker, c.unknown, "has no Node object", "have no Node object"},
		{ReasonNetworkUnavailable, c.unavailable, "has condition NetworkUnavailable=True", "have condition NetworkUnavailable=True"},
		{ReasonExcluded, c.excluded, "is excluded (label " + ExcludeLabel + ")", "are excluded (label " + ExcludeLabel + ")"},
		{ReasonNotSelected, notSelected, "is not selected by the nodeSelectors of L2Advertisement " + ads,
			"are not selected by the nodeSelectors of L2Advertisement " + ads},
		{ReasonNoLocalEndpoint, noEndpoint, "has no ready or serving endpoint of " + locals + " (externalTrafficPolicy Local)",
			"have no ready or serving endpoint of " + locals + " (externalTrafficPolicy Local)"},
	}
	var reason Reason
	var parts []string
	for _, s := range stages {
		if len(s.nodes) == 0 {
			continue
		}
		reason = s.reason
		verb := s.plural
		if len(s.nodes) == 1 {
			verb = s.singular
		}
		parts = append(parts, fmt.Sprintf("%d (%s) %s", len(s.nodes), nameList(s.nodes), verb))
	}
	if len(parts) == 1 { // one filter removed everybody: say it plainly
		s := stages[slices.IndexFunc(stages, func(s stage) bool { return s.reason == reason })]
		if c.live == 1 {
			return reason, fmt.Sprintf("%sthe only candidate, %s, %s", prefix, s.nodes[0], s.singular)
		}
		return reason, fmt.Sprintf("%sall %d candidates (%s) %s", prefix, c.live, nameList(s.nodes), s.plural)
	}
	return reason, fmt.Sprintf("%sof %d candidates, %s", prefix, c.live, strings.Join(parts, ", "))
}

// nameList names up to three nodes, so a message stays short on large clusters.
func nameList(names []string) string {
	const shown = 3
	if len(names) <= shown {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:shown], ", "), len(names)-shown)
}

func ipList(ips []netip.Addr) string {
	s := make([]string, len(ips))
	for i, ip := range ips {
		s[i] = ip.String()
	}
	return strings.Join(s, ", ")
}
