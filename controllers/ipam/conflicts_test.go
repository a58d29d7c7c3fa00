package ipam

import (
	"testing"
)

// conflict marks ips as the addresses in conflict; added are those newly so.
func conflict(ips []string, added ...string) step {
	return step{setConflicts: true, conflicts: ips, want: added}
}

// clearAll ends every conflict; cleared are those that were.
func clearAll(cleared ...string) step {
	return step{setConflicts: true, cleared: cleared}
}

func stats(pool string, st PoolStats) step { return step{stats: pool, wantStats: st} }

// TestConflicts covers addresses that devices on the network claim (SetConflicts): new
// allocations avoid them, holders keep them, requests for them fail, and they return
// to the pool, last, when the conflict clears.
func TestConflicts(t *testing.T) {
	runTable(t, []tableCase{
		{name: "automatic allocation skips a conflicting address; it fails when only those are left", pools: onePool("a", []string{"10.0.0.0/30"}), steps: []step{
			conflict([]string{"10.0.0.0"}, "10.0.0.0"),
			stats("a", PoolStats{AvailableIPv4: 3, ConflictIPv4: 1}),
			{alloc: alloc(mkSvc("ns/1")), want: []string{"10.0.0.1"}, wantPool: "a"},
			{alloc: alloc(mkSvc("ns/2")), want: []string{"10.0.0.2"}, wantPool: "a"},
			{alloc: alloc(mkSvc("ns/3")), want: []string{"10.0.0.3"}, wantPool: "a"},
			{alloc: alloc(mkSvc("ns/4")), wantErr: ErrNoAvailableIPs,
				errText: `no available IPs in pool "a" (IPv4: 3 of 4 in use; the free address 10.0.0.0 is in conflict with a device on the network)`},
			stats("a", PoolStats{AssignedIPv4: 3, ConflictIPv4: 1}),
			// The same set again changes nothing.
			conflict([]string{"10.0.0.0"}),
			clearAll("10.0.0.0"),
			stats("a", PoolStats{AssignedIPv4: 3, AvailableIPv4: 1}),
			{alloc: alloc(mkSvc("ns/4")), want: []string{"10.0.0.0"}, wantPool: "a"},
		}},
		{name: "a cleared address is handed out after every other free address", pools: onePool("a", []string{"10.0.0.0/30"}), steps: []step{
			conflict([]string{"10.0.0.0"}, "10.0.0.0"),
			{alloc: alloc(mkSvc("ns/1")), want: []string{"10.0.0.1"}, wantPool: "a"},
			{release: "ns/1", want: []string{"10.0.0.1"}},
			clearAll("10.0.0.0"),
			{alloc: alloc(mkSvc("ns/2")), want: []string{"10.0.0.2"}, wantPool: "a"},
			{alloc: alloc(mkSvc("ns/3")), want: []string{"10.0.0.3"}, wantPool: "a"},
			{alloc: alloc(mkSvc("ns/4")), want: []string{"10.0.0.1"}, wantPool: "a"},
			{alloc: alloc(mkSvc("ns/5")), want: []string{"10.0.0.0"}, wantPool: "a"},
		}},
		{name: "a recycled address in conflict leaves the queue", pools: onePool("a", []string{"10.0.0.0/31"}), steps: []step{
			{alloc: alloc(mkSvc("ns/1")), want: []string{"10.0.0.0"}, wantPool: "a"},
			{alloc: alloc(mkSvc("ns/2")), want: []string{"10.0.0.1"}, wantPool: "a"},
			{release: "ns/1", want: []string{"10.0.0.0"}},
			{release: "ns/2", want: []string{"10.0.0.1"}},
			conflict([]string{"10.0.0.0"}, "10.0.0.0"),
			{alloc: alloc(mkSvc("ns/3")), want: []string{"10.0.0.1"}, wantPool: "a"},
		}},
		{name: "a Service holding the address keeps it; freed, it is withheld", pools: onePool("a", []string{"10.0.0.0/30"}), steps: []step{
			{alloc: alloc(mkSvc("ns/1")), want: []string{"10.0.0.0"}, wantPool: "a"},
			conflict([]string{"10.0.0.0"}, "10.0.0.0"),
			// In use and claimed: counted in use, not as a conflict.
			stats("a", PoolStats{AssignedIPv4: 1, AvailableIPv4: 3}),
			{alloc: alloc(mkSvc("ns/1", ports("TCP/80"))), want: []string{"10.0.0.0"}, wantPool: "a", wantChanged: no()},
			{alloc: alloc(mkSvc("ns/1", requested("10.0.0.0"))), want: []string{"10.0.0.0"}, wantPool: "a", wantChanged: no()},
			{release: "ns/1", want: []string{"10.0.0.0"}},
			stats("a", PoolStats{AvailableIPv4: 3, ConflictIPv4: 1}),
			{alloc: alloc(mkSvc("ns/2")), want: []string{"10.0.0.1"}, wantPool: "a"},
			// A Service that held it before the controller restarted keeps it too.
			{restore: alloc(mkSvc("ns/3")), ips: []string{"10.0.0.0"}, pool: "a"},
			stats("a", PoolStats{AssignedIPv4: 2, AvailableIPv4: 2}),
		}},
		{name: "a requested address in conflict is refused until the conflict clears", pools: onePool("a", []string{"10.0.0.0/30"}), steps: []step{
			conflict([]string{"10.0.0.2"}, "10.0.0.2"),
			{alloc: alloc(mkSvc("ns/1", requested("10.0.0.2"))), wantErr: ErrIPConflict,
				errText: "requested IP 10.0.0.2 is in conflict with a device on the network"},
			stats("a", PoolStats{AvailableIPv4: 3, ConflictIPv4: 1}),
			// Asking for it instead of another address gives up the other one.
			{alloc: alloc(mkSvc("ns/2", requested("10.0.0.1"))), want: []string{"10.0.0.1"}, wantPool: "a"},
			{alloc: alloc(mkSvc("ns/2", requested("10.0.0.2"))), wantErr: ErrIPConflict, wantChanged: yes()},
			clearAll("10.0.0.2"),
			{alloc: alloc(mkSvc("ns/1", requested("10.0.0.2"))), want: []string{"10.0.0.2"}, wantPool: "a"},
		}},
		{name: "a dual-stack Service asking for one more IP keeps its conflicting one", pools: onePool("d", []string{"10.0.0.0/30", "fc00::/126"}), steps: []step{
			{alloc: alloc(mkSvc("ns/1", requested("10.0.0.3"))), want: []string{"10.0.0.3"}, wantPool: "d"},
			conflict([]string{"10.0.0.3", "fc00::1"}, "10.0.0.3", "fc00::1"),
			stats("d", PoolStats{AssignedIPv4: 1, AvailableIPv4: 3, AvailableIPv6: 3, ConflictIPv6: 1}),
			{alloc: alloc(mkSvc("ns/1", families(RequireDualStack, IPv4, IPv6), requested("10.0.0.3", "fc00::2"))),
				want: []string{"10.0.0.3", "fc00::2"}, wantPool: "d", wantChanged: yes()},
			// Adding the other family automatically skips the conflicting address.
			{alloc: alloc(mkSvc("ns/2", requested("10.0.0.0"))), want: []string{"10.0.0.0"}, wantPool: "d"},
			{alloc: alloc(mkSvc("ns/2", families(PreferDualStack, IPv4, IPv6))), want: []string{"10.0.0.0", "fc00::"}, wantPool: "d", wantChanged: yes()},
			{alloc: alloc(mkSvc("ns/3", families(SingleStack, IPv6))), want: []string{"fc00::3"}, wantPool: "d"},
		}},
		{name: "sharing Services do not join an IP in conflict", pools: onePool("a", []string{"10.0.0.0/30"}), steps: []step{
			{alloc: alloc(mkSvc("ns/1", sharing("k"), ports("TCP/80"))), want: []string{"10.0.0.0"}, wantPool: "a"},
			{alloc: alloc(mkSvc("ns/2", sharing("k"), ports("TCP/81"))), want: []string{"10.0.0.0"}, wantPool: "a"},
			conflict([]string{"10.0.0.0"}, "10.0.0.0"),
			{alloc: alloc(mkSvc("ns/3", sharing("k"), ports("TCP/82"))), want: []string{"10.0.0.1"}, wantPool: "a"},
			{alloc: alloc(mkSvc("ns/4", sharing("k"), ports("TCP/83"), requested("10.0.0.0"))), wantErr: ErrIPConflict, errText: "10.0.0.0"},
			// Its holders keep it.
			{alloc: alloc(mkSvc("ns/2", sharing("k"), ports("TCP/81"))), want: []string{"10.0.0.0"}, wantPool: "a", wantChanged: no()},
			clearAll("10.0.0.0"),
			{alloc: alloc(mkSvc("ns/4", sharing("k"), ports("TCP/83"))), want: []string{"10.0.0.0"}, wantPool: "a"},
		}},
		{name: "several pools: the error names the conflicts of each", pools: func(t *testing.T) []Pool {
			return []Pool{mkPool(t, "a", []string{"10.0.1.0/32"}), mkPool(t, "b", []string{"10.0.2.0/32"})}
		}, steps: []step{
			conflict([]string{"10.0.1.0"}, "10.0.1.0"),
			{alloc: alloc(mkSvc("ns/1")), want: []string{"10.0.2.0"}, wantPool: "b"},
			{alloc: alloc(mkSvc("ns/2")), wantErr: ErrNoAvailableIPs,
				errText: `no available IPs in pools "a" (IPv4: 0 of 1 in use; the free address 10.0.1.0 is in conflict with a device on the network), "b" (IPv4: 1 of 1 in use)`},
		}},
		{name: "many conflicts: counted, a few named", pools: onePool("a", []string{"10.0.0.0/29"}), steps: []step{
			conflict([]string{"10.0.0.7", "10.0.0.6", "10.0.0.5", "10.0.0.4", "10.0.0.3", "10.0.0.2"},
				"10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5", "10.0.0.6", "10.0.0.7"),
			{alloc: alloc(mkSvc("ns/1")), want: []string{"10.0.0.0"}, wantPool: "a"},
			{alloc: alloc(mkSvc("ns/2")), want: []string{"10.0.0.1"}, wantPool: "a"},
			{alloc: alloc(mkSvc("ns/3")), wantErr: ErrNoAvailableIPs,
				errText: "IPv4: 2 of 8 in use; the 6 free addresses (10.0.0.2, 10.0.0.3, 10.0.0.4, 10.0.0.5, ...) are in conflict with devices on the network"},
			stats("a", PoolStats{AssignedIPv4: 2, ConflictIPv4: 6}),
			{setConflicts: true, conflicts: []string{"10.0.0.3", "10.0.0.2"}, cleared: []string{"10.0.0.4", "10.0.0.5", "10.0.0.6", "10.0.0.7"}},
			stats("a", PoolStats{AssignedIPv4: 2, AvailableIPv4: 4, ConflictIPv4: 2}),
			{alloc: alloc(mkSvc("ns/3")), want: []string{"10.0.0.4"}, wantPool: "a"},
			{alloc: alloc(mkSvc("ns/4", requested("10.0.0.3"))), wantErr: ErrIPConflict},
		}},
		{name: "conflicts follow pool changes; .0/.255 avoided and disabled pools count none", steps: []step{
			conflict([]string{"10.0.5.0", "10.0.5.1", "::ffff:10.0.5.2", "192.0.2.1"}, "10.0.5.0", "10.0.5.1", "10.0.5.2", "192.0.2.1"),
			{setPools: []Pool{mkPool(t, "p", []string{"10.0.5.0/30"}, avoidBuggy)}},
			stats("p", PoolStats{AvailableIPv4: 1, ConflictIPv4: 2}),
			{alloc: alloc(mkSvc("ns/1")), want: []string{"10.0.5.3"}, wantPool: "p"},
			{setPools: []Pool{mkPool(t, "p", []string{"10.0.5.0/29"})}},
			stats("p", PoolStats{AssignedIPv4: 1, AvailableIPv4: 4, ConflictIPv4: 3}),
			{alloc: alloc(mkSvc("ns/2")), want: []string{"10.0.5.4"}, wantPool: "p"},
			{setPools: []Pool{mkPool(t, "p", []string{"10.0.5.0/29"}, terminating)}},
			stats("p", PoolStats{AssignedIPv4: 2}),
			{setPools: []Pool{mkPool(t, "p", []string{"10.0.5.0/29"}), mkPool(t, "q", []string{"10.0.5.0/30"}, createdAt(1))},
				problems: []string{"q:Overlap:"}},
			stats("q", PoolStats{}),
			{setPools: []Pool{mkPool(t, "p", []string{"10.0.5.4/30"})}},
			stats("p", PoolStats{AssignedIPv4: 1, AvailableIPv4: 3}),
			{setPools: []Pool{mkPool(t, "p", []string{"10.0.5.0/29"})}},
			clearAll("10.0.5.0", "10.0.5.1", "10.0.5.2", "192.0.2.1"),
			stats("p", PoolStats{AssignedIPv4: 2, AvailableIPv4: 6}),
			// Cleared addresses come last, in address order.
			{alloc: alloc(mkSvc("ns/3")), want: []string{"10.0.5.5"}, wantPool: "p"},
			{alloc: alloc(mkSvc("ns/4")), want: []string{"10.0.5.6"}, wantPool: "p"},
			{alloc: alloc(mkSvc("ns/5")), want: []string{"10.0.5.7"}, wantPool: "p"},
			{alloc: alloc(mkSvc("ns/6")), want: []string{"10.0.5.0"}, wantPool: "p"},
		}},
	})
}
