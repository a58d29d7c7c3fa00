package metallbmigrate

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

// convertYAML runs MetalLB YAML through ReadFiles, Convert and WriteYAML.
func convertYAML(t *testing.T, in string) (string, Result) {
	t.Helper()
	input, err := ReadFiles([]string{"-"}, strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	res := Convert(input.Objects, "herald-system")
	var out bytes.Buffer
	if err := WriteYAML(&out, res.Objects); err != nil {
		t.Fatal(err)
	}
	return out.String(), res
}

func TestConvert(t *testing.T) {
	cases := []struct {
		name    string
		in      string
		want    string
		refused []string // substrings, one per refusal, in order
	}{{
		name: "pool and advertisement, advertisement first in the input",
		in: `
apiVersion: metallb.io/v1beta1
kind: L2Advertisement
metadata: {name: l2, namespace: metallb-system}
spec:
  ipAddressPools: [first]
  ipAddressPoolSelectors: [{matchLabels: {tier: gold}}]
  nodeSelectors: [{matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [a, b]}]}]
  interfaces: [eth0]
---
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata:
  name: first
  namespace: metallb-system
  labels: {tier: gold}
  annotations: {kubectl.kubernetes.io/last-applied-configuration: "{}"}
  uid: 1234
  resourceVersion: "7"
spec:
  addresses: [192.168.10.0/24, "fc00::10-fc00::20"]
  autoAssign: false
  avoidBuggyIPs: true
  serviceAllocation:
    priority: 50
    namespaces: [team-a]
    namespaceSelectors: [{matchLabels: {team: a}}]
    serviceSelectors: [{matchExpressions: [{key: app, operator: Exists}]}]
status:
  assignedIPv4: 3
`,
		want: `apiVersion: herald.dev/v1beta1
kind: IPAddressPool
metadata:
  annotations:
    herald.dev/migrated-from: metallb.io/v1beta1 IPAddressPool metallb-system/first
  labels:
    tier: gold
  name: first
  namespace: herald-system
spec:
  addresses:
  - 192.168.10.0/24
  - fc00::10-fc00::20
  autoAssign: false
  avoidBuggyIPs: true
  serviceAllocation:
    namespaceSelectors:
    - matchLabels:
        team: a
    namespaces:
    - team-a
    priority: 50
    serviceSelectors:
    - matchExpressions:
      - key: app
        operator: Exists
---
apiVersion: herald.dev/v1beta1
kind: L2Advertisement
metadata:
  annotations:
    herald.dev/migrated-from: metallb.io/v1beta1 L2Advertisement metallb-system/l2
  name: l2
  namespace: herald-system
spec:
  interfaces:
  - eth0
  ipAddressPoolSelectors:
  - matchLabels:
      tier: gold
  ipAddressPools:
  - first
  nodeSelectors:
  - matchExpressions:
    - key: kubernetes.io/hostname
      operator: In
      values:
      - a
      - b
`,
	}, {
		name: "kubectl get -o yaml List, with an empty advertisement",
		in: `
apiVersion: v1
kind: List
items:
- apiVersion: metallb.io/v1beta1
  kind: IPAddressPool
  metadata: {name: p, namespace: metallb-system}
  spec: {addresses: [10.0.0.0/29]}
- apiVersion: metallb.io/v1beta1
  kind: L2Advertisement
  metadata: {name: all, namespace: metallb-system}
`,
		want: `apiVersion: herald.dev/v1beta1
kind: IPAddressPool
metadata:
  annotations:
    herald.dev/migrated-from: metallb.io/v1beta1 IPAddressPool metallb-system/p
  name: p
  namespace: herald-system
spec:
  addresses:
  - 10.0.0.0/29
---
apiVersion: herald.dev/v1beta1
kind: L2Advertisement
metadata:
  annotations:
    herald.dev/migrated-from: metallb.io/v1beta1 L2Advertisement metallb-system/all
  name: all
  namespace: herald-system
spec: {}
`,
	}, {
		name: "BGP kinds are refused, other objects ignored",
		in: `
apiVersion: metallb.io/v1beta2
kind: BGPPeer
metadata: {name: router, namespace: metallb-system}
spec: {myASN: 64500, peerASN: 64501, peerAddress: 10.0.0.1}
---
apiVersion: metallb.io/v1beta1
kind: BGPAdvertisement
metadata: {name: bgp, namespace: metallb-system}
spec: {ipAddressPools: [p]}
---
apiVersion: metallb.io/v1beta1
kind: BFDProfile
metadata: {name: fast, namespace: metallb-system}
---
apiVersion: metallb.io/v1beta1
kind: Community
metadata: {name: c, namespace: metallb-system}
---
apiVersion: metallb.io/v1beta1
kind: ServiceL2Status
metadata: {name: l2-abc, namespace: metallb-system}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: controller, namespace: metallb-system}
`,
		refused: []string{
			"metallb.io/v1beta2 BGPPeer metallb-system/router: herald announces at layer 2 only",
			"metallb.io/v1beta1 BGPAdvertisement metallb-system/bgp: herald announces at layer 2 only (ARP/NDP), it speaks no BGP; the IPs of pools p are announced only if an L2Advertisement selects them",
			"metallb.io/v1beta1 BFDProfile metallb-system/fast: BFD",
			"metallb.io/v1beta1 Community metallb-system/c: BGP communities",
		},
	}, {
		name: "a field herald lacks refuses the whole object, naming the field",
		in: `
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: p, namespace: metallb-system}
spec:
  addresses: [10.0.0.0/29]
  serviceAllocation: {priority: 1, futureField: x}
---
apiVersion: metallb.io/v1beta1
kind: L2Advertisement
metadata: {name: l2, namespace: metallb-system}
spec:
  nodeSelectors: [{matchLabels: {a: b}, matchFields: []}]
---
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: q, namespace: metallb-system}
spec: {addresses: [10.0.1.0/29], autoAssign: "yes"}
`,
		refused: []string{
			"IPAddressPool metallb-system/p: herald's IPAddressPool has no field spec.serviceAllocation.futureField",
			"L2Advertisement metallb-system/l2: herald's L2Advertisement has no field spec.nodeSelectors[0].matchFields",
			"IPAddressPool metallb-system/q: spec: json: cannot unmarshal string",
		},
	}, {
		name: "two pools of one name from two namespaces",
		in: `
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: p, namespace: metallb-system}
spec: {addresses: [10.0.0.0/29]}
---
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: p, namespace: other}
spec: {addresses: [10.0.1.0/29]}
`,
		want: `apiVersion: herald.dev/v1beta1
kind: IPAddressPool
metadata:
  annotations:
    herald.dev/migrated-from: metallb.io/v1beta1 IPAddressPool metallb-system/p
  name: p
  namespace: herald-system
spec:
  addresses:
  - 10.0.0.0/29
`,
		refused: []string{"IPAddressPool other/p: IPAddressPool herald-system/p already comes from metallb.io/v1beta1 IPAddressPool metallb-system/p"},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, res := convertYAML(t, c.in)
			if got != c.want {
				t.Errorf("output:\n%s\nwant:\n%s", got, c.want)
			}
			if len(res.Refused) != len(c.refused) {
				t.Fatalf("refused %q, want %d refusals", res.Refused, len(c.refused))
			}
			for i, r := range res.Refused {
				if !strings.Contains(r.String(), c.refused[i]) {
					t.Errorf("refusal %d = %q, want it to contain %q", i, r, c.refused[i])
				}
			}
		})
	}
}

