package layer2

import (
	"net"
	"net/netip"
	"time"
)

// Sighting is one frame in which a device other than this node claims an IP this
// node owns on the interface the frame came in on: an ARP request or reply whose sender
// IP is the owned IP, or a neighbour advertisement whose target is the owned VIP. ARP
// probes (sender IP 0.0.0.0) and duplicate address detection solicitations (source ::)
// only ask and are never sightings. Frames from this node's own interfaces are not
// sightings either.
type Sighting struct {
	IP        netip.Addr
	Interface string           // where the frame came in
	MAC       net.HardwareAddr // the claimer: ARP sender MAC; NA target link-layer address, else Ethernet source
	At        time.Time
	Kind      FrameKind
	// Peer is Config.Peer's answer for MAC: another herald speaker, whose claims are
	// evidence only (a split brain for the speaker to settle) and never make this node
	// yield. Responders used without an Announcer leave it false.
	Peer bool
}

// FrameKind is the kind of frame a sighting came in.
type FrameKind string

const (
	// FrameARPReply: an ARP reply from the IP, answering a request (perhaps our probe).
	FrameARPReply FrameKind = "arp-reply"
	// FrameARPRequest: an ARP request from the IP: the device resolving some address.
	FrameARPRequest FrameKind = "arp-request"
	// FrameGratuitousARP: an ARP request or reply whose sender and target IP are both
	// the IP: the device announcing it.
	FrameGratuitousARP FrameKind = "gratuitous-arp"
	// FrameNeighborAdvertisement: an IPv6 neighbour advertisement for the VIP,
	// solicited (perhaps by our probe) or not.
	FrameNeighborAdvertisement FrameKind = "neighbor-advertisement"
)
