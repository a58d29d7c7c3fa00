package v1beta1_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	heraldv1 "herald.dev/herald/api/v1beta1"
	"herald.dev/herald/internal/testenv"
)

// TestAdmission sends pools and advertisements to a real kube-apiserver and checks that
// the CRD schema's rules accept the good ones and refuse the bad ones with a message
// naming the field and the bad value.
func TestAdmission(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	env.CreateNamespace(t, "herald-system")
	pool := func(name string, spec heraldv1.IPAddressPoolSpec) *heraldv1.IPAddressPool {
		return &heraldv1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "herald-system"}, Spec: spec}
	}
	addrs := func(a ...string) heraldv1.IPAddressPoolSpec {
		s := heraldv1.IPAddressPoolSpec{}
		for _, x := range a {
			s.Addresses = append(s.Addresses, heraldv1.AddressRange(x))
		}
		return s
	}
	cases := []struct {
		name string
		spec heraldv1.IPAddressPoolSpec
		// want lists substrings of the error; empty means the pool must be accepted.
		want []string
	}{
		{"walkthrough range", addrs("172.18.255.200-172.18.255.250"), nil},
		{"cidrs of both families", addrs("192.168.10.0/24", "fc00:f853:ccd:e799::/124"), nil},
		{"range with spaces", addrs("10.0.0.1 - 10.0.0.9"), nil},
		{"v6 range", addrs("fc00::1-fc00::ff"), nil},
		{"v6 range across the compressed groups", addrs("2001:db8::ffff-2001:db8:0:0:1::"), nil},
		{"single-address range", addrs("10.1.1.1-10.1.1.1"), nil},
		{"host bits in a cidr", addrs("192.168.1.7/24"), nil},
		{"malformed cidr", addrs("10.0.0.300/24"), []string{"spec.addresses[0]", `"10.0.0.300/24" is neither a CIDR`}},
		{"bare address", addrs("10.0.0.1"), []string{"spec.addresses[0]", `"10.0.0.1" is neither`}},
		{"malformed range", addrs("192.168.10.0/24", "10.0.0.1-banana"), []string{"spec.addresses[1]", `"10.0.0.1-banana" is neither`}},
		{"three dashes", addrs("10.0.0.1-10.0.0.2-10.0.0.3"), []string{"spec.addresses[0]", "is neither"}},
		{"start after end v4", addrs("10.0.0.9-10.0.0.1"), []string{"spec.addresses[0]", `range "10.0.0.9-10.0.0.1" starts after it ends`}},
		{"start after end by octet width", addrs("10.0.0.100-10.0.0.20"), []string{`range "10.0.0.100-10.0.0.20" starts after it ends`}},
		{"start after end v6", addrs("fc00::ff-fc00::1"), []string{`range "fc00::ff-fc00::1" starts after it ends`}},
		{"start after end v6 compressed", addrs("2001:db8:0:0:1::-2001:db8::ffff"), []string{"starts after it ends"}},
		{"mixed families", addrs("10.0.0.1-fc00::1"), []string{"spec.addresses[0]", `range "10.0.0.1-fc00::1" mixes IPv4 and IPv6`}},
		{"empty addresses", heraldv1.IPAddressPoolSpec{Addresses: []heraldv1.AddressRange{}}, []string{"spec.addresses", "at least 1"}},
		{"empty entry", addrs(""), []string{"spec.addresses[0]"}},
		{"negative priority", heraldv1.IPAddressPoolSpec{Addresses: addrs("10.0.0.0/30").Addresses,
			AllocateTo: &heraldv1.ServiceAllocation{Priority: -1}}, []string{"spec.serviceAllocation.priority", "-1", "greater than or equal to 0"}},
		{"duplicate namespaces", heraldv1.IPAddressPoolSpec{Addresses: addrs("10.0.0.0/30").Addresses,
			AllocateTo: &heraldv1.ServiceAllocation{Namespaces: []string{"a", "b", "a"}}}, []string{"spec.serviceAllocation.namespaces[2]", `Duplicate value: "a"`}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := pool("p"+strings.Repeat("x", i), tc.spec)
			err := env.Client.Create(ctx, p)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("refused a valid pool: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted an invalid pool %v", tc.spec.Addresses)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}

	t.Run("defaults", func(t *testing.T) {
		p := pool("defaults", addrs("10.9.0.0/29"))
		if err := env.Client.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		if p.Spec.AutoAssign == nil || !*p.Spec.AutoAssign {
			t.Errorf("autoAssign defaulted to %v, want true", p.Spec.AutoAssign)
		}
	})
	t.Run("metallb yaml fields", func(t *testing.T) {
		p := pool("metallb", addrs("10.8.0.0/29"))
		p.Spec.AutoAssign = ptr.To(false)
		p.Spec.AvoidBuggyIPs = true
		p.Spec.AllocateTo = &heraldv1.ServiceAllocation{Priority: 50, Namespaces: []string{"ns1"},
			NamespaceSelectors: []heraldv1.LabelSelector{{MatchLabels: map[string]heraldv1.LabelValue{"team": "a"}}},
			ServiceSelectors:   []heraldv1.LabelSelector{{MatchExpressions: []heraldv1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"web"}}}}}}
		if err := env.Client.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		adv := &heraldv1.L2Advertisement{ObjectMeta: metav1.ObjectMeta{Name: "adv", Namespace: "herald-system"},
			Spec: heraldv1.L2AdvertisementSpec{IPAddressPools: []string{"metallb"}, Interfaces: []string{"eth0"},
				NodeSelectors: []heraldv1.LabelSelector{{MatchLabels: map[string]heraldv1.LabelValue{"kubernetes.io/hostname": "worker"}}}}}
		if err := env.Client.Create(ctx, adv); err != nil {
			t.Fatal(err)
		}
	})
}