func TestSummarizeServices(t *testing.T) {
	input, err := ReadFiles([]string{"-"}, strings.NewReader(`
apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: default
  annotations:
    metallb.universe.tf/address-pool: gone
    metallb.universe.tf/ip-allocated-from-pool: gone
    metallb.io/unknown-thing: x
spec: {type: LoadBalancer}
status: {loadBalancer: {ingress: [{ip: 10.0.0.3}]}}
---
apiVersion: v1
kind: Service
metadata:
  name: fine
  namespace: apps
  annotations: {metallb.io/allow-shared-ip: k, metallb.io/address-pool: p}
spec: {type: LoadBalancer}
---
apiVersion: v1
kind: Service
metadata: {name: plain, namespace: default}
spec: {type: LoadBalancer}
`))
	if err != nil {
		t.Fatal(err)
	}
	notes := SummarizeServices(input.Services, []string{"p"})
	if len(notes) != 2 || notes[0].Service != "apps/fine" || notes[1].Service != "default/web" {
		t.Fatalf("notes = %+v, want apps/fine and default/web", notes)
	}
	if len(notes[0].Problems) != 0 {
		t.Errorf("apps/fine: problems %q, want none", notes[0].Problems)
	}
	if !slices.Equal(notes[1].IPs, []string{"10.0.0.3"}) {
		t.Errorf("default/web: IPs %q", notes[1].IPs)
	}
	var out bytes.Buffer
	WriteServiceSummary(&out, notes)
	for _, want := range []string{
		`metallb.universe.tf/address-pool asks for pool "gone", which herald will not have`,
		"herald does not read metallb.io/unknown-thing",
		"default/web (10.0.0.3)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
}
