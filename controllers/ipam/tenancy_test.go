package ipam

import (
	"errors"
	"strings"
	"testing"
)

// TestTenancy: Services of different namespaces share an IP only in a pool that allows
// it, whatever their sharing keys, and by no path: a requested IP, automatic packing,
// a restart, a pool that stops allowing it.
func TestTenancy(t *testing.T) {
	pools := func(t *testing.T) []Pool {
		return []Pool{
			mkPool(t, "default", []string{"10.0.0.0/24"}),
			mkPool(t, "shared", []string{"10.0.1.0/24"}, crossNamespace),
			mkPool(t, "team-a", []string{"10.0.3.0/24"}, noAutoAssign, allocateTo(0, []string{"team-a"}, nil, nil)),
		}
	}
	web := mkSvc("team-a/web", requested("10.0.0.5"), sharing("a-key"), ports("TCP/80"))
	sharedWeb := mkSvc("team-a/web", requested("10.0.1.5"), sharing("a-key"), ports("TCP/80"))
	notAvailable := "IP 10.0.0.5 is not available to this Service"
	cases := []struct {
		name  string
		steps []step
	}{
		{name: "same key, other namespace: refused", steps: []step{
			{alloc: &web, want: []string{"10.0.0.5"}, wantPool: "default"},
			{alloc: alloc(mkSvc("team-b/api", requested("10.0.0.5"), sharing("a-key"), ports("TCP/8080"))), wantErr: ErrIPInUse, errText: notAvailable},
		}},
		{name: "same key, same namespace: shared", steps: []step{
			{alloc: &web, want: []string{"10.0.0.5"}, wantPool: "default"},
			{alloc: alloc(mkSvc("team-a/api", requested("10.0.0.5"), sharing("a-key"), ports("TCP/8080"))), want: []string{"10.0.0.5"}, wantPool: "default"},
		}},
		{name: "automatic packing stays in the namespace", steps: []step{
			{alloc: alloc(mkSvc("team-a/web", sharing("a-key"), ports("TCP/80"))), want: []string{"10.0.0.0"}, wantPool: "default"},
			{alloc: alloc(mkSvc("team-b/api", sharing("a-key"), ports("TCP/8080"))), want: []string{"10.0.0.1"}, wantPool: "default"},
			{alloc: alloc(mkSvc("team-a/api", sharing("a-key"), ports("TCP/8080"))), want: []string{"10.0.0.0"}, wantPool: "default"},
			{alloc: alloc(mkSvc("team-b/db", sharing("a-key"), ports("TCP/5432"))), want: []string{"10.0.0.1"}, wantPool: "default"},
		}},
		{name: "a pool that allows it shares across namespaces", steps: []step{
			{alloc: &sharedWeb, want: []string{"10.0.1.5"}, wantPool: "shared"},
			{alloc: alloc(mkSvc("team-b/api", requested("10.0.1.5"), sharing("a-key"), ports("TCP/8080"))), want: []string{"10.0.1.5"}, wantPool: "shared"},
			{alloc: alloc(mkSvc("team-c/api", inPool("shared"), sharing("a-key"), ports("TCP/9090"))), want: []string{"10.0.1.5"}, wantPool: "shared"},
		}},
		{name: "a pool that allows it still names no other namespace's Service, key or port", steps: []step{
			{alloc: &sharedWeb, want: []string{"10.0.1.5"}, wantPool: "shared"},
			{alloc: alloc(mkSvc("team-b/api", requested("10.0.1.5"), sharing("b-key"), ports("TCP/8080"))), wantErr: ErrIPInUse, errText: "IP 10.0.1.5 is not available to this Service"},
			{alloc: alloc(mkSvc("team-b/api", requested("10.0.1.5"), sharing("a-key"), ports("TCP/80"))), wantErr: ErrIPInUse, errText: "IP 10.0.1.5 is not available to this Service"},
			{alloc: alloc(mkSvc("team-b/api", requested("10.0.1.5"), sharing("a-key"), ports("TCP/8080"), backend("app=b"))), wantErr: ErrIPInUse, errText: "IP 10.0.1.5 is not available to this Service"},
		}},
		{name: "restart: the younger Service of another namespace does not keep the IP", steps: []step{
			{restore: &web, ips: []string{"10.0.0.5"}},
			{restore: alloc(mkSvc("team-b/api", sharing("a-key"), ports("TCP/8080"))), ips: []string{"10.0.0.5"}, wantErr: ErrIPInUse, errText: notAvailable},
		}},
		{name: "recreated: sharing left the other namespace nothing to keep", steps: []step{
			{alloc: &web, want: []string{"10.0.0.5"}, wantPool: "default"},
			{alloc: alloc(mkSvc("team-b/api", requested("10.0.0.5"), sharing("a-key"), ports("TCP/8080"))), wantErr: ErrIPInUse, errText: notAvailable},
			{release: "team-a/web", want: []string{"10.0.0.5"}},
			{alloc: &web, want: []string{"10.0.0.5"}, wantPool: "default"},
		}},
		{name: "a namespace's own pool is out of reach even while its IP is free", steps: []step{
			{alloc: alloc(mkSvc("team-a/db", requested("10.0.3.5"))), want: []string{"10.0.3.5"}, wantPool: "team-a"},
			{release: "team-a/db", want: []string{"10.0.3.5"}},
			{alloc: alloc(mkSvc("team-b/api", requested("10.0.3.5"), ports("TCP/8080"))), wantErr: ErrNoUsablePool, errText: "IP 10.0.3.5 is not available to this Service"},
			{alloc: alloc(mkSvc("team-a/db", requested("10.0.3.5"))), want: []string{"10.0.3.5"}, wantPool: "team-a"},
		}},
		{name: "a pool that stops allowing it: the first holder keeps the IP, the others move", steps: []step{
			{alloc: &sharedWeb, want: []string{"10.0.1.5"}, wantPool: "shared"},
			{alloc: alloc(mkSvc("team-b/api", sharing("a-key"), ports("TCP/8080"), inPool("shared"))), want: []string{"10.0.1.5"}, wantPool: "shared"},
			{setPools: []Pool{mkPool(t, "default", []string{"10.0.0.0/24"}), mkPool(t, "shared", []string{"10.0.1.0/24"})}},
			{alloc: &sharedWeb, want: []string{"10.0.1.5"}, wantPool: "shared", wantChanged: no()},
			{alloc: alloc(mkSvc("team-b/api", sharing("a-key"), ports("TCP/8080"), inPool("shared"))), want: []string{"10.0.1.0"}, wantPool: "shared", wantChanged: yes()},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := New()
			if probs := a.SetPools(pools(t)); len(probs) != 0 {
				t.Fatal(probs)
			}
			runSteps(t, a, c.steps)
		})
	}
}