// TestSelectorAdmission sends each of the five selector fields bad selectors and checks
// that the API server refuses them with the field path and the bad value, and that
// valid selectors (MetalLB's documented examples among them) are accepted.
func TestSelectorAdmission(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	env.CreateNamespace(t, "herald-system")
	type req = heraldv1.LabelSelectorRequirement
	exprs := func(r ...req) heraldv1.LabelSelector { return heraldv1.LabelSelector{MatchExpressions: r} }
	labels := func(kv ...string) heraldv1.LabelSelector {
		m := map[string]heraldv1.LabelValue{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = heraldv1.LabelValue(kv[i+1])
		}
		return heraldv1.LabelSelector{MatchLabels: m}
	}
	// Each field puts the selector under test second, after a valid one, so the
	// paths show the index.
	fields := []struct {
		path   string
		object func(name string, s heraldv1.LabelSelector) client.Object
	}{
		{"spec.nodeSelectors", func(n string, s heraldv1.LabelSelector) client.Object {
			return &heraldv1.L2Advertisement{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: "herald-system"},
				Spec: heraldv1.L2AdvertisementSpec{NodeSelectors: []heraldv1.LabelSelector{labels("a", "b"), s}}}
		}},
		{"spec.ipAddressPoolSelectors", func(n string, s heraldv1.LabelSelector) client.Object {
			return &heraldv1.L2Advertisement{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: "herald-system"},
				Spec: heraldv1.L2AdvertisementSpec{IPAddressPoolSelectors: []heraldv1.LabelSelector{labels("a", "b"), s}}}
		}},
		{"spec.serviceSelectors", func(n string, s heraldv1.LabelSelector) client.Object {
			return &heraldv1.L2Advertisement{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: "herald-system"},
				Spec: heraldv1.L2AdvertisementSpec{ServiceSelectors: []heraldv1.LabelSelector{labels("a", "b"), s}}}
		}},
		{"spec.serviceAllocation.namespaceSelectors", func(n string, s heraldv1.LabelSelector) client.Object {
			return &heraldv1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: "herald-system"},
				Spec: heraldv1.IPAddressPoolSpec{Addresses: []heraldv1.AddressRange{"10.0.0.0/30"},
					AllocateTo: &heraldv1.ServiceAllocation{NamespaceSelectors: []heraldv1.LabelSelector{labels("a", "b"), s}}}}
		}},
		{"spec.serviceAllocation.serviceSelectors", func(n string, s heraldv1.LabelSelector) client.Object {
			return &heraldv1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: "herald-system"},
				Spec: heraldv1.IPAddressPoolSpec{Addresses: []heraldv1.AddressRange{"10.0.0.0/30"},
					AllocateTo: &heraldv1.ServiceAllocation{ServiceSelectors: []heraldv1.LabelSelector{labels("a", "b"), s}}}}
		}},
	}
	cases := []struct {
		name string
		sel  heraldv1.LabelSelector
		// want lists substrings of the error, "@" standing for the field's path;
		// empty means the object must be accepted.
		want []string
	}{
		{"metallb hostname", labels("kubernetes.io/hostname", "kind-worker"), nil},
		{"metallb not control plane", exprs(req{Key: "node-role.kubernetes.io/control-plane", Operator: "DoesNotExist"}), nil},
		{"in and exists", exprs(req{Key: "app", Operator: "In", Values: []string{"web", ""}}, req{Key: "tier", Operator: "Exists"}), nil},
		{"empty label value", labels("team", ""), nil},
		{"empty selector", heraldv1.LabelSelector{}, nil},
		{"bad operator", exprs(req{Key: "a", Operator: "Bogus", Values: []string{"x"}}),
			[]string{"@[1].matchExpressions[0].operator", `operator "Bogus" is not one of In, NotIn, Exists, DoesNotExist`}},
		{"in without values", exprs(req{Key: "a", Operator: "In"}),
			[]string{"@[1].matchExpressions[0].values", "operator In needs at least one value"}},
		{"notin with empty values", exprs(req{Key: "a", Operator: "NotIn", Values: []string{}}),
			[]string{"@[1].matchExpressions[0].values", "operator NotIn needs at least one value"}},
		{"exists with values", exprs(req{Key: "a", Operator: "Exists", Values: []string{"x", "y"}}),
			[]string{"@[1].matchExpressions[0].values", `operator Exists takes no values, got "x", "y"`}},
		{"bad key in matchLabels", labels("bad key!", "x"),
			[]string{"@[1].matchLabels", `key "bad key!" is not a qualified name`}},
		{"bad key in matchExpressions", exprs(req{Key: "bad key!", Operator: "Exists"}),
			[]string{"@[1].matchExpressions[0].key", `key "bad key!" is not a qualified name`}},
		{"bad key prefix", exprs(req{Key: "Bad_Prefix/name", Operator: "Exists"}),
			[]string{"@[1].matchExpressions[0].key", `key "Bad_Prefix/name" is not`}},
		{"bad value in matchLabels", labels("team", "a b"),
			[]string{"@[1].matchLabels[team]", `value "a b" is not a label value`}},
		{"bad value in matchExpressions", exprs(req{Key: "a", Operator: "In", Values: []string{"ok", "-x"}}),
			[]string{"@[1].matchExpressions[0].values[1]", `value "-x" is not a label value`}},
	}
	for fi, f := range fields {
		for ci, tc := range cases {
			t.Run(f.path+"/"+tc.name, func(t *testing.T) {
				obj := f.object(fmt.Sprintf("s%d-%d", fi, ci), tc.sel)
				err := env.Client.Create(ctx, obj)
				if len(tc.want) == 0 {
					if err != nil {
						t.Fatalf("refused a valid selector: %v", err)
					}
					return
				}
				if err == nil {
					t.Fatalf("accepted an invalid selector %+v", tc.sel)
				}
				for _, w := range tc.want {
					if w = strings.ReplaceAll(w, "@", f.path); !strings.Contains(err.Error(), w) {
						t.Errorf("error lacks %q:\n%v", w, err)
					}
				}
			})
		}
	}
}
