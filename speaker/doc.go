// Package speaker is `herald speaker`, the agent on every node. Run starts it: it
// joins the other speakers over memberlist (speaker/members), keeps this node's
// record in the API server, and on every change elects the owner of each
// LoadBalancer IP (speaker/election) among the speakers the quorum rule
// (speaker/quorum) trusts. The IPs this node owns it answers ARP/NDP for
// (speaker/layer2), reporting takeovers and problems as Events and VIPStatus objects
// (speaker/vipstatus); the embedded proxier (proxy/) programs the Services' iptables
// rules.
package speaker
