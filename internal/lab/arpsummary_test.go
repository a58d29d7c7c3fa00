package lab

import (
	"slices"
	"testing"
	"time"
)

func TestSummarizeARP(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	// Requests every 10 ms from 0 to 190 ms.
	var requests []time.Time
	for i := range 20 {
		requests = append(requests, ms(10*i))
	}
	const a, b = "02:00:00:00:00:0a", "02:00:00:00:00:0b"
	answer := func(mac string, reqs ...int) []ARPReply {
		var out []ARPReply
		for _, i := range reqs {
			out = append(out, ARPReply{MAC: mac, At: ms(10*i + 1)})
		}
		return out
	}
	byTime := func(rs ...[]ARPReply) []ARPReply {
		all := slices.Concat(rs...)
		slices.SortStableFunc(all, func(x, y ARPReply) int { return x.At.Compare(y.At) })
		return all
	}
	span := func(from, to int) []int {
		var out []int
		for i := from; i < to; i++ {
			out = append(out, i)
		}
		return out
	}

	t.Run("one owner", func(t *testing.T) {
		s := SummarizeARP(requests, answer(a, span(0, 20)...), ms(0), ms(200))
		if s.Requests != 20 || len(s.Doubled) != 0 || s.Unanswered != 0 || s.Silence != 0 || !slices.Equal(s.MACs, []string{a}) {
			t.Errorf("%+v", s)
		}
	})

	t.Run("two owners, silence, a move", func(t *testing.T) {
		// a answers 0-9 (twice at 4), b also at 4 and 5; nobody at 10-14; b from 15 on.
		replies := byTime(answer(a, span(0, 10)...), answer(a, 4), answer(b, 4, 5), answer(b, span(15, 20)...))
		s := SummarizeARP(requests, replies, ms(0), ms(200))
		want := []ARPRound{{At: ms(40), MACs: []string{a, b}}, {At: ms(50), MACs: []string{a, b}}}
		if !slices.EqualFunc(s.Doubled, want, func(x, y ARPRound) bool { return x.At.Equal(y.At) && slices.Equal(x.MACs, y.MACs) }) {
			t.Errorf("doubled %+v, want %+v", s.Doubled, want)
		}
		if s.Requests != 20 || s.Unanswered != 5 || s.SilentRequests != 5 || s.Silence != 50*time.Millisecond || !s.SilenceAt.Equal(ms(100)) {
			t.Errorf("requests %d, unanswered %d, silence %v from %v over %d requests; want 20, 5, 50ms from +100ms over 5",
				s.Requests, s.Unanswered, s.Silence, s.SilenceAt.Sub(t0), s.SilentRequests)
		}
		if !slices.Equal(s.MACs, []string{a, b}) {
			t.Errorf("MACs %v", s.MACs)
		}
	})

	t.Run("a late reply belongs to the next request", func(t *testing.T) {
		// a's answer to request 3 comes after request 4 went out, b answers request 4.
		replies := byTime(answer(a, 0, 1, 2), []ARPReply{{MAC: a, At: ms(42)}}, answer(b, 4))
		s := SummarizeARP(requests[:5], replies, ms(0), ms(50))
		if len(s.Doubled) != 1 || !s.Doubled[0].At.Equal(ms(40)) || s.Unanswered != 1 || s.Silence != 10*time.Millisecond {
			t.Errorf("%+v", s)
		}
	})

	t.Run("window", func(t *testing.T) {
		// Requests before from (and their replies, doubled) do not count; the run of
		// silence that reaches to is cut there.
		replies := byTime(answer(a, span(0, 15)...), answer(b, 2))
		s := SummarizeARP(requests, replies, ms(50), ms(175))
		if s.Requests != 13 || len(s.Doubled) != 0 || s.Unanswered != 3 || s.Silence != 25*time.Millisecond || !s.SilenceAt.Equal(ms(150)) {
			t.Errorf("%+v", s)
		}
		// Nobody answered at all: the whole window is silent.
		s = SummarizeARP(requests, nil, ms(0), ms(200))
		if s.Requests != 20 || s.Unanswered != 20 || s.Silence != 190*time.Millisecond || len(s.MACs) != 0 {
			t.Errorf("%+v", s)
		}
	})
}
