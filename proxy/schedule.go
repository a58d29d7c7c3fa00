package proxy

import "time"

// schedule decides when the next sync runs, like kube-proxy's BoundedFrequencyRunner:
// requests coalesce into one due time, and syncs run at most once per minInterval on
// average, with up to burst of them back to back after a quiet spell. kube-proxy uses a
// burst of 2, so a Service and its endpoints arriving a moment apart both reach the
// rules at once instead of the second waiting a whole interval.
//
// The rate limit is GCRA (a token bucket kept as one time): tat is when the bucket
// would be full again.
type schedule struct {
	minInterval time.Duration
	burst       int       // syncs allowed back to back; < 1 counts as 1
	tat         time.Time // zero before the first sync
	due         time.Time // zero: nothing requested
}

// earliest is the first time at or after at when a sync may start.
func (s *schedule) earliest(at time.Time) time.Time {
	if s.tat.IsZero() {
		return at
	}
	if allowed := s.tat.Add(-time.Duration(max(s.burst, 1)-1) * s.minInterval); at.Before(allowed) {
		return allowed
	}
	return at
}

// request asks for a sync at at, or as soon after it as the rate limit allows. An
// earlier request wins over a later one.
func (s *schedule) request(at time.Time) {
	at = s.earliest(at)
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
	if s.tat.Before(now) {
		s.tat = now
	}
	s.tat = s.tat.Add(s.minInterval)
	s.due = time.Time{}
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
