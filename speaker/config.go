package speaker

import (
	"errors"
	"fmt"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"herald.dev/herald/internal/memberkey"
	"herald.dev/herald/internal/metricsserve"
	"herald.dev/herald/internal/recordformat"
	"herald.dev/herald/proxy"
	"herald.dev/herald/speaker/layer2"
	"herald.dev/herald/speaker/members"
	"herald.dev/herald/speaker/quorum"
	"herald.dev/herald/speaker/records"
)

// Config is everything `herald speaker` is told by its flags.
type Config struct {
	// NodeName is this node's Kubernetes Node name (also its memberlist name).
	NodeName string
	// Namespace holds herald's IPAddressPools, L2Advertisements and the memberlist
	// Secret.
	Namespace string
	// LBClass is the loadBalancerClass served besides Services without one.
	LBClass string
	// IgnoreExcludeLabel lets nodes labelled
	// node.kubernetes.io/exclude-from-external-load-balancers announce anyway.
	IgnoreExcludeLabel bool

	Members members.Config
	// SecretName is the memberlist Secret read through the API server when the key
	// file (Members.KeyFile) does not exist.
	SecretName string
	// KeyWait is how long to wait for the controller to create the Secret.
	KeyWait time.Duration
	// KeyReread is how often the mounted memberlist Secret is read again, to apply
	// a key rotation while running (0: never).
	KeyReread time.Duration
	// Peers are extra memberlist addresses to join, besides every Node's InternalIP.
	Peers []string
	// JoinInterval is how often peers that are not members are tried again (a
	// speaker that restarted, a partition that healed).
	JoinInterval time.Duration
	// LeaveTimeout bounds the graceful memberlist Leave on shutdown.
	LeaveTimeout time.Duration
	// Records: this speaker's record in the API server; Quorum: the rule that uses
	// them (speaker/quorum).
	Records records.Config
	Quorum  quorum.Config

	// ExcludeInterfaces is the regular expression of interface names never answered on.
	ExcludeInterfaces string
	// Schedule of gratuitous announcements after a takeover.
	Schedule layer2.Schedule
	// Rescan is how often interfaces are listed again.
	Rescan time.Duration
	// StallAfter: when the speaker did not run for this long (a paused VM or
	// container, a frozen or starved process), it answers for no IP until it has heard
	// its peers again (layer2's watchdog); 0 turns that off.
	StallAfter time.Duration
	// ReplyRate and ReplyBurst limit the ARP and NDP answers one requester (its MAC)
	// gets on one interface: per second sustained, and at once.
	ReplyRate  float64
	ReplyBurst int

	// Metrics is the metrics endpoint (--metrics-bind-address, --metrics-secure,
	// --metrics-cert-dir).
	Metrics   metricsserve.Config
	ProbeAddr string

	// RestartHold is how long peers hold the IPs of a speaker that stopped saying it
	// restarts (SIGTERM), and how old its saved claims may be when the next speaker of
	// the node starts; 0 moves the IPs at once, as a node leaving for good does.
	RestartHold time.Duration
	// StateDir keeps the speaker's claims across a restart ("" keeps nothing).
	StateDir string
	// HandoverDrain is how long a node that took a VIP from a live node forwards the
	// flows it does not know to that node (0: none; speaker/handover).
	HandoverDrain time.Duration

	// WithholdDeadEndpoints: the proxier withholds the endpoints of nodes the
	// speakers know dead (speaker/deadnodes) before the API server marks them not ready.
	WithholdDeadEndpoints bool

	// Proxy configures the embedded proxier (--proxy and its flags); the speaker fills
	// in the node name, IPs and zone.
	Proxy proxy.Config
}

