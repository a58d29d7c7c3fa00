package speaker

import (
	"time"

	"github.com/go-logr/logr"
)

// liveness is what the loop remembers of the membership between passes: who is live,
// since when, and when the others were lost.
type liveness struct {
	live   map[string]bool
	since  map[string]time.Time // when each live member last became live
	lostAt map[string]time.Time
}

// note records the live members (members.Live) as this pass sees them, when
// members disappear, for the failover histogram, and says whether a member that had
// disappeared is back.
func (l *liveness) note(members []string, log logr.Logger) (returned bool) {
	now := time.Now()
	live := map[string]bool{}
	for _, m := range members {
		live[m] = true
		if !l.live[m] {
			l.since[m] = now
		}
		if _, lost := l.lostAt[m]; lost {
			returned = true
			delete(l.lostAt, m)
		}
	}
	for m := range l.live {
		if !live[m] {
			l.lostAt[m] = now
			delete(l.since, m)
			log.Info("speaker left memberlist", "node", m)
		}
	}
	l.live = live
	return returned
}
