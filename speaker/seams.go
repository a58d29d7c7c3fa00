package speaker

import (
	"context"
	"net/netip"
	"time"

	"herald.dev/herald/speaker/layer2"
	"herald.dev/herald/speaker/members"
	"herald.dev/herald/speaker/quorum"
	"herald.dev/herald/speaker/records"
)

// The speaker's loop and its election pass reach memberlist, the records and the
// announcer through these interfaces, so that a unit test can drive a pass with fakes
// (pass_test.go). Run holds the concrete types for their lifecycles: start, stop,
// keys, metrics.

// gossip is what the loop reads of the membership and tells the peers
// (members.Members).
type gossip interface {
	Snapshot() members.Snapshot
	Events() <-chan struct{}
	LeftGracefully(node string) bool
	Release(node string)
	Publish(state []byte)
	SetMeta(meta []byte) bool
	Join(addrs []string) (int, error)
	Sync(addrs []string, timeout time.Duration) int
}

// recordKeeper is what the loop reads of the speakers' records and asks to write of
// its own (records.Keeper).
type recordKeeper interface {
	Status() (up bool, lastWrite, readAt time.Time)
	List(ctx context.Context, heard []string) ([]quorum.Record, error)
	ListAfresh(ctx context.Context, since time.Time, heard []string) ([]quorum.Record, error)
	Live(recs []quorum.Record, heard []string, now time.Time) []quorum.Record
	Decided(m quorum.Mode, expected, unheard int)
	Misses(expected, heard []string) []string
	Want(w records.Wish)
	Observe(unreachable int)
}

// announcer is what the loop makes answer ARP and NDP (layer2.Announcer).
type announcer interface {
	Set(holder string, ip netip.Addr, interfaces []string, opts ...layer2.SetOption) error
	Withdraw(holder string, ip netip.Addr)
	Reannounce(ip netip.Addr)
	Responders() []layer2.ResponderInfo
	Conflict(ip netip.Addr) (layer2.Conflict, bool)
	Ready() bool
	Resume()
}

var (
	_ gossip       = (*members.Members)(nil)
	_ recordKeeper = (*records.Keeper)(nil)
	_ announcer    = (*layer2.Announcer)(nil)
)
