package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CEL cannot order IP addresses, so the last rule finds the length l of the
// prefix the range's start and end share (the longest start/m that contains
// end) and requires bit l+1 of the start to be 0. `[x].map(v, ...)[0]` names
// l (CRD rules lack cel.bind); the prefix suffixes are literals so the cost
// estimate stays bounded.
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=90
// +kubebuilder:validation:XValidation:rule=`isCIDR(self) || (self.split('-').size() == 2 && isIP(self.split('-')[0].trim()) && isIP(self.split('-')[1].trim()))`,messageExpression=`'"' + self + '" is neither a CIDR (like 192.168.10.0/24) nor a range start-end of two IP addresses'`
// +kubebuilder:validation:XValidation:rule=`!(self.split('-').size() == 2 && isIP(self.split('-')[0].trim()) && isIP(self.split('-')[1].trim())) || ip(self.split('-')[0].trim()).family() == ip(self.split('-')[1].trim()).family()`,messageExpression=`'range "' + self + '" mixes IPv4 and IPv6: start and end must be of one family'`
// +kubebuilder:validation:XValidation:rule=`!(self.split('-').size() == 2 && isIP(self.split('-')[0].trim()) && isIP(self.split('-')[1].trim()) && ip(self.split('-')[0].trim()).family() == ip(self.split('-')[1].trim()).family()) || [['/0', '/1', '/2', '/3', '/4', '/5', '/6', '/7', '/8', '/9', '/10', '/11', '/12', '/13', '/14', '/15', '/16', '/17', '/18', '/19', '/20', '/21', '/22', '/23', '/24', '/25', '/26', '/27', '/28', '/29', '/30', '/31', '/32', '/33', '/34', '/35', '/36', '/37', '/38', '/39', '/40', '/41', '/42', '/43', '/44', '/45', '/46', '/47', '/48', '/49', '/50', '/51', '/52', '/53', '/54', '/55', '/56', '/57', '/58', '/59', '/60', '/61', '/62', '/63', '/64', '/65', '/66', '/67', '/68', '/69', '/70', '/71', '/72', '/73', '/74', '/75', '/76', '/77', '/78', '/79', '/80', '/81', '/82', '/83', '/84', '/85', '/86', '/87', '/88', '/89', '/90', '/91', '/92', '/93', '/94', '/95', '/96', '/97', '/98', '/99', '/100', '/101', '/102', '/103', '/104', '/105', '/106', '/107', '/108', '/109', '/110', '/111', '/112', '/113', '/114', '/115', '/116', '/117', '/118', '/119', '/120', '/121', '/122', '/123', '/124', '/125', '/126', '/127', '/128'].filter(m, isCIDR(self.split('-')[0].trim() + m) && cidr(self.split('-')[0].trim() + m).containsIP(self.split('-')[1].trim())).size() - 1].map(l, l == 128 || (l == 32 && ip(self.split('-')[0].trim()).family() == 4) || cidr(self.split('-')[0].trim() + ['/0', '/1', '/2', '/3', '/4', '/5', '/6', '/7', '/8', '/9', '/10', '/11', '/12', '/13', '/14', '/15', '/16', '/17', '/18', '/19', '/20', '/21', '/22', '/23', '/24', '/25', '/26', '/27', '/28', '/29', '/30', '/31', '/32', '/33', '/34', '/35', '/36', '/37', '/38', '/39', '/40', '/41', '/42', '/43', '/44', '/45', '/46', '/47', '/48', '/49', '/50', '/51', '/52', '/53', '/54', '/55', '/56', '/57', '/58', '/59', '/60', '/61', '/62', '/63', '/64', '/65', '/66', '/67', '/68', '/69', '/70', '/71', '/72', '/73', '/74', '/75', '/76', '/77', '/78', '/79', '/80', '/81', '/82', '/83', '/84', '/85', '/86', '/87', '/88', '/89', '/90', '/91', '/92', '/93', '/94', '/95', '/96', '/97', '/98', '/99', '/100', '/101', '/102', '/103', '/104', '/105', '/106', '/107', '/108', '/109', '/110', '/111', '/112', '/113', '/114', '/115', '/116', '/117', '/118', '/119', '/120', '/121', '/122', '/123', '/124', '/125', '/126', '/127', '/128'][l + 1]).masked().ip() == cidr(self.split('-')[0].trim() + ['/0', '/1', '/2', '/3', '/4', '/5', '/6', '/7', '/8', '/9', '/10', '/11', '/12', '/13', '/14', '/15', '/16', '/17', '/18', '/19', '/20', '/21', '/22', '/23', '/24', '/25', '/26', '/27', '/28', '/29', '/30', '/31', '/32', '/33', '/34', '/35', '/36', '/37', '/38', '/39', '/40', '/41', '/42', '/43', '/44', '/45', '/46', '/47', '/48', '/49', '/50', '/51', '/52', '/53', '/54', '/55', '/56', '/57', '/58', '/59', '/60', '/61', '/62', '/63', '/64', '/65', '/66', '/67', '/68', '/69', '/70', '/71', '/72', '/73', '/74', '/75', '/76', '/77', '/78', '/79', '/80', '/81', '/82', '/83', '/84', '/85', '/86', '/87', '/88', '/89', '/90', '/91', '/92', '/93', '/94', '/95', '/96', '/97', '/98', '/99', '/100', '/101', '/102', '/103', '/104', '/105', '/106', '/107', '/108', '/109', '/110', '/111', '/112', '/113', '/114', '/115', '/116', '/117', '/118', '/119', '/120', '/121', '/122', '/123', '/124', '/125', '/126', '/127', '/128'][l]).masked().ip())[0]`,messageExpression=`'range "' + self + '" starts after it ends'`

