package handover

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"herald.dev/herald/proxy/runner"
)

// Forwarder begins and ends this node's handover forwarding. Safe for concurrent use.
type Forwarder struct {
	nft *runner.NFT // nil: nft is missing, nothing is forwarded
	cfg Config
	log logr.Logger
	now func() time.Time
	// ended is told of each forwarding that ended, with what it carried and why it
	// ended.
	ended func(Forward, Count, string)

	mu     sync.Mutex
	active map[netip.Addr]Forward
	saving sync.Mutex // held while the state file is written
}

// Config is a node's forwarder's.
type Config struct {
	// Node names this node; Drain is how long a handover forwards (0: none).
	Node  string
	Drain time.Duration
	// StateDir keeps the forwardings in effect for the next speaker of the node ("":
	// nowhere).
	StateDir string
}

// NewForwarder returns the forwarder of a node. Without the nft binary it returns a
// forwarder that forwards nothing and, unless cfg.Drain is 0, the error saying so.
func NewForwarder(cfg Config, log logr.Logger, ended func(Forward, Count, string)) (*Forwarder, error) {
	f := &Forwarder{cfg: cfg, log: log, now: time.Now, ended: ended, active: map[netip.Addr]Forward{}}
	nft, err := runner.NewNFT(nil)
	if err != nil {
		if cfg.Drain <= 0 {
			return f, nil
		}
		return f, fmt.Errorf("handover forwarding is off: %w", err)
	}
	f.nft = nft
	return f, nil
}

// On says whether this forwarder forwards anything.
func (f *Forwarder) On() bool { return f.nft != nil && f.cfg.Drain > 0 }

// Reset replaces the handover chains on the node, in one transaction, with those of
// the forwardings the previous speaker of the node saved whose drain period has not
// ended, and returns them: a speaker restart breaks no forwarded flow. It removes every
// other chain, forwarding or not: their old owners may have gone since. The caller ends
// those it no longer wants (the old owner gone, the VIP elsewhere).
func (f *Forwarder) Reset(ctx context.Context) ([]Forward, error) {
	if f.nft == nil {
		return nil, nil
	}
	var kept []Forward
	if f.On() {
		var err error
		if kept, err = loadForwards(f.cfg.StateDir, f.cfg.Node, f.now()); err != nil {
			f.log.Error(err, "the flows of earlier handovers are no longer forwarded")
		}
	}
	script := resetScript()
	for _, fw := range kept {
		script += startScript(fw)
	}
	if err := f.nft.Apply(ctx, script); err != nil {
		return nil, err
	}
	f.mu.Lock()
	for _, fw := range kept {
		f.active[fw.IP] = fw
	}
	f.mu.Unlock()
	return kept, nil
}

// save keeps the forwardings in effect for the next speaker of the node. The loop
// (Start, End) and Run (End) both save: one at a time, each what is in effect then.
func (f *Forwarder) save() {
	f.saving.Lock()
	defer f.saving.Unlock()
	if err := saveForwards(f.cfg.StateDir, f.cfg.Node, f.Active()); err != nil {
		f.log.Error(err, "keeping the handovers for the next speaker")
	}
}

// Start begins forwarding fw.IP's unknown TCP segments to fw.To for the drain period.
// It returns once the chain is in place: the caller may then announce the VIP.
func (f *Forwarder) Start(ctx context.Context, fw Forward) error {
	if !f.On() {
		return nil
	}
	fw.Since = f.now()
	fw.Until = fw.Since.Add(f.cfg.Drain)
	if err := f.nft.Apply(ctx, startScript(fw)); err != nil {
		return fmt.Errorf("forwarding %s to %s (%s): %w", fw.IP, fw.From, fw.To, err)
	}
	f.mu.Lock()
	f.active[fw.IP] = fw
	f.mu.Unlock()
	f.save()
	return nil
}

// End stops forwarding ip, if it was forwarded, and reports why.
func (f *Forwarder) End(ctx context.Context, ip netip.Addr, why string) {
	f.mu.Lock()
	fw, ok := f.active[ip]
	delete(f.active, ip)
	f.mu.Unlock()
	if !ok {
		return
	}
	count, err := f.count(ctx, ip)
	if err != nil {
		f.log.Error(err, "reading what a handover forwarded", "ip", ip)
	}
	if err := f.nft.Apply(ctx, endScript(ip)); err != nil {
		f.log.Error(err, "ending a handover's forwarding", "ip", ip, "oldOwner", fw.From)
	}
	f.save()
	f.ended(fw, count, why)
}

// EndWhere ends the forwarding of every VIP whose Forward matches.
func (f *Forwarder) EndWhere(ctx context.Context, match func(Forward) bool, why string) {
	for _, fw := range f.Active() {
		if match(fw) {
			f.End(ctx, fw.IP, why)
		}
	}
}

// Active returns the forwardings in effect, by VIP.
func (f *Forwarder) Active() []Forward {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.SortedFunc(maps.Values(f.active), func(a, b Forward) int { return a.IP.Compare(b.IP) })
}

// count reads what the forwarding of ip carried so far.
func (f *Forwarder) count(ctx context.Context, ip netip.Addr) (Count, error) {
	out, err := f.nft.ListJSON(ctx, runner.NFTTable{Family: family(ip), Name: Table})
	if err != nil {
		return Count{}, err
	}
	packets, elems, err := parseCounts(out)
	if err != nil {
		return Count{}, err
	}
	chain, set := names(ip)
	return Count{Flows: elems[set], Packets: packets[chain]}, nil
}

// Run ends each forwarding when its drain period is over, until ctx ends. The chains
// in place then stay: the next speaker of the node takes them over or removes them
// (Reset).
func (f *Forwarder) Run(ctx context.Context) {
	if !f.On() {
		return
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			now := f.now()
			f.EndWhere(ctx, func(fw Forward) bool { return !now.Before(fw.Until) }, "the drain period ended")
		}
	}
}