// TestTenancyErrorsSayNothingOfOtherNamespaces: the refusal of an IP another namespace
// holds reads exactly as that of an IP outside the pools the namespace may use, and
// carries nothing of the holder.
func TestTenancyErrorsSayNothingOfOtherNamespaces(t *testing.T) {
	a := New()
	a.SetPools([]Pool{
		mkPool(t, "default", []string{"10.0.0.0/24"}),
		mkPool(t, "team-a", []string{"10.0.3.0/24"}, allocateTo(0, []string{"team-a"}, nil, nil)),
	})
	if _, err := a.Allocate(mkSvc("team-a/web", requested("10.0.0.5"), sharing("a-key"), ports("TCP/80"))); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Allocate(mkSvc("team-a/db", requested("10.0.3.5"), ports("TCP/5432"))); err != nil {
		t.Fatal(err)
	}
	refusal := func(ip string) string {
		t.Helper()
		_, err := a.Allocate(mkSvc("team-b/api", requested(ip), sharing("a-key"), ports("TCP/8080")))
		if err == nil {
			t.Fatalf("team-b got %s", ip)
		}
		return strings.ReplaceAll(err.Error(), ip, "IP")
	}
	held, notSelected, outside := refusal("10.0.0.5"), refusal("10.0.3.5"), refusal("10.9.0.5")
	if held != notSelected || held != outside {
		t.Errorf("refusals differ:\n held by another namespace: %s\n in a pool not for team-b: %s\n outside every pool: %s", held, notSelected, outside)
	}
	for _, secret := range []string{"team-a", "web", "db", "a-key", "80", "5432"} {
		if strings.Contains(held, secret) || strings.Contains(notSelected, secret) {
			t.Errorf("refusal %q tells %q", held, secret)
		}
	}
	_, err := a.Allocate(mkSvc("team-b/api", requested("10.0.0.5")))
	if !errors.Is(err, ErrIPInUse) {
		t.Errorf("held by another namespace: %v is not ErrIPInUse", err)
	}
}

// A pool that stops allowing namespaces to share names the Services that must move.
func TestNotAllowedToShare(t *testing.T) {
	a := New()
	a.SetPools([]Pool{mkPool(t, "shared", []string{"10.0.1.0/24"}, crossNamespace)})
	for _, s := range []Service{
		mkSvc("team-a/web", requested("10.0.1.5"), sharing("k"), ports("TCP/80")),
		mkSvc("team-b/api", requested("10.0.1.5"), sharing("k"), ports("TCP/81")),
		mkSvc("team-a/db", requested("10.0.1.5"), sharing("k"), ports("TCP/82")),
		mkSvc("team-c/x", requested("10.0.1.6"), sharing("k"), ports("TCP/80")),
	} {
		if _, err := a.Allocate(s); err != nil {
			t.Fatal(err)
		}
	}
	if got := a.NotAllowedToShare(); len(got) != 0 {
		t.Fatalf("while the pool allows it: %q", got)
	}
	a.SetPools([]Pool{mkPool(t, "shared", []string{"10.0.1.0/24"})})
	if got := a.NotAllowedToShare(); strings.Join(got, " ") != "team-b/api" {
		t.Fatalf("after the pool stops allowing it: %q, want team-b/api", got)
	}
	res, err := a.Allocate(mkSvc("team-b/api", sharing("k"), ports("TCP/81")))
	if err != nil || res.IPs[0].String() == "10.0.1.5" {
		t.Fatalf("team-b/api: %v %v, want another IP", res.IPs, err)
	}
	if got := a.NotAllowedToShare(); len(got) != 0 {
		t.Fatalf("after team-b/api moved: %q", got)
	}
}
