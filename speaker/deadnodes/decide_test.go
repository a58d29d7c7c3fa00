package deadnodes

import (
	"reflect"
	"testing"
	"time"
)

func TestDecide(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	lost := t0.Add(-time.Second)
	fresh := Renewal{RenewedAt: t0.Add(-3 * time.Second), Duration: 15 * time.Second}
	base := func() Input {
		return Input{
			Self: "w2", Quorum: true, Live: []string{"w2", "w3"},
			Lost:    map[string]time.Time{"w1": lost},
			Records: map[string]Renewal{"w1": fresh, "w2": fresh, "w3": fresh},
			Nodes:   []string{"cp", "w1", "w2", "w3"},
			Now:     t0,
		}
	}
	tests := []struct {
		name string
		edit func(*Input)
		want []Node
	}{
		{name: "lost without a word: withheld since it was lost", want: []Node{{Name: "w1", Since: lost}}},
		{name: "a probe sent after the loss went unanswered: unreachable",
			edit: func(in *Input) { in.SilentAt = map[string]time.Time{"w1": lost.Add(10 * time.Millisecond)} },
			want: []Node{{Name: "w1", Since: lost, Unreachable: true}}},
		{name: "an unanswered probe from before the loss proves nothing",
			edit: func(in *Input) { in.SilentAt = map[string]time.Time{"w1": lost.Add(-time.Minute)} },
			want: []Node{{Name: "w1", Since: lost}}},
		{name: "no majority: this speaker may be the one cut off",
			edit: func(in *Input) { in.Quorum = false }},
		{name: "it said it was leaving: a speaker stopping on a live node",
			edit: func(in *Input) { in.Left = map[string]bool{"w1": true} }},
		{name: "it said it was leaving and its host answers: a restart",
			edit: func(in *Input) {
				in.Left = map[string]bool{"w1": true}
				in.AliveAt = map[string]time.Time{"w1": lost.Add(5 * time.Millisecond)}
			}},
		{name: "it said it was leaving, then a probe went unanswered: the node shut down",
			edit: func(in *Input) {
				in.Left = map[string]bool{"w1": true}
				in.SilentAt = map[string]time.Time{"w1": lost.Add(time.Second)}
			},
			want: []Node{{Name: "w1", Since: lost, Unreachable: true, Left: true}}},
		{name: "it said it was leaving; an unanswered probe from before it left proves nothing",
			edit: func(in *Input) {
				in.Left = map[string]bool{"w1": true}
				in.SilentAt = map[string]time.Time{"w1": lost.Add(-time.Second)}
			}},
		{name: "it said it was leaving, then renewed its record: alive",
			edit: func(in *Input) {
				in.Left = map[string]bool{"w1": true}
				in.SilentAt = map[string]time.Time{"w1": lost.Add(time.Second)}
				r := in.Records["w1"]
				r.ChangedAt = lost.Add(2 * time.Second)
				in.Records["w1"] = r
			}},
		{name: "its record changed after the loss: cut off from memberlist, alive",
			edit: func(in *Input) {
				r := in.Records["w1"]
				r.ChangedAt = lost.Add(300 * time.Millisecond)
				in.Records["w1"] = r
			}},
		{name: "its record changed before the loss: no proof",
			edit: func(in *Input) { r := in.Records["w1"]; r.ChangedAt = lost.Add(-time.Second); in.Records["w1"] = r },
			want: []Node{{Name: "w1", Since: lost}}},
		{name: "its host answered a probe after the loss: only the speaker is down",
			edit: func(in *Input) { in.AliveAt = map[string]time.Time{"w1": lost.Add(5 * time.Millisecond)} }},
		{name: "an answer older than AliveFor proves nothing any more",
			edit: func(in *Input) {
				in.Now = lost.Add(time.Minute)
				in.AliveAt = map[string]time.Time{"w1": lost.Add(5 * time.Millisecond)}
				in.SilentAt = map[string]time.Time{"w1": lost.Add(50 * time.Second)}
			},
			want: []Node{{Name: "w1", Since: lost, Unreachable: true}}},
		{name: "live again", edit: func(in *Input) { in.Live = append(in.Live, "w1") }},
		{name: "its Node is gone", edit: func(in *Input) { in.Nodes = []string{"cp", "w2", "w3"} }},
		{name: "never a speaker (no record, never lost)", edit: func(in *Input) { in.Lost = nil; delete(in.Records, "w1") }},
		{name: "dead before this speaker started: its record expired",
			edit: func(in *Input) {
				in.Lost = nil
				in.Records["w1"] = Renewal{RenewedAt: t0.Add(-20 * time.Second), Duration: 15 * time.Second}
			},
			want: []Node{{Name: "w1", Since: t0.Add(-5 * time.Second)}}},
		{name: "not seen die and its record is fresh: nothing known",
			edit: func(in *Input) { in.Lost = nil }},
		{name: "never itself", edit: func(in *Input) { in.Self = "w1" }},
		{name: "several, sorted",
			edit: func(in *Input) { in.Live = []string{"w2"}; in.Lost["w3"] = lost.Add(time.Millisecond) },
			want: []Node{{Name: "w1", Since: lost}, {Name: "w3", Since: lost.Add(time.Millisecond)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := base()
			if tt.edit != nil {
				tt.edit(&in)
			}
			got := Decide(DefaultConfig(), in)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Decide = %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestSuspectsIgnoreProbeAnswers(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	in := Input{
		Self: "w2", Quorum: true, Live: []string{"w2", "w3"},
		Lost:    map[string]time.Time{"w1": t0.Add(-time.Second)},
		AliveAt: map[string]time.Time{"w1": t0},
		Nodes:   []string{"w1", "w2", "w3"}, Now: t0,
	}
	if got := Decide(DefaultConfig(), in); len(got) != 0 {
		t.Fatalf("Decide = %v; w1 answered a probe", got)
	}
	if got := Suspects(in); !reflect.DeepEqual(got, []string{"w1"}) {
		t.Errorf("Suspects = %v, want [w1]: a node that answered is probed again", got)
	}
}

func TestSuspectsIncludeNodesThatSaidGoodbye(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	in := Input{
		Self: "w2", Quorum: true, Live: []string{"w2"},
		Lost:  map[string]time.Time{"w1": t0.Add(-time.Second), "w3": t0.Add(-time.Second)},
		Left:  map[string]bool{"w1": true},
		Nodes: []string{"w1", "w2", "w3"}, Now: t0,
	}
	if got := Suspects(in); !reflect.DeepEqual(got, []string{"w1", "w3"}) {
		t.Errorf("Suspects = %v, want [w1 w3]: a node whose speaker said goodbye is probed until it is back", got)
	}
	if got := Decide(DefaultConfig(), in); !reflect.DeepEqual(got, []Node{{Name: "w3", Since: t0.Add(-time.Second)}}) {
		t.Errorf("Decide = %v, want only w3: w1 said goodbye and no probe went unanswered", got)
	}
}
