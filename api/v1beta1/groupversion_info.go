// Package v1beta1 holds herald's API: IPAddressPool and L2Advertisement in group
// herald.dev. The fields match MetalLB's metallb.io/v1beta1 so its YAML works after
// changing only apiVersion and namespace.
//
// +kubebuilder:object:generate=true
// +groupName=herald.dev
package v1beta1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of herald's objects.
	GroupVersion = schema.GroupVersion{Group: "herald.dev", Version: "v1beta1"}

	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
