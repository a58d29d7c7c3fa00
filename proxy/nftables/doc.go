// Package nftables generates kube-proxy's nftables mode (k8s.io/kubernetes v1.36,
// pkg/proxy/nftables) for herald's proxier as knftables transactions, from the same
// model as the iptables generator.
//
// Chains, sets, maps and rule text are kube-proxy's, in a table of herald's own
// (TableName, in the ip and ip6 families). A Table keeps what the kernel's table holds
// after each committed Update, so that:
//
//   - a full sync deletes and recreates the table in one transaction: atomic, and no
//     listing or flushing of what was there;
//   - a partial sync resolves only the services that changed and writes only their
//     chains whose rules differ and their elements whose value differs: its cost does
//     not grow with the number of Services (kube-proxy lists every chain and every
//     element of the table on each sync);
//   - chains no longer used are flushed at once and deleted StaleChainDelay later
//     (StaleChains), as kube-proxy does for kernels before 6.2.
//
// A shell's loop:
//
//	u, err := table.Sync(nft.NewTransaction(), snap, changed, now) // changed nil: full
//	if err := nft.Run(ctx, u.Tx); err != nil { table.Reset() } else { u.Commit() }
//
// Files: names.go (names and hashing), node.go (per-node settings), setup.go (the
// shared chains, sets and maps), service.go (one service's objects), table.go
// (Table, Update: full and partial syncs).
package nftables
