package metallbmigrate

import (
	"bytes"
	"strings"
	"testing"
)

// A MetalLB user whose Services share an IP across namespaces is told to set
// allowCrossNamespaceSharing on the pool holding it; sharing within one namespace
// needs nothing.
func TestSharedAcrossNamespaces(t *testing.T) {
	input, err := ReadFiles([]string{"-"}, strings.NewReader(`
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: first, namespace: metallb-system}
spec: {addresses: [10.0.0.0/24]}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: team-a, annotations: {metallb.io/allow-shared-ip: k}}
spec: {type: LoadBalancer}
status: {loadBalancer: {ingress: [{ip: 10.0.0.5}]}}
---
apiVersion: v1
kind: Service
metadata: {name: api, namespace: team-b, annotations: {metallb.io/allow-shared-ip: k}}
spec: {type: LoadBalancer}
status: {loadBalancer: {ingress: [{ip: 10.0.0.5}]}}
---
apiVersion: v1
kind: Service
metadata: {name: db, namespace: team-a, annotations: {metallb.io/allow-shared-ip: j}}
spec: {type: LoadBalancer}
status: {loadBalancer: {ingress: [{ip: 10.0.0.6}]}}
---
apiVersion: v1
kind: Service
metadata: {name: cache, namespace: team-a, annotations: {metallb.io/allow-shared-ip: j}}
spec: {type: LoadBalancer}
status: {loadBalancer: {ingress: [{ip: 10.0.0.6}]}}
`))
	if err != nil {
		t.Fatal(err)
	}
	res := Convert(input.Objects, "herald-system")
	shared := SharedAcrossNamespaces(input.Services, res.Objects)
	if len(shared) != 1 || shared[0].IP != "10.0.0.5" || shared[0].Pool != "first" ||
		strings.Join(shared[0].Services, " ") != "team-a/web team-b/api" {
		t.Fatalf("shared = %+v, want 10.0.0.5 of pool first, held by team-a/web and team-b/api", shared)
	}
	var out bytes.Buffer
	WriteSharedIPs(&out, shared)
	if want := `set spec.allowCrossNamespaceSharing: true on IPAddressPool "first"`; !strings.Contains(out.String(), want) {
		t.Errorf("warning %q lacks %q", out.String(), want)
	}
	if strings.Contains(out.String(), "10.0.0.6") {
		t.Errorf("warning %q names an IP shared within one namespace", out.String())
	}
}