// DefaultConfig returns the defaults of a cluster install. NodeName and the bind
// address come from $NODE_NAME and $NODE_IP (the DaemonSet sets them from
// spec.nodeName and status.hostIP).
func DefaultConfig() Config {
	ns := os.Getenv("POD_NAMESPACE")
	if ns == "" {
		ns = "herald-system"
	}
	ml := members.DefaultConfig()
	ml.BindAddr = os.Getenv("NODE_IP")
	px := proxy.DefaultConfig()
	if ml.BindAddr != "" {
		px.HealthzBindAddress = net.JoinHostPort(ml.BindAddr, strconv.Itoa(proxy.HealthzPort))
	}
	return Config{
		NodeName:          os.Getenv("NODE_NAME"),
		Namespace:         ns,
		Members:           ml,
		SecretName:        memberkey.SecretName,
		KeyWait:           time.Minute,
		KeyReread:         5 * time.Second,
		JoinInterval:      2 * time.Second,
		LeaveTimeout:      time.Second,
		Records:           records.DefaultConfig(),
		Quorum:            quorum.DefaultConfig(),
		ExcludeInterfaces: layer2.DefaultExcludeInterfaces,
		Schedule:          layer2.DefaultSchedule(),
		Rescan:            10 * time.Second,
		StallAfter:        layer2.DefaultStallAfter,
		ReplyRate:         layer2.DefaultReplyRate,
		ReplyBurst:        layer2.DefaultReplyBurst,
		Metrics:           metricsserve.Defaults(":7474"),
		ProbeAddr:         ":7475",
		Proxy:             px,

		WithholdDeadEndpoints: true,
		RestartHold:           10 * time.Second,
		StateDir:              "/run/herald",
		HandoverDrain:         5 * time.Minute,
	}
}

// onNodeIP is addr ("host:port") with the node's IP for host when addr names none
// (":7474"), so that the speaker's endpoints listen on the node's address, not on
// every address of the host (its hostNetwork pod has them all); "0.0.0.0:7474" or
// "[::]:7474" still means every one. Without nodeIP, or for "0" (off), addr as it is.
func onNodeIP(addr, nodeIP string) string {
	if nodeIP == "" || !strings.HasPrefix(addr, ":") {
		return addr
	}
	return net.JoinHostPort(nodeIP, addr[1:])
}

