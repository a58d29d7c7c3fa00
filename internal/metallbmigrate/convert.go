// Package metallbmigrate turns MetalLB's configuration (metallb.io objects) into
// herald's, refusing what herald does not do, and reports the Services that carry
// MetalLB's annotations. It works on unstructured objects, so it needs none of
// MetalLB's Go types.
package metallbmigrate

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	heraldv1 "herald.dev/herald/api/v1beta1"
)

// MetalLBGroup is the API group of MetalLB's objects.
const MetalLBGroup = "metallb.io"

// AnnotationMigratedFrom is set on each converted object: the MetalLB object it came
// from, as "metallb.io/v1beta1 IPAddressPool metallb-system/first".
const AnnotationMigratedFrom = "herald.dev/migrated-from"

// unsupportedKinds are MetalLB's kinds herald has no counterpart of, with why.
var unsupportedKinds = map[string]string{
	"BGPPeer":          "herald announces at layer 2 only (ARP/NDP), it speaks no BGP",
	"BGPAdvertisement": "herald announces at layer 2 only (ARP/NDP), it speaks no BGP",
	"BFDProfile":       "BFD goes with BGP, which herald does not speak",
	"Community":        "BGP communities go with BGP, which herald does not speak",
	"AddressPool":      "MetalLB's pre-0.13 kind; herald converts only IPAddressPool and L2Advertisement",
}

// statusKinds are objects MetalLB writes about its own state: nothing to convert.
var statusKinds = map[string]bool{"ServiceL2Status": true, "ServiceBGPStatus": true, "ConfigurationState": true}

// Refusal is a MetalLB object herald cannot take over, and why.
type Refusal struct {
	Object string // "metallb.io/v1beta1 BGPPeer metallb-system/router"
	Reason string
}

func (r Refusal) String() string { return r.Object + ": " + r.Reason }

// Result is the outcome of Convert.
type Result struct {
	// Objects are herald's objects, IPAddressPools first, each kind sorted by name.
	Objects []*unstructured.Unstructured
	// Refused are the MetalLB objects that were not converted.
	Refused []Refusal
	// Ignored counts the objects that are neither MetalLB configuration nor Services
	// (a Deployment in a MetalLB manifest, MetalLB's status objects).
	Ignored int
	// Pools are the names of the converted pools.
	Pools []string
}

// Convert turns MetalLB's IPAddressPools and L2Advertisements into herald's in
// namespace. Each object converts whole or not at all: one with a field herald lacks is
// refused, never converted without it, since that would change what it does.
func Convert(objs []*unstructured.Unstructured, namespace string) Result {
	var res Result
	from := map[string]string{} // kind/name in namespace → the object it came from
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		if gvk.Group != MetalLBGroup {
			res.Ignored++
			continue
		}
		desc := describe(o)
		var spec shape
		switch gvk.Kind {
		case "IPAddressPool":
			spec = ipAddressPoolSpec
		case "L2Advertisement":
			spec = l2AdvertisementSpec
		default:
			if statusKinds[gvk.Kind] {
				res.Ignored++
				continue
			}
			res.Refused = append(res.Refused, Refusal{desc, unsupportedReason(o)})
			continue
		}
		out, err := convertObject(o, spec, namespace)
		if err != nil {
			res.Refused = append(res.Refused, Refusal{desc, err.Error()})
			continue
		}
		key := gvk.Kind + "/" + o.GetName()
		if first, dup := from[key]; dup {
			res.Refused = append(res.Refused, Refusal{desc, fmt.Sprintf("%s %s/%s already comes from %s; rename one", gvk.Kind, namespace, o.GetName(), first)})
			continue
		}
		from[key] = desc
		res.Objects = append(res.Objects, out)
		if gvk.Kind == "IPAddressPool" {
			res.Pools = append(res.Pools, o.GetName())
		}
	}
	slices.SortFunc(res.Objects, func(a, b *unstructured.Unstructured) int {
		if a.GetKind() != b.GetKind() { // pools first: advertisements name them
			if a.GetKind() == "IPAddressPool" {
				return -1
			}
			return 1
		}
		return strings.Compare(a.GetName(), b.GetName())
	})
	slices.Sort(res.Pools)
	return res
}

func describe(o *unstructured.Unstructured) string {
	name := o.GetName()
	if ns := o.GetNamespace(); ns != "" {
		name = ns + "/" + name
	}
	return fmt.Sprintf("%s %s %s", o.GetAPIVersion(), o.GetKind(), name)
}

func unsupportedReason(o *unstructured.Unstructured) string {
	why, ok := unsupportedKinds[o.GetKind()]
	if !ok {
		return "herald has no such kind"
	}
	if o.GetKind() == "BGPAdvertisement" {
		pools, _, _ := unstructured.NestedStringSlice(o.Object, "spec", "ipAddressPools")
		if len(pools) > 0 {
			why += fmt.Sprintf("; the IPs of pools %s are announced only if an L2Advertisement selects them", strings.Join(pools, ", "))
		}
	}
	return why
}

// convertObject makes herald's object of the same kind and name from o, whose spec
// must have only the fields of spec.
func convertObject(o *unstructured.Unstructured, spec shape, namespace string) (*unstructured.Unstructured, error) {
	in, _, err := unstructured.NestedMap(o.Object, "spec")
	if err != nil {
		return nil, fmt.Errorf("spec: %w", err)
	}
	if in == nil {
		in = map[string]any{} // an L2Advertisement without spec announces every pool
	}
	if unknown := unknownFields(in, spec, "spec"); len(unknown) > 0 {
		return nil, fmt.Errorf("herald's %s has no field %s", o.GetKind(), strings.Join(unknown, ", "))
	}
	if err := checkTypes(o.GetKind(), in); err != nil {
		return nil, err
	}
	out := &unstructured.Unstructured{Object: map[string]any{"spec": in}}
	out.SetGroupVersionKind(schema.GroupVersionKind{Group: heraldv1.GroupVersion.Group, Version: heraldv1.GroupVersion.Version, Kind: o.GetKind()})
	out.SetNamespace(namespace)
	out.SetName(o.GetName())
	out.SetLabels(o.GetLabels()) // L2Advertisements may select pools by label
	out.SetAnnotations(map[string]string{AnnotationMigratedFrom: describe(o)})
	return out, nil
}

// checkTypes reads spec into herald's Go type, so that a value of the wrong type (a
// string where a number goes) is refused here rather than by the API server.
func checkTypes(kind string, spec map[string]any) error {
	b, err := json.Marshal(spec)
	if err != nil {
		return fmt.Errorf("spec: %w", err)
	}
	var into any = &heraldv1.IPAddressPoolSpec{}
	if kind == "L2Advertisement" {
		into = &heraldv1.L2AdvertisementSpec{}
	}
	if err := json.Unmarshal(b, into); err != nil {
		return fmt.Errorf("spec: %w", err)
	}
	return nil
}
