package speaker

import (
	"net/netip"
	"reflect"
	"testing"

	"herald.dev/herald/speaker/election"
)

func dec(ip, owner string, svcs ...string) election.Decision {
	return election.Decision{IP: netip.MustParseAddr(ip), Owner: owner, Services: svcs}
}

func TestTrackerPlans(t *testing.T) {
	tr := NewTracker("w1")
	steps := []struct {
		name      string
		decisions []election.Decision
		take      []string // ip<-previous
		change    []string
		release   []string // ip->next
		unowned   []string
	}{
		{"first election: take own IPs, nobody before", []election.Decision{dec("10.0.0.1", "w1", "a/s1"), dec("10.0.0.2", "w2", "a/s2"), dec("10.0.0.3", "", "a/s3")},
			[]string{"10.0.0.1<-"}, nil, nil, []string{"10.0.0.3"}},
		{"same again: nothing to do", []election.Decision{dec("10.0.0.1", "w1", "a/s1"), dec("10.0.0.2", "w2", "a/s2"), dec("10.0.0.3", "", "a/s3")},
			nil, nil, nil, nil},
		{"w2 dies: w1 takes .2 from w2", []election.Decision{dec("10.0.0.1", "w1", "a/s1"), dec("10.0.0.2", "w1", "a/s2"), dec("10.0.0.3", "", "a/s3")},
			[]string{"10.0.0.2<-w2"}, nil, nil, nil},
		{"a Service joins .1: changed", []election.Decision{dec("10.0.0.1", "w1", "a/s1", "a/s4"), dec("10.0.0.2", "w1", "a/s2"), dec("10.0.0.3", "", "a/s3")},
			nil, []string{"10.0.0.1"}, nil, nil},
		{"w2 back: .2 released to w2; .3 deleted", []election.Decision{dec("10.0.0.1", "w1", "a/s1", "a/s4"), dec("10.0.0.2", "w2", "a/s2")},
			nil, nil, []string{"10.0.0.2->w2"}, nil},
		{"everything deleted: .1 released to nobody", nil,
			nil, nil, []string{"10.0.0.1->"}, nil},
	}
	for _, st := range steps {
		p := tr.Apply(st.decisions, true)
		var take, change, release, unowned []string
		for _, x := range p.Take {
			take = append(take, x.IP.String()+"<-"+x.Previous)
		}
		for _, x := range p.Change {
			change = append(change, x.IP.String())
		}
		for _, x := range p.Release {
			release = append(release, x.IP.String()+"->"+x.Next)
		}
		for _, x := range p.Unowned {
			unowned = append(unowned, x.IP.String())
		}
		for _, c := range []struct {
			what      string
			got, want []string
		}{{"take", take, st.take}, {"change", change, st.change}, {"release", release, st.release}, {"unowned", unowned, st.unowned}} {
			if !reflect.DeepEqual(c.got, c.want) {
				t.Errorf("%s: %s = %v, want %v", st.name, c.what, c.got, c.want)
			}
		}
	}
	if got := tr.OwnedIPs(); len(got) != 0 {
		t.Errorf("owned after everything was deleted: %v", got)
	}
}

// Interfaces going from "every interface" (nil) to an explicit list is a change even
// when the list is empty-looking.
func TestTrackerInterfaceChange(t *testing.T) {
	tr := NewTracker("w1")
	d := dec("10.0.0.1", "w1", "a/s1")
	tr.Apply([]election.Decision{d}, true)
	d.Interfaces = []string{"eth1"}
	if p := tr.Apply([]election.Decision{d}, true); len(p.Change) != 1 {
		t.Fatalf("interfaces nil -> [eth1]: plan %+v, want one change", p)
	}
	if p := tr.Apply([]election.Decision{d}, true); !p.Empty() {
		t.Fatalf("same interfaces again: plan %+v, want empty", p)
	}
}

// A speaker in Hold keeps and releases but takes nothing, and a later election that
// may take does; Silence releases everything and forgets the owners.
func TestTrackerHoldAndSilence(t *testing.T) {
	tr := NewTracker("w1")
	tr.Apply([]election.Decision{dec("10.0.0.1", "w1", "a/s1"), dec("10.0.0.2", "w2", "a/s2")}, true)
	p := tr.Apply([]election.Decision{dec("10.0.0.1", "w1", "a/s1"), dec("10.0.0.2", "w1", "a/s2")}, false)
	if !p.Empty() {
		t.Fatalf("hold: plan %+v, want nothing taken", p)
	}
	p = tr.Apply([]election.Decision{dec("10.0.0.1", "w1", "a/s1"), dec("10.0.0.2", "w1", "a/s2")}, true)
	if len(p.Take) != 1 || p.Take[0].IP.String() != "10.0.0.2" || p.Take[0].Previous != "w2" {
		t.Fatalf("after hold: plan %+v, want .2 taken from w2", p)
	}
	p = tr.Silence()
	if len(p.Release) != 2 || len(tr.OwnedIPs()) != 0 {
		t.Fatalf("silence: plan %+v, owned %v; want both released", p, tr.OwnedIPs())
	}
	p = tr.Apply([]election.Decision{dec("10.0.0.1", "w1", "a/s1"), dec("10.0.0.2", "w2", "a/s2")}, true)
	if len(p.Take) != 1 || p.Take[0].Previous != "" {
		t.Fatalf("after silence: plan %+v, want .1 taken with no known previous owner", p)
	}
}
