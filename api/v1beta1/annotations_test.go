package v1beta1_test

import (
	"slices"
	"testing"

	heraldv1 "herald.dev/herald/api/v1beta1"
)

func TestLookupAnnotation(t *testing.T) {
	const name = heraldv1.AnnotationAddressPool
	cases := []struct {
		desc        string
		annotations map[string]string
		wantValue   string
		wantFrom    string
		wantIgnored []string
	}{
		{desc: "none", annotations: map[string]string{"other": "x"}},
		{desc: "herald's", annotations: map[string]string{name: " a "}, wantValue: "a", wantFrom: name},
		{desc: "metallb.io", annotations: map[string]string{"metallb.io/address-pool": "a"}, wantValue: "a", wantFrom: "metallb.io/address-pool"},
		{desc: "metallb.universe.tf", annotations: map[string]string{"metallb.universe.tf/address-pool": "a"}, wantValue: "a", wantFrom: "metallb.universe.tf/address-pool"},
		{desc: "empty is unset", annotations: map[string]string{name: " ", "metallb.universe.tf/address-pool": "a"}, wantValue: "a", wantFrom: "metallb.universe.tf/address-pool"},
		{desc: "same value everywhere is no conflict",
			annotations: map[string]string{name: "a", "metallb.io/address-pool": "a", "metallb.universe.tf/address-pool": "a"},
			wantValue:   "a", wantFrom: name},
		{desc: "herald's wins",
			annotations: map[string]string{name: "a", "metallb.io/address-pool": "b", "metallb.universe.tf/address-pool": "c"},
			wantValue:   "a", wantFrom: name,
			wantIgnored: []string{`metallb.io/address-pool="b"`, `metallb.universe.tf/address-pool="c"`}},
		{desc: "metallb.io wins over metallb.universe.tf",
			annotations: map[string]string{"metallb.io/address-pool": "b", "metallb.universe.tf/address-pool": "c"},
			wantValue:   "b", wantFrom: "metallb.io/address-pool",
			wantIgnored: []string{`metallb.universe.tf/address-pool="c"`}},
	}
	for _, c := range cases {
		got := heraldv1.LookupAnnotation(c.annotations, name)
		if got.Value != c.wantValue || got.From != c.wantFrom || !slices.Equal(got.Overridden, c.wantIgnored) {
			t.Errorf("%s: got %+v, want value %q from %q, ignored %q", c.desc, got, c.wantValue, c.wantFrom, c.wantIgnored)
		}
		if (got.Conflict() != "") != (len(c.wantIgnored) > 0) {
			t.Errorf("%s: Conflict() = %q", c.desc, got.Conflict())
		}
	}
}

func TestMetalLBAliasesOfEveryAnnotation(t *testing.T) {
	want := map[string][]string{
		heraldv1.AnnotationLoadBalancerIPs:   {"metallb.io/loadBalancerIPs", "metallb.universe.tf/loadBalancerIPs"},
		heraldv1.AnnotationAddressPool:       {"metallb.io/address-pool", "metallb.universe.tf/address-pool"},
		heraldv1.AnnotationAllowSharedIP:     {"metallb.io/allow-shared-ip", "metallb.universe.tf/allow-shared-ip"},
		heraldv1.AnnotationAllocatedFromPool: {"metallb.io/ip-allocated-from-pool", "metallb.universe.tf/ip-allocated-from-pool"},
	}
	for name, aliases := range want {
		if got := heraldv1.MetalLBAliases(name); !slices.Equal(got, aliases) {
			t.Errorf("MetalLBAliases(%s) = %q, want %q", name, got, aliases)
		}
	}
}