// AddFlags registers the speaker's flags, with c's values as defaults.
func (c *Config) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.NodeName, "node-name", c.NodeName, "this node's Node name (default $NODE_NAME)")
	fs.StringVar(&c.Namespace, "namespace", c.Namespace, "namespace of herald's pools, advertisements and memberlist Secret (default $POD_NAMESPACE or herald-system)")
	fs.StringVar(&c.LBClass, "lb-class", c.LBClass, "loadBalancerClass served besides Services without a class")
	fs.BoolVar(&c.IgnoreExcludeLabel, "ignore-exclude-lb", c.IgnoreExcludeLabel, "let nodes labelled node.kubernetes.io/exclude-from-external-load-balancers announce (single-node clusters)")
	c.Members.AddFlags(fs)
	fs.StringVar(&c.SecretName, "ml-secret-name", c.SecretName, "memberlist Secret read through the API server when --ml-secret-key-path does not exist")
	fs.DurationVar(&c.KeyWait, "ml-secret-wait", c.KeyWait, "how long to wait for the controller to create the memberlist Secret")
	fs.DurationVar(&c.KeyReread, "ml-secret-reread-interval", c.KeyReread, "how often the mounted memberlist Secret is read again to apply a key rotation (0: never)")
	fs.StringSliceVar(&c.Peers, "ml-peers", c.Peers, "extra memberlist peers (ip or ip:port) besides every Node's InternalIP")
	fs.DurationVar(&c.JoinInterval, "ml-join-interval", c.JoinInterval, "how often Nodes whose speaker is not a member are tried again")
	fs.DurationVar(&c.LeaveTimeout, "ml-leave-timeout", c.LeaveTimeout, "how long the graceful memberlist Leave on SIGTERM may take")
	fs.DurationVar(&c.Records.Renew, "record-renew-interval", c.Records.Renew, "how often the speaker renews its heartbeat (a Lease in its namespace); its record is written only when what it says changes")
	fs.DurationVar(&c.Records.FastRenew, "record-fast-renew-interval", c.Records.FastRenew, "how often it retries writing its record or heartbeat after a failed write")
	fs.DurationVar(&c.Records.Duration, "record-duration", c.Records.Duration, "how long a speaker nobody hears stays expected after its record's or heartbeat's last write")
	fs.DurationVar(&c.Records.Coalesce, "record-coalesce", c.Records.Coalesce, "how long after a write of its record a change of its view, or a new peer asking whether it is alive, waits to go with the changes that follow (0: each at once; a change of mode is always written at once)")
	fs.IntVar(&c.Records.DigestFrom, "records-digest-from", c.Records.DigestFrom, "out of Quorum, read the controller's records digest (one ConfigMap) instead of every speaker's record once it lists this many records (0: never)")
	fs.IntVar(&c.Records.SummaryFrom, "heartbeat-summary-from", c.Records.SummaryFrom, "read the controller's heartbeat summary (one Lease) instead of the peers' heartbeats once this many peers are not heard over memberlist (0: never)")
	fs.DurationVar(&c.Quorum.Grace, "quorum-grace", c.Quorum.Grace, "how long a speaker that hears no majority keeps its IPs before it arbitrates through the API server (or goes silent without it); also how long a majority it hears must leave it out before it goes silent (a rumour of its death is refuted sooner)")
	fs.DurationVar(&c.Quorum.JoinWait, "quorum-join-wait", c.Quorum.JoinWait, "how long a returning speaker waits, at most, for a peer that hears it again to republish its record when the API server does not answer, and to hear a peer whose record says it restarts with claims")
	fs.StringVar(&c.ExcludeInterfaces, "exclude-interfaces", c.ExcludeInterfaces, "regular expression of interface names never answered on")
	fs.DurationVar(&c.Schedule.Refresh, "gratuitous-refresh", c.Schedule.Refresh, "period of the gratuitous ARP/NA refresh of owned IPs (0 disables)")
	fs.DurationVar(&c.Rescan, "interface-rescan", c.Rescan, "how often interfaces are listed again to follow ones appearing and disappearing")
	fs.DurationVar(&c.StallAfter, "stall-after", c.StallAfter, "when the speaker did not run for this long (a paused VM or container, a frozen or starved process), it answers for no IP until it has heard its peers again, which may have taken its IPs over meanwhile (0 disables)")
	fs.Float64Var(&c.ReplyRate, "reply-rate", c.ReplyRate, "ARP replies and neighbour advertisements per second one requester (its MAC) gets on one interface, sustained; the rest are counted in herald_l2_replies_rate_limited_total")
	fs.IntVar(&c.ReplyBurst, "reply-burst", c.ReplyBurst, "ARP replies and neighbour advertisements one requester (its MAC) may get at once on one interface")
	c.Metrics.AddFlags(fs)
	fs.StringVar(&c.ProbeAddr, "health-probe-bind-address", c.ProbeAddr, "address of /healthz and /readyz; an address without host (:7475) listens on --ml-bind-addr, the node's IP, and so does the speaker's --metrics-bind-address")
	c.Proxy.AddFlags(fs)
	fs.DurationVar(&c.RestartHold, "restart-hold", c.RestartHold, "how long peers keep the IPs of a speaker that stopped on SIGTERM for it while it restarts (its host still answering), so that a restart moves no IP and breaks no connection (0: move them at once)")
	fs.DurationVar(&c.HandoverDrain, "handover-drain", c.HandoverDrain, "when a VIP moves away from a live node (cordon, rebalance), how long its new owner forwards the TCP segments of connections it does not know to the old owner, which still carries them, so that they keep working; ends sooner when the old owner goes (0: no forwarding, open connections break at the move)")
	fs.StringVar(&c.StateDir, "state-dir", c.StateDir, "directory (a hostPath in the DaemonSet) where the speaker keeps the IPs it announces, current to the second, for the next speaker of the node (\"\": none)")
	fs.BoolVar(&c.WithholdDeadEndpoints, "withhold-dead-endpoints", c.WithholdDeadEndpoints, "stop proxying to the endpoints of a node the speakers know down (its speaker vanished without a goodbye and nothing shows it alive, or said goodbye and its host then stopped answering), within a second instead of when the API server marks it not ready (50 s)")
}

