//go:build linux

package main

import (
	"os"
	"strings"
	"testing"
)

// workedExampleArgs are the settings of the worked example (testdata/worked-example.yaml).
var workedExampleArgs = []string{
	"-node-name", "test-node", "-node-ip", "192.168.0.2", "-cluster-cidr", "10.0.0.0/8",
	"-localhost-nodeports=false", "-random-fully=false",
}

func runCLI(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	var out strings.Builder
	if err := run(args, strings.NewReader(stdin), &out); err != nil {
		t.Fatalf("run %q: %v", args, err)
	}
	return out.String()
}

// testdata/worked-example.nat is the worked example's nat table, as kube-proxy writes it.
func TestWorkedExampleFile(t *testing.T) {
	want, err := os.ReadFile("testdata/worked-example.nat")
	if err != nil {
		t.Fatal(err)
	}
	nat := runCLI(t, "", append(workedExampleArgs, "-table", "nat", "testdata/worked-example.yaml")...)
	if nat != string(want) {
		t.Errorf("nat output differs from testdata/worked-example.nat\n--- got:\n%s--- want:\n%s", nat, want)
	}
}

// A kubectl-style List on stdin gives the same rules as separate documents.
func TestListOnStdin(t *testing.T) {
	list := `{"apiVersion":"v1","kind":"List","items":[
	  {"apiVersion":"v1","kind":"Service","metadata":{"namespace":"ns1","name":"svc1"},
	   "spec":{"type":"ClusterIP","clusterIP":"172.30.0.41","clusterIPs":["172.30.0.41"],"ports":[{"name":"p80","protocol":"TCP","port":80}]}},
	  {"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","metadata":{"namespace":"ns1","name":"svc1-1","labels":{"kubernetes.io/service-name":"svc1"}},
	   "addressType":"IPv4","ports":[{"name":"p80","port":80,"protocol":"TCP"}],"endpoints":[{"addresses":["10.180.0.1"]}]}]}`
	out := runCLI(t, list, append(workedExampleArgs, "-canonical", "-")...)
	want := `-A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 -> 10.180.0.1:80" -j KUBE-SEP-SXIVWICOYRO3J4NJ` + "\n"
	if !strings.Contains(out, want) {
		t.Errorf("output lacks %q:\n%s", want, out)
	}
}

func TestRejectsOtherKinds(t *testing.T) {
	err := run(append(workedExampleArgs, "-"), strings.NewReader("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n"), &strings.Builder{})
	if err == nil || !strings.Contains(err.Error(), "unsupported kind Pod") {
		t.Fatalf("run error = %v, want unsupported kind Pod", err)
	}
}

// -mode nftables prints kube-proxy's nftables ruleset for the worked example.
func TestNFTablesMode(t *testing.T) {
	out := runCLI(t, "", "-mode", "nftables", "-node-name", "test-node", "-node-ip", "192.168.0.2",
		"-cluster-cidr", "10.0.0.0/8", "-service-cidr", "172.30.0.0/16", "testdata/worked-example.yaml")
	for _, want := range []string{
		`add element ip kube-proxy service-ips { 1.2.3.4 . tcp . 80 : goto external-ULMVA6XW-ns1/svc1/tcp/p80 }`,
		`add rule ip kube-proxy cluster-ips-check ip daddr { 172.30.0.0/16 } drop comment "Drop traffic to unallocated ClusterIPs"`,
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
