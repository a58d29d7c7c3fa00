package lab

import (
	"slices"
	"time"
)

// ARPRound is one request of a watch and the distinct MACs that replied to it, sorted.
type ARPRound struct {
	At   time.Time
	MACs []string
}

// ARPSummary is what a client asking for one IP saw over a window, request by request:
// whether each request got exactly one answer, as it must with one owner on the wire.
type ARPSummary struct {
	From, To time.Time
	// Requests counts the requests sent in the window.
	Requests int
	// Doubled are the requests more than one MAC answered: two nodes claimed the IP.
	Doubled []ARPRound
	// Unanswered counts the requests no MAC answered.
	Unanswered int
	// Silence is the longest run of unanswered requests: from its first request to the
	// request after its last, or To if that one came later, or its last if none did.
	// SilenceAt is when it began and SilentRequests how many requests it spans.
	Silence        time.Duration
	SilenceAt      time.Time
	SilentRequests int
	// MACs are the distinct MACs that answered the window's requests, sorted.
	MACs []string
}

// Summary matches the replies the watch received to its requests sent from from until
// to (SummarizeARP).
func (w *ARPWatch) Summary(from, to time.Time) ARPSummary {
	w.mu.Lock()
	requests, replies := slices.Clone(w.requests), slices.Clone(w.replies)
	w.mu.Unlock()
	return SummarizeARP(requests, replies, from, to)
}

// SummarizeARP summarises the requests sent in [from, to), both lists in the order sent
// and received: a reply
// belongs to the last request sent before it arrived, since the next request goes out
// only an interval later, far longer than an answer takes on a LAN. Replies to a
// window's last request count until the next request, even after to.
func SummarizeARP(requests []time.Time, replies []ARPReply, from, to time.Time) ARPSummary {
	sum := ARPSummary{From: from, To: to}
	var (
		runStart time.Time
		runLen   int
	)
	endRun := func(end time.Time) {
		if runLen > 0 && end.Sub(runStart) > sum.Silence {
			sum.Silence, sum.SilenceAt, sum.SilentRequests = end.Sub(runStart), runStart, runLen
		}
		runLen = 0
	}
	r := 0 // the first reply not yet matched
	for i, at := range requests {
		if at.Before(from) || !at.Before(to) {
			continue
		}
		for r < len(replies) && replies[r].At.Before(at) {
			r++ // a reply to an earlier request
		}
		var macs []string
		for ; r < len(replies) && (i+1 == len(requests) || replies[r].At.Before(requests[i+1])); r++ {
			if !slices.Contains(macs, replies[r].MAC) {
				macs = append(macs, replies[r].MAC)
			}
		}
		slices.Sort(macs)
		sum.Requests++
		for _, m := range macs {
			if !slices.Contains(sum.MACs, m) {
				sum.MACs = append(sum.MACs, m)
			}
		}
		switch {
		case len(macs) == 0:
			sum.Unanswered++
			if runLen == 0 {
				runStart = at
			}
			runLen++
			if i+1 == len(requests) || !requests[i+1].Before(to) {
				// The run reaches the end of the window.
				end := at
				if i+1 < len(requests) {
					end = to
				}
				endRun(end)
			}
		default:
			endRun(at)
			if len(macs) > 1 {
				sum.Doubled = append(sum.Doubled, ARPRound{At: at, MACs: macs})
			}
		}
	}
	slices.Sort(sum.MACs)
	return sum
}
