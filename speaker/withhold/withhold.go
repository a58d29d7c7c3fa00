package withhold

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"

	heraldv1 "herald.dev/herald/api/v1beta1"
	"herald.dev/herald/speaker/deadnodes"
	"herald.dev/herald/speaker/election"
	"herald.dev/herald/speaker/quorum"
)

// Config is what the Withholder needs of the speaker's settings.
type Config struct {
	// Self is this speaker's node.
	Self string
	// Enabled is --withhold-dead-endpoints: without it, only the hosts of restarting
	// peers are probed and nothing is withheld.
	Enabled bool
	// BindAddr is memberlist's bind address: its family picks the address probed of a
	// dual-stack node. BindPort is memberlist's port, probed besides the kubelet's and
	// kube-proxy's health port (0: not probed, every speaker picked its own).
	BindAddr string
	BindPort int
}

// Callbacks are how the Withholder reaches the speaker around it.
type Callbacks struct {
	// SetWithheld hands the withheld nodes to the proxier (node name: unreachable).
	SetWithheld func(map[string]bool)
	// LeftGracefully says whether a member memberlist lost said goodbye first.
	LeftGracefully func(node string) bool
	// Event writes an Event on the Node named node.
	Event func(ctx context.Context, node, typ, reason, action, note string)
	// Changed asks for another election pass: a probed host's answer changed.
	Changed func()
}

// Withholder is the shell around the pure deadnodes rule: it probes the hosts of the
// speakers that vanished or said goodbye, decides which nodes are dead, hands them to
// the proxier, and reports each change in the log and in an Event on the Node. Update
// runs on the speaker's loop goroutine only.
type Withholder struct {
	cfg      Config
	cb       Callbacks
	prober   *hostProber
	withheld []deadnodes.Node
	log      logr.Logger
}

// New returns a Withholder; Run probes the hosts.
func New(cfg Config, cb Callbacks, log logr.Logger) *Withholder {
	return &Withholder{cfg: cfg, cb: cb, prober: newHostProber(cfg.BindPort, cb.Changed), log: log}
}

// Run probes the hosts it is pointed at until ctx ends.
func (w *Withholder) Run(ctx context.Context) { w.prober.run(ctx) }

// Answers returns when each probed host last answered, and when it last did not.
func (w *Withholder) Answers() (aliveAt, silentAt map[string]time.Time) { return w.prober.answers() }

// Withheld returns the nodes withheld now.
func (w *Withholder) Withheld() []deadnodes.Node { return w.withheld }

// Pass is what one election pass knows that the rule reads.
type Pass struct {
	Verdict quorum.Verdict
	// Live are the members heard now, Lost when each member memberlist lost went.
	Live []string
	Lost map[string]time.Time
	// Records are the speakers' records as the quorum rule read them.
	Records []quorum.Record
	// Nodes are the Nodes the election read: nil when the speaker is silent (a silent
	// speaker withholds nothing).
	Nodes []*corev1.Node
	// Restarting are the peers whose IPs are kept for them while they restart: their
	// hosts are probed, and one that stops answering has its IPs moved.
	Restarting []string
}