// AddressRange is one entry of spec.addresses: a CIDR ("192.168.10.0/24",
// "fc00::/124") or an inclusive range of one family
// ("172.18.255.200-172.18.255.250"). Malformed entries are refused at
// admission with a message naming them.
type AddressRange string

// IPAddressPoolSpec describes a set of addresses herald may give to
// LoadBalancer Services.
type IPAddressPoolSpec struct {
	// Addresses of the pool: CIDRs ("192.168.10.0/24",
	// "fc00:f853:ccd:e799::/124") and inclusive ranges
	// ("172.18.255.200-172.18.255.250"). IPv4 and IPv6 entries may be mixed,
	// which a dual-stack Service needs. A CIDR includes its network and
	// broadcast addresses unless avoidBuggyIPs is set. At most 100 entries of 90
	// characters (a bound the API server needs to price the validation rules;
	// one CIDR may hold any number of addresses).
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	// +listType=atomic
	Addresses []AddressRange `json:"addresses"`

	// AutoAssign lets herald hand out addresses of this pool to any Service it
	// may serve. When false, the pool is used only by Services that ask for it
	// (annotation herald.dev/address-pool) or for one of its addresses
	// (herald.dev/loadBalancerIPs or spec.loadBalancerIP).
	// +kubebuilder:default=true
	// +optional
	AutoAssign *bool `json:"autoAssign,omitempty"`

	// AvoidBuggyIPs skips IPv4 addresses ending in .0 or .255, which some old
	// client firmware mistakes for network or broadcast addresses.
	// +kubebuilder:default=false
	// +optional
	AvoidBuggyIPs bool `json:"avoidBuggyIPs,omitempty"`

	// AllowCrossNamespaceSharing lets Services of different namespaces share
	// one of the pool's addresses when they set the same sharing key
	// (herald.dev/allow-shared-ip). Off by default: namespaces are tenants, a
	// sharing key is scoped to its namespace, and a Service never joins an
	// address held by another namespace. Turn it on only for a pool whose
	// namespaces trust each other, such as a pool moved from MetalLB whose
	// Services already share across namespaces.
	// +kubebuilder:default=false
	// +optional
	AllowCrossNamespaceSharing bool `json:"allowCrossNamespaceSharing,omitempty"`

	// ServiceAllocation restricts the pool to some namespaces or Services and
	// orders it before other pools for them. Absent: every Service may use the
	// pool.
	// +optional
	AllocateTo *ServiceAllocation `json:"serviceAllocation,omitempty"`
}

