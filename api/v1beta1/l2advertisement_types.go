package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// L2AdvertisementSpec says which pools are announced at layer 2 (ARP/NDP),
// from which nodes and on which interfaces.
type L2AdvertisementSpec struct {
	// IPAddressPools lists, by name, the pools whose addresses are announced.
	// With neither ipAddressPools nor ipAddressPoolSelectors, every pool is
	// announced.
	// +optional
	IPAddressPools []string `json:"ipAddressPools,omitempty"`

	// IPAddressPoolSelectors select, by label, further pools to announce.
	// At most 16 selectors (see LabelSelector for their own bounds).
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +optional
	IPAddressPoolSelectors []LabelSelector `json:"ipAddressPoolSelectors,omitempty"`

	// NodeSelectors limit the nodes that may announce the addresses (any one
	// matching is enough). Empty: every node.
	// At most 16 selectors (see LabelSelector for their own bounds).
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +optional
	NodeSelectors []LabelSelector `json:"nodeSelectors,omitempty"`

	// Interfaces limit the network interfaces ARP and NDP are answered on.
	// Empty: every eligible interface. The owner node is elected without regard
	// to interfaces; if it lacks all of them, the speaker reports it with a
	// Warning Event on the Service.
	// +optional
	Interfaces []string `json:"interfaces,omitempty"`

	// ServiceSelectors limit the advertisement to Services with matching labels
	// (any one matching is enough). Empty: every Service.
	// At most 16 selectors (see LabelSelector for their own bounds).
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +optional
	ServiceSelectors []LabelSelector `json:"serviceSelectors,omitempty"`
}

// L2AdvertisementStatus is empty; ownership is shown on Services (Events)
// and in metrics.
type L2AdvertisementStatus struct{}

// L2Advertisement announces the addresses of IPAddressPools at layer 2.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=l2adv
// +kubebuilder:printcolumn:name="IPAddressPools",type=string,JSONPath=`.spec.ipAddressPools`
// +kubebuilder:printcolumn:name="IPAddressPool Selectors",type=string,JSONPath=`.spec.ipAddressPoolSelectors`
// +kubebuilder:printcolumn:name="Interfaces",type=string,JSONPath=`.spec.interfaces`
// +kubebuilder:printcolumn:name="Node Selectors",type=string,JSONPath=`.spec.nodeSelectors`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type L2Advertisement struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   L2AdvertisementSpec   `json:"spec,omitempty"`
	Status L2AdvertisementStatus `json:"status,omitempty"`
}

// L2AdvertisementList is a list of L2Advertisement.
//
// +kubebuilder:object:root=true
type L2AdvertisementList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []L2Advertisement `json:"items"`
}

func init() {
	SchemeBuilder.Register(&L2Advertisement{}, &L2AdvertisementList{})
}
