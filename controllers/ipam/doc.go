// Package ipam is herald's IP allocator: pure Go with plain inputs and outputs, no
// Kubernetes client and no I/O. The reconcilers in controllers/ translate Services and
// IPAddressPools into the types of this package, call the Allocator and write back what
// it decides.
//
// Rules (docs/allocation.md says them to users):
//   - an assigned IP is never taken from a Service unless the Service asks for another
//     (requested IPs or pool annotation changed) or goes away;
//   - a fresh pool gives its addresses in ascending order; a freed address is handed out
//     again only after every never-used one, least recently freed first;
//   - free addresses are found without scanning the addresses in use;
//   - an address a device on the network claims (SetConflicts: the speakers saw a host
//     that is no herald speaker answer for it) goes to no new allocation, automatic or
//     requested, since it would not work; a Service holding it keeps it. Once the
//     conflict clears it is handed out again, after every other free address.
//
// Layout: allocator.go holds the state and the bookkeeping of IPs in use; allocate.go
// the decision (Allocate); restore.go the rebuild at start; setpools.go pool changes;
// conflicts.go addresses in conflict; poolcheck.go overlap and validity checks;
// selection.go which pools a Service may use; freeset.go the free addresses of a pool
// (a btree of never-used ranges, a FIFO of recycled addresses, and the addresses
// withheld for a conflict); sharing.go and shareindex.go IP sharing; parse.go
// spec.addresses. The Allocator is not safe for concurrent use.
package ipam
