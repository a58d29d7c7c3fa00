package proxy

import "time"

// schedule decides when the next sync runs, like kube-proxy's BoundedFrequencyRunner:
// requests coalesce into one due time, and no sync starts less than minInterval after
// the previous one started, so a burst of changes costs one sync per interval.
type schedule struct {
	minInterval time.Duration
	lastRun     time.Time // start of the last sync; zero before the first
	due         time.Time // zero: nothing requested
}

// request asks for a sync at at, or as soon after it as minInterval allows. An earlier
// request wins over a later one.
func (s *schedule) request(at time.Time) {
	if !s.lastRun.IsZero() {
		if earliest := s.lastRun.Add(s.minInterval); at.Before(earliest) {
			at = earliest
		}
	}
	if s.due.IsZero() || at.Before(s.due) {
		s.due = at
	}
}

// next says how long to wait for the next sync; ok is false when none is requested.
func (s *schedule) next(now time.Time) (wait time.Duration, ok bool) {
	if s.due.IsZero() {
		return 0, false
	}
	return max(s.due.Sub(now), 0), true
}

// start records that a sync starts now and clears the request it served.
func (s *schedule) start(now time.Time) {
	s.lastRun, s.due = now, time.Time{}
}

// retryDelay is the wait before retrying after the n-th failed sync in a row (n >= 1):
// from one second (or minInterval, if longer) doubling to a minute, so a rule the
// kernel keeps refusing costs a full sync a minute rather than one per interval.
func retryDelay(n int, minInterval time.Duration) time.Duration {
	d := max(minInterval, time.Second)
	for i := 1; i < n && d < time.Minute; i++ {
		d *= 2
	}
	return min(d, max(time.Minute, minInterval))
}