// Update decides which nodes are dead (speaker/deadnodes), hands them to the proxier,
// points the host prober at the suspects and the restarting peers, and reports
// changes.
func (w *Withholder) Update(ctx context.Context, p Pass) {
	in := deadnodes.Input{
		Self: w.cfg.Self, Quorum: p.Verdict.Mode == quorum.ModeQuorum && p.Nodes != nil, Live: p.Live,
		Lost: p.Lost, Left: map[string]bool{}, Records: map[string]deadnodes.Renewal{}, Now: time.Now(),
	}
	for n := range p.Lost {
		if w.cb.LeftGracefully(n) {
			in.Left[n] = true
		}
	}
	for _, r := range p.Records {
		in.Records[r.Node] = deadnodes.Renewal{RenewedAt: r.RenewedAt, Duration: r.Duration, ChangedAt: r.ChangedAt}
	}
	addrs := map[string]netip.Addr{}
	for _, n := range p.Nodes {
		in.Nodes = append(in.Nodes, n.Name)
		if a, ok := probeAddr(n, w.cfg.BindAddr); ok {
			addrs[n.Name] = a
		}
	}
	in.AliveAt, in.SilentAt = w.prober.answers()

	targets := map[string]netip.Addr{}
	for _, n := range p.Restarting {
		if a, ok := addrs[n]; ok {
			targets[n] = a
		}
	}
	if !w.cfg.Enabled {
		w.prober.set(targets)
		return
	}
	for _, n := range deadnodes.Suspects(in) {
		if a, ok := addrs[n]; ok {
			targets[n] = a
		}
	}
	w.prober.set(targets)

	dead := deadnodes.Decide(deadnodes.DefaultConfig(), in)
	set := make(map[string]bool, len(dead))
	for _, d := range dead {
		set[d.Name] = d.Unreachable
	}
	w.cb.SetWithheld(set)
	w.report(ctx, dead, p.Live)
	w.withheld = dead
}

// report logs each change of the withheld nodes and, on the one speaker that reports
// for the cluster (the live member with the smallest name, the node itself left out:
// back, it knows nothing of its withholding), writes an Event on the Node.
func (w *Withholder) report(ctx context.Context, dead []deadnodes.Node, live []string) {
	reports := func(node string) bool {
		return election.IsReporter(slices.DeleteFunc(slices.Clone(live), func(n string) bool { return n == node }), w.cfg.Self)
	}
	before := map[string]deadnodes.Node{}
	for _, d := range w.withheld {
		before[d.Name] = d
	}
	for _, d := range dead {
		old, was := before[d.Name]
		delete(before, d.Name)
		switch {
		case !was:
			action, why := "WithholdVanished", fmt.Sprintf("the speakers lost %s without a goodbye and nothing shows it alive", d.Name)
			if d.Left {
				action, why = "WithholdShutDown", fmt.Sprintf("the speaker of %s said goodbye, then its host stopped answering (a node shutting down)", d.Name)
			}
			w.log.Info("withholding the endpoints of a node the speakers know down", "node", d.Name, "since", d.Since, "why", why)
			if reports(d.Name) {
				w.cb.Event(ctx, d.Name, corev1.EventTypeWarning, heraldv1.ReasonEndpointsWithheld, action, why+": its endpoints get no new connections from any node's proxier")
			}
		case d.Unreachable && !old.Unreachable:
			w.log.Info("a withheld node answers nothing: clearing the flows to its endpoints", "node", d.Name)
		}
	}
	restored := make([]string, 0, len(before))
	for n := range before {
		restored = append(restored, n)
	}
	slices.Sort(restored)
	for _, n := range restored {
		w.log.Info("the endpoints of a node are no longer withheld", "node", n)
		if reports(n) {
			w.cb.Event(ctx, n, corev1.EventTypeNormal, heraldv1.ReasonEndpointsRestored, "Restore", fmt.Sprintf(
				"%s is back (or shown alive): its endpoints get traffic again", n))
		}
	}
}

// probeAddr is the InternalIP of n to probe, of bindAddr's family when it has one.
func probeAddr(n *corev1.Node, bindAddr string) (netip.Addr, bool) {
	want4 := !strings.Contains(bindAddr, ":")
	var other netip.Addr
	for _, a := range n.Status.Addresses {
		if a.Type != corev1.NodeInternalIP {
			continue
		}
		ip, err := netip.ParseAddr(a.Address)
		if err != nil {
			continue
		}
		ip = ip.Unmap()
		if ip.Is4() == want4 {
			return ip, true
		}
		if !other.IsValid() {
			other = ip
		}
	}
	return other, other.IsValid()
}