// ServiceAllocation restricts and prioritises a pool.
type ServiceAllocation struct {
	// Priority of the pool for the Services it matches: lower numbers are tried
	// first; 0 (or unset) comes after every pool with a positive priority.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Priority int `json:"priority,omitempty"`

	// Namespaces whose Services may use the pool. Together with
	// namespaceSelectors this forms the allowed namespaces; both empty means
	// every namespace.
	// +listType=set
	// +optional
	Namespaces []string `json:"namespaces,omitempty"`

	// NamespaceSelectors select, by label, namespaces whose Services may use the
	// pool.
	// At most 16 selectors (see LabelSelector for their own bounds).
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +optional
	NamespaceSelectors []LabelSelector `json:"namespaceSelectors,omitempty"`

	// ServiceSelectors select, by label, the Services that may use the pool (any
	// one matching is enough). If namespaces are restricted too, a Service must
	// match both.
	// At most 16 selectors (see LabelSelector for their own bounds).
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +optional
	ServiceSelectors []LabelSelector `json:"serviceSelectors,omitempty"`
}

// IPAddressPoolStatus is written by the controller.
type IPAddressPoolStatus struct {
	// AssignedIPv4 is the number of IPv4 addresses of the pool held by Services.
	// +optional
	AssignedIPv4 int64 `json:"assignedIPv4"`
	// AssignedIPv6 is the number of IPv6 addresses of the pool held by Services.
	// +optional
	AssignedIPv6 int64 `json:"assignedIPv6"`
	// AvailableIPv4 is the number of IPv4 addresses still free.
	// +optional
	AvailableIPv4 int64 `json:"availableIPv4"`
	// AvailableIPv6 is the number of IPv6 addresses still free (saturates at
	// 2^63-1).
	// +optional
	AvailableIPv6 int64 `json:"availableIPv6"`
	// InUse is the number of addresses held by Services, both families.
	// +optional
	InUse int64 `json:"inUse"`
	// Available is the number of free addresses, both families (saturates at
	// 2^63-1).
	// +optional
	Available int64 `json:"available"`
	// ConflictIPv4 is the number of free IPv4 addresses that a device on the
	// network claims (a VIPStatus with reason IPConflict): not given to new
	// Services, so not counted in available.
	// +optional
	ConflictIPv4 int64 `json:"conflictIPv4"`
	// ConflictIPv6 is the number of free IPv6 addresses that a device on the
	// network claims.
	// +optional
	ConflictIPv6 int64 `json:"conflictIPv6"`
	// Conflict is the number of free addresses that devices on the network
	// claim, both families. An address a Service holds counts in inUse even when
	// a device claims it too.
	// +optional
	Conflict int64 `json:"conflict"`
	// Conditions: Ready is True when the pool gives out addresses; False with
	// reason Overlap when its addresses collide with an older pool, or
	// Terminating while it waits for its last address to be released.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// IPAddressPool is a set of addresses herald gives to LoadBalancer Services.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ippool
// +kubebuilder:printcolumn:name="Auto Assign",type=boolean,JSONPath=`.spec.autoAssign`
// +kubebuilder:printcolumn:name="Avoid Buggy IPs",type=boolean,JSONPath=`.spec.avoidBuggyIPs`
// +kubebuilder:printcolumn:name="Addresses",type=string,JSONPath=`.spec.addresses`
// +kubebuilder:printcolumn:name="In Use",type=integer,JSONPath=`.status.inUse`
// +kubebuilder:printcolumn:name="Available",type=integer,JSONPath=`.status.available`
// +kubebuilder:printcolumn:name="Conflict",type=integer,JSONPath=`.status.conflict`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type IPAddressPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   IPAddressPoolSpec   `json:"spec"`
	Status IPAddressPoolStatus `json:"status,omitempty"`
}

// IPAddressPoolList is a list of IPAddressPool.
//
// +kubebuilder:object:root=true
type IPAddressPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []IPAddressPool `json:"items"`
}

func init() {
	SchemeBuilder.Register(&IPAddressPool{}, &IPAddressPoolList{})
}
