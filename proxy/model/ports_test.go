package model

import "testing"

func TestServicePortName(t *testing.T) {
	svc := ServiceName{Namespace: "ns1", Name: "svc1"}
	if got := servicePortName(svc, "p80"); got != "ns1/svc1:p80" {
		t.Errorf("named port: %q", got)
	}
	if got := servicePortName(svc, ""); got != "ns1/svc1" {
		t.Errorf("unnamed port: %q", got)
	}
}
