package lab

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"syscall"
	"time"
)

// Faults that move a VIP, as MeasureFailover names them.
const (
	FaultLinkDown = "link-down"
	FaultKill     = "kill"
	FaultStop     = "stop"
)

// httpRecoveryLimit is how long MeasureFailover waits for requests to succeed again.
const httpRecoveryLimit = 30 * time.Second

// FailoverResult is what the client saw when the owner of a VIP failed. Every gap is
// measured from the moment the fault was in effect (the command inflicting it had
// returned: the link down, the signal delivered), never from before, so that no
// request that reached the old owner just in time counts as a recovery.
type FailoverResult struct {
	VIP      netip.Addr
	Fault    string
	OldOwner string
	NewOwner string
	// FaultTook is how long inflicting the fault took, from the command's start until
	// the fault was in effect.
	FaultTook time.Duration
	// AnswerGap is from the fault to the new owner's first answer to the client: an ARP
	// reply for an IPv4 VIP, a neighbour advertisement for an IPv6 one.
	AnswerGap time.Duration
	// HTTP is whether requests were measured (they succeeded before the fault).
	HTTP bool
	// HTTPLastOK is from the end of the last successful request that started before
	// the fault to the fault (negative: it ended after the fault, under way meanwhile).
	HTTPLastOK time.Duration
	// HTTPRecovered is whether a request started after the fault succeeded within the
	// limit; HTTPGap is from the fault to the end of the first that did, and HTTPFailed
	// counts the requests that failed after the last success before the fault.
	HTTPRecovered bool
	HTTPGap       time.Duration
	HTTPFailed    int
}

// Print says what happened in a few lines.
func (r FailoverResult) Print(w io.Writer) {
	ms := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	fmt.Fprintf(w, "%s: owner %s, fault %s (in effect %v after it was started; times below from then)\n", r.VIP, r.OldOwner, r.Fault, ms(r.FaultTook))
	fmt.Fprintf(w, "  %s from the client: new owner %s answered %v after the fault\n", r.protocol(), r.NewOwner, ms(r.AnswerGap))
	if !r.HTTP {
		fmt.Fprintf(w, "  HTTP not measured: requests to %s did not succeed before the fault\n", VIPURL(r.VIP))
		return
	}
	last := fmt.Sprintf("the last successful request ended %v before the fault", ms(r.HTTPLastOK))
	if r.HTTPLastOK < 0 {
		last = fmt.Sprintf("the last successful request started before the fault ended %v after it", ms(-r.HTTPLastOK))
	}
	if !r.HTTPRecovered {
		fmt.Fprintf(w, "  HTTP from the client: %s; NO request started after it succeeded within %v (%d failed)\n", last, httpRecoveryLimit, r.HTTPFailed)
		return
	}
	fmt.Fprintf(w, "  HTTP from the client: %s; the first request started after it succeeded %v after it; %d failed in between\n", last, ms(r.HTTPGap), r.HTTPFailed)
	if r.HTTPGap < r.AnswerGap {
		fmt.Fprintf(w, "  (requests succeeded before the new owner answered %s: the old owner's node still forwarded the traffic)\n", r.protocol())
	}
}

// protocol is how the client asks who has the VIP.
func (r FailoverResult) protocol() string {
	if r.VIP.Is6() && !r.VIP.Is4In6() {
		return "NDP"
	}
	return "ARP"
}

// VIPURL is the URL of a VIP's port 80: http://172.18.255.200/, http://[fc00::c8]/.
func VIPURL(vip netip.Addr) string {
	if vip.Is6() && !vip.Is4In6() {
		return "http://[" + vip.String() + "]/"
	}
	return "http://" + vip.String() + "/"
}

// Inflict inflicts fault on node and returns once it is in effect: the link down, or
// the signal delivered to the speaker (not waiting for it to exit, so that a
// measurement runs meanwhile).
func (s *State) Inflict(ctx context.Context, node, fault string) error {
	switch fault {
	case FaultLinkDown:
		return s.LinkDown(ctx, node)
	case FaultKill:
		return s.KillSpeaker(node)
	case FaultStop:
		p, err := s.proc(node, "speaker")
		if err != nil {
			return err
		}
		return p.Signal(syscall.SIGTERM)
	}
	return fmt.Errorf("lab: fault %q, want %s, %s or %s", fault, FaultLinkDown, FaultKill, FaultStop)
}

