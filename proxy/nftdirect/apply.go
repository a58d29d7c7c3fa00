package nftdirect

import (
	"fmt"

	"github.com/google/nftables"
)

// Conn is a netlink socket to nf_tables, bound to the network namespace of the thread
// that opened it, kept open across batches. Closing a socket that committed a
// transaction makes the kernel wait for the release of what the transaction replaced
// (an RCU grace period among it), which costs a one-endpoint sync more than the rest
// of its work (docs/nftables.md). A socket kept open leaves that release to the
// kernel's background work.
type Conn struct {
	c *nftables.Conn
}

// Open opens a Conn in the calling thread's network namespace.
func Open() (*Conn, error) {
	c, err := nftables.New(nftables.AsLasting())
	if err != nil {
		return nil, fmt.Errorf("netlink: %w", err)
	}
	return &Conn{c: c}, nil
}

// Close closes the socket.
func (c *Conn) Close() error { return c.c.CloseLasting() }

// Apply sends the batch as one netlink transaction: all of it takes effect or none
// does, as with nft -f. After an error the Conn must be closed: the library keeps a
// serialization error, and acknowledgements may be left unread.
func (c *Conn) Apply(b *Batch) error {
	table := &nftables.Table{Name: b.table, Family: b.family}
	for _, o := range b.ops {
		chain := &nftables.Chain{Name: o.chain, Table: table}
		set := &nftables.Set{Name: o.chain, Table: table}
		elements := []nftables.SetElement{{Key: o.key}}
		var err error
		switch o.kind {
		case addChain:
			c.c.AddChain(chain)
		case flushChain:
			c.c.FlushChain(chain)
		case deleteChain:
			c.c.DelChain(chain)
		case addRule:
			c.c.AddRule(&nftables.Rule{Table: table, Chain: chain, Exprs: o.exprs, UserData: o.userData})
		case addElement:
			err = c.c.SetAddElements(set, elements)
		case deleteElement:
			err = c.c.SetDeleteElements(set, elements)
		}
		if err != nil {
			return fmt.Errorf("netlink: set %s: %w", o.chain, err)
		}
	}
	if err := c.c.Flush(); err != nil {
		return fmt.Errorf("netlink transaction on table %s: %w", b.table, err)
	}
	return nil
}
