// Package claims is the speakers' book of who announces what. Each speaker publishes
// its claims to its peers over memberlist (a Set: per IP it announces, the rebalance
// token of its Services when it took the IP, the nodes it stood in for, and a Gen).
// The election counts the current claims as incumbents (Incumbents), which is what
// keeps an IP on the node announcing it when its hash node comes back (no fail-back):
//
//   - a claim is current while its token equals the IP's rebalance token now (Tokens):
//     `herald rebalance` changes the token, and the IP goes to its hash node once;
//   - where several nodes claim an IP, the latest taker wins: the highest Gen, a
//     takeover claiming one more than the highest it knew (Gens);
//   - a node's claim lists the nodes the hash ranked before it (Over): those do not
//     take the IP back.
//
// A speaker stopping on SIGTERM leaves its claims in its node's state directory
// (Save); the next speaker of the node reads them back once (Load) and publishes them
// before it joins (Book.Restore), so that a restart moves nothing.
//
// Book holds one speaker's side of it: its own claims, the decoded claims of its live
// and lost peers, and what a takeover claims. Everything but Book is pure.
package claims
