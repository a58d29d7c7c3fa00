package quorum

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkDecide times one decision at N speakers, the moment after a death: every
// survivor's record lists every other survivor, the dead one's record still lists
// everyone, and a few survivors have not republished yet (they still list the dead
// one). A speaker decides after every record change it sees, so a death at N nodes
// costs each speaker up to N decisions.
func BenchmarkDecide(b *testing.B) {
	for _, n := range []int{100, 300, 1000} {
		b.Run(fmt.Sprintf("speakers=%d", n), func(b *testing.B) {
			names := make([]string, n)
			for i := range names {
				names[i] = fmt.Sprintf("node-%04d", i)
			}
			dead, survivors := names[1], append([]string{names[0]}, names[2:]...)
			var members []Member
			for _, s := range survivors {
				members = append(members, Member{Name: s, Since: at(-time.Minute)})
			}
			var records []Record
			for i, s := range names {
				list := survivors
				if s == dead || i%10 == 0 {
					list = names
				}
				records = append(records, rec(s, -100*time.Millisecond, list...))
			}
			in := Input{Self: names[0], Members: members, Records: records, APIUp: true, APIAt: at(0), RecordsReadAt: at(0),
				Lost: map[string]time.Time{dead: at(-200 * time.Millisecond)}, Now: at(0)}
			st := State{Started: true}
			if v, _ := Decide(DefaultConfig(), st, in); v.Mode != ModeQuorum {
				b.Fatalf("mode %s (%s), want Quorum", v.Mode, v.Reason)
			}
			b.ReportAllocs()
			for b.Loop() {
				Decide(DefaultConfig(), st, in)
			}
		})
	}
}