// validate reports every invalid setting that can be checked before start-up (the
// key is loaded later), and compiles the interface expression.
func (c *Config) validate() (*regexp.Regexp, error) {
	var errs []error
	if c.NodeName == "" {
		errs = append(errs, errors.New("--node-name is empty and $NODE_NAME is unset"))
	}
	if c.Namespace == "" {
		errs = append(errs, errors.New("--namespace is empty"))
	}
	re, err := regexp.Compile(c.ExcludeInterfaces)
	if err != nil {
		errs = append(errs, fmt.Errorf("--exclude-interfaces: %w", err))
	}
	if err := c.Schedule.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("gratuitous schedule: %w", err))
	}
	if err := c.Records.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.Quorum.Grace <= 0 || c.Quorum.JoinWait <= 0 {
		errs = append(errs, fmt.Errorf("--quorum-grace %v and --quorum-join-wait %v must be positive", c.Quorum.Grace, c.Quorum.JoinWait))
	}
	if c.Records.Coalesce*2 > c.Quorum.Grace {
		// An answer held back must reach an asker before it arbitrates, Grace after
		// its trouble began.
		errs = append(errs, fmt.Errorf("--record-coalesce %v must be at most half of --quorum-grace %v", c.Records.Coalesce, c.Quorum.Grace))
	} else if c.Records.DigestFrom > 0 && (c.Records.Coalesce+recordformat.DigestGap)*2 > c.Quorum.Grace {
		// Through the digest an answer also waits for the controller's next write.
		errs = append(errs, fmt.Errorf("--record-coalesce %v plus the records digest's %v between writes must be at most half of --quorum-grace %v (or --records-digest-from 0)",
			c.Records.Coalesce, recordformat.DigestGap, c.Quorum.Grace))
	}
	switch earliest := c.Members.EarliestVerdict(); {
	case c.StallAfter < 0:
		errs = append(errs, fmt.Errorf("--stall-after %v must not be negative", c.StallAfter))
	case c.StallAfter >= earliest:
		// A stall the peers may already have called a death must be noticed, or the
		// thawed speaker answers for IPs they gave to other nodes.
		errs = append(errs, fmt.Errorf("--stall-after %v must be shorter than %v, the earliest moment the peers may declare a silent speaker dead (--ml-probe-interval × (1 + --ml-suspicion-mult, or 4 when it is 0, automatic)), or 0", c.StallAfter, earliest))
	}
	if c.ReplyRate <= 0 || c.ReplyBurst <= 0 {
		errs = append(errs, fmt.Errorf("--reply-rate %v and --reply-burst %d must be positive", c.ReplyRate, c.ReplyBurst))
	}
	if c.HandoverDrain < 0 {
		errs = append(errs, fmt.Errorf("--handover-drain %v must not be negative", c.HandoverDrain))
	}
	if c.RestartHold < 0 {
		errs = append(errs, fmt.Errorf("--restart-hold %v must not be negative", c.RestartHold))
	}
	if c.JoinInterval <= 0 {
		errs = append(errs, fmt.Errorf("--ml-join-interval %v must be positive", c.JoinInterval))
	}
	if err := c.Metrics.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Proxy.Validate(); err != nil {
		errs = append(errs, err)
	}
	return re, errors.Join(errs...)
}
