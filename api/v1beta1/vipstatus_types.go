package v1beta1

import (
	"net/netip"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// VIPReasonIPConflict is the reason of a VIPStatus whose IP a device on the network
// that is no herald speaker claims: the owning speaker yielded the IP to it. The
// controller gives such IPs to no new Service.
const VIPReasonIPConflict = "IPConflict"

// VIPReasonHandover is the reason of an owned VIP taken from a live node on purpose
// (cordon, rebalance) while the new owner forwards the old owner's connections to it;
// the message says from where and until when.
const VIPReasonHandover = "Handover"

// VIPStatusStatus is who announces one LoadBalancer IP at layer 2, as the speakers
// last published it.
type VIPStatusStatus struct {
	// IP is the LoadBalancer IP.
	IP string `json:"ip"`
	// Services are the names of the Services of this namespace that hold the IP
	// (several when they share it), sorted.
	// +optional
	Services []string `json:"services,omitempty"`
	// Pool is the IPAddressPool the IP was allocated from.
	// +optional
	Pool string `json:"pool,omitempty"`
	// Node is the node that answers ARP/NDP for the IP; empty when no node does
	// (reason and message say why).
	// +optional
	Node string `json:"node,omitempty"`
	// Interface is the owner's interface that the first gratuitous ARP/NA went out
	// on; several are comma-separated, in the order of mac.
	// +optional
	Interface string `json:"interface,omitempty"`
	// MAC is the hardware address of interface, which LAN hosts send the IP's
	// traffic to; several are comma-separated, in the order of interface.
	// +optional
	MAC string `json:"mac,omitempty"`
	// Since is when node took the IP over (its first gratuitous ARP/NA), or, with
	// no owner, since when nobody announces it.
	// +optional
	Since *metav1.Time `json:"since,omitempty"`
	// LeaderChanges counts the takeovers of the IP: each node that starts
	// announcing it adds one, the first owner included. It survives speaker
	// restarts; it restarts from zero when the object is deleted with its Services.
	// +optional
	LeaderChanges int64 `json:"leaderChanges,omitempty"`
	// Reason says in one word why no node announces the IP (the election's
	// reason: NoEndpoints, NoLiveSpeaker, Excluded, NotSelected, ...; or
	// IPConflict: a device on the network claims it), or Handover while the node
	// that announces it forwards the connections of the node it took it from, on
	// purpose, to that node; empty otherwise.
	// +optional
	Reason string `json:"reason,omitempty"`
	// Message explains reason in a sentence.
	// +optional
	Message string `json:"message,omitempty"`
	// ObservedAt is when a speaker last wrote this status.
	// +optional
	ObservedAt *metav1.Time `json:"observedAt,omitempty"`
}

// VIPStatus publishes the owner of one LoadBalancer IP: the node answering ARP/NDP
// for it, on which interface and MAC, since when, and how often the IP changed
// owner. The speakers write it (the new owner after its first gratuitous ARP/NA;
// one speaker for IPs no node announces) in the namespace of the Services holding
// the IP, named after the IP (ip-172-18-255-200, ip-fd00--1), and it is deleted with
// the last of those Services (owner references). `herald status` and
// `kubectl get vips` read it.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=vips
// +kubebuilder:printcolumn:name="IP",type=string,JSONPath=`.status.ip`
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.status.node`
// +kubebuilder:printcolumn:name="MAC",type=string,JSONPath=`.status.mac`
// +kubebuilder:printcolumn:name="Since",type=date,JSONPath=`.status.since`
// +kubebuilder:printcolumn:name="Changes",type=integer,JSONPath=`.status.leaderChanges`
// +kubebuilder:printcolumn:name="Pool",type=string,JSONPath=`.status.pool`
// +kubebuilder:printcolumn:name="Services",type=string,JSONPath=`.status.services`,priority=1
// +kubebuilder:printcolumn:name="Interface",type=string,JSONPath=`.status.interface`,priority=1
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.reason`,priority=1
type VIPStatus struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Status VIPStatusStatus `json:"status,omitempty"`
}

// VIPStatusList is a list of VIPStatus.
//
// +kubebuilder:object:root=true
type VIPStatusList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VIPStatus `json:"items"`
}

func init() {
	SchemeBuilder.Register(&VIPStatus{}, &VIPStatusList{})
}

// VIPStatusName is the name of the VIPStatus of ip: "ip-" and the IP with its dots
// or colons turned into dashes (ip-172-18-255-200, ip-fd00--1). An IPv6 address
// ending in "::" gets a trailing 0 (ip-fd00--0 for fd00::, which is fd00::0), since a
// name must end with a letter or digit. Distinct IPs get distinct names.
func VIPStatusName(ip netip.Addr) string {
	s := ip.Unmap().WithZone("").String()
	if strings.HasSuffix(s, "::") {
		s += "0"
	}
	return "ip-" + strings.NewReplacer(".", "-", ":", "-").Replace(s)
}
