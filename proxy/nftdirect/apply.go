package nftdirect

import (
	"fmt"

	"github.com/google/nftables"
)

// Apply sends the batch to the kernel of the calling thread's network namespace as
// one netlink transaction: all of it takes effect or none does, as with nft -f.
func (b *Batch) Apply() error {
	conn, err := nftables.New()
	if err != nil {
		return fmt.Errorf("netlink: %w", err)
	}
	table := &nftables.Table{Name: b.table, Family: b.family}
	for _, o := range b.ops {
		chain := &nftables.Chain{Name: o.chain, Table: table}
		set := &nftables.Set{Name: o.chain, Table: table}
		elements := []nftables.SetElement{{Key: o.key}}
		switch o.kind {
		case addChain:
			conn.AddChain(chain)
		case flushChain:
			conn.FlushChain(chain)
		case deleteChain:
			conn.DelChain(chain)
		case addRule:
			conn.AddRule(&nftables.Rule{Table: table, Chain: chain, Exprs: o.exprs, UserData: o.userData})
		case addElement:
			err = conn.SetAddElements(set, elements)
		case deleteElement:
			err = conn.SetDeleteElements(set, elements)
		}
		if err != nil {
			return fmt.Errorf("netlink: set %s: %w", o.chain, err)
		}
	}
	if err := conn.Flush(); err != nil {
		return fmt.Errorf("netlink transaction on table %s: %w", b.table, err)
	}
	return nil
}
