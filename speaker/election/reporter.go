package election

import "slices"

// IsReporter says whether self is the one speaker that reports for the cluster what
// no owner reports (IPs without an owner, in Events and VIPStatus objects; the nodes
// whose endpoints are withheld): the live member with the smallest name, which every
// speaker that hears the same members picks alike.
func IsReporter(live []string, self string) bool {
	return len(live) > 0 && slices.Min(live) == self
}