// MeasureFailover is MeasureFailovers of one VIP.
func (s *State) MeasureFailover(ctx context.Context, vip netip.Addr, fault string) (FailoverResult, error) {
	res, err := s.MeasureFailovers(ctx, []netip.Addr{vip}, fault)
	return res[0], err
}

// MeasureFailovers finds the owner of vips from the client (the one MAC answering ARP
// for an IPv4 VIP, NDP for an IPv6 one; the same node for all of them, as for the two
// VIPs of a dual-stack Service), inflicts fault on it once, and measures for each VIP
// from the client how long until another node answers and, when requests to the VIP
// succeed beforehand, until they succeed again. It returns one result per VIP, in
// order, with OldOwner set as soon as it is known. The fault is left in place; the
// caller undoes it (LinkUp, StartSpeaker).
func (s *State) MeasureFailovers(ctx context.Context, vips []netip.Addr, fault string) ([]FailoverResult, error) {
	res := make([]FailoverResult, len(vips))
	for i, vip := range vips {
		res[i] = FailoverResult{VIP: vip, Fault: fault}
	}
	if len(vips) == 0 {
		return []FailoverResult{{Fault: fault}}, fmt.Errorf("lab: failover of no VIP")
	}
	client, err := s.Host(ClientHost)
	if err != nil {
		return res, err
	}
	watches := make([]NeighbourWatch, len(vips))
	for i, vip := range vips {
		if watches[i], err = WatchNeighbour(client.Namespace, vip, 10*time.Millisecond); err != nil {
			return res, err
		}
		defer watches[i].Close()
	}
	macs := make([]string, len(vips))
	for i, w := range watches {
		if macs[i], err = w.Settle(time.Second, 30*time.Second); err != nil {
			return res, fmt.Errorf("lab: owner of %s before the fault: %w", vips[i], err)
		}
		h, ok := s.HostByMAC(macs[i])
		if !ok {
			return res, fmt.Errorf("lab: %s answers for %s and is no lab host", macs[i], vips[i])
		}
		if i > 0 && h.Name != res[0].OldOwner {
			return res, fmt.Errorf("lab: %s is owned by %s but %s by %s: one fault cannot move both", vips[0], res[0].OldOwner, vips[i], h.Name)
		}
		res[i].OldOwner = h.Name
	}
	owner := res[0].OldOwner

	probes := make([]*HTTPProbe, len(vips))
	for i, vip := range vips {
		probes[i] = StartHTTPProbe(client.Namespace, VIPURL(vip), 20*time.Millisecond, 300*time.Millisecond)
		defer probes[i].Stop()
	}
	time.Sleep(500 * time.Millisecond)
	for i, p := range probes {
		res[i].HTTP = p.succeededSince(time.Now().Add(-500 * time.Millisecond))
	}

	started := time.Now()
	if err := s.Inflict(ctx, owner, fault); err != nil {
		return res, err
	}
	at := time.Now() // the fault is in effect: measure from here
	for i, w := range watches {
		res[i].FaultTook = at.Sub(started)
		newMAC, err := w.Settle(time.Second, 30*time.Second, macs[i])
		if err != nil {
			return res, fmt.Errorf("lab: %s after %s of %s: %w", vips[i], fault, owner, err)
		}
		res[i].NewOwner = newMAC
		if h, ok := s.HostByMAC(newMAC); ok {
			res[i].NewOwner = h.Name
		}
		first, _ := w.FirstFrom(newMAC, at)
		res[i].AnswerGap = first.Sub(at)
	}
	for i, p := range probes {
		if res[i].HTTP {
			if err := res[i].measureHTTP(ctx, p, at); err != nil {
				return res, err
			}
		}
	}
	return res, nil
}

// measureHTTP reads from the probe when requests last succeeded before the fault at at
// and first succeeded after it, and how many failed in between.
func (r *FailoverResult) measureHTTP(ctx context.Context, p *HTTPProbe, at time.Time) error {
	ok, err := p.firstSuccessAfter(ctx, at, httpRecoveryLimit)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	lastOK, lastStart := p.lastSuccessBefore(at)
	r.HTTPLastOK = at.Sub(lastOK)
	r.HTTPRecovered = err == nil
	end := time.Now()
	if err == nil {
		r.HTTPGap = ok.Sub(at)
		end = ok
	}
	// The probe sends one request at a time: those started in between ran in between.
	_, failed := p.Between(lastStart, end)
	r.HTTPFailed = len(failed)
	return nil
}
