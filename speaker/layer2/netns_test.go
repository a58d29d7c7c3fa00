package layer2

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"herald.dev/herald/internal/lab/labtest"
	"herald.dev/herald/internal/testkit"
)

// The tests in this file run the real thing: the Announcer with its AF_PACKET sockets
// in one network namespace ("A", the node), and the Linux kernel, arping and a UDP
// sender in another ("B", a client on the LAN), joined by a veth pair. The Announcer
// runs in a helper process started with `ip netns exec A`, so every socket it opens
// and every interface it scans is A's; nothing touches the root namespace's links,
// routes or firewall. The conflict tests add a third namespace ("P", a printer whose
// kernel holds the VIP as an address of its own) and put A, B and P on a bridge in a
// fourth. They need root and the Debian packages iproute2 and arping.

// Addresses of the lab: A has no IP address at all on its link (a responder needs
// none); B is 192.0.2.2/24 and 2001:db8::2/64.
var (
	labVIP4 = netip.MustParseAddr("192.0.2.10")
	labVIP6 = netip.MustParseAddr("2001:db8::10")
)

var labSeq atomic.Int32

// lab is two network namespaces joined by veth pairs, removed by name on cleanup; or,
// built by newBridgedLab, A, B and a printer P on one bridge.
type lab struct {
	t        *testing.T
	nsA, nsB string
	ifA, ifB string // the LAN link
	decoyA   string // A's end of a second link, named like a CNI device (excluded)
	decoyB   string
	macA     string

	nsP, ifP, macP string // the printer of a bridged lab
}

// labFor names A and B and their LAN link for one lab, by an id unique per process
// and lab, which it returns for naming more.
func labFor(t *testing.T) (*lab, string) {
	t.Helper()
	labtest.Require(t, "arping")
	id := fmt.Sprintf("%d%c", os.Getpid(), 'a'+labSeq.Add(1)-1)
	return &lab{t: t, nsA: "herald-l2test-" + id + "-a", nsB: "herald-l2test-" + id + "-b", ifA: "hl2a" + id, ifB: "hl2b" + id}, id
}

// addressB gives B its addresses on the LAN link.
func (l *lab) addressB() {
	l.t.Helper()
	l.ip("-n", l.nsB, "addr", "add", "192.0.2.2/24", "dev", l.ifB)
	l.ip("-n", l.nsB, "-6", "addr", "add", "2001:db8::2/64", "dev", l.ifB, "nodad")
}

func newLab(t *testing.T) *lab {
	t.Helper()
	l, id := labFor(t)
	l.decoyA, l.decoyB = "veth"+id, "hl2c"+id
	labtest.Namespaces(l.t, l.nsA, l.nsB)
	// Links are created directly inside the namespaces.
	l.ip("link", "add", l.ifA, "netns", l.nsA, "type", "veth", "peer", "name", l.ifB, "netns", l.nsB)
	l.ip("link", "add", l.decoyA, "netns", l.nsA, "type", "veth", "peer", "name", l.decoyB, "netns", l.nsB)
	l.addressB()
	l.ip("-n", l.nsB, "addr", "add", "198.51.100.2/24", "dev", l.decoyB)
	for _, x := range [][2]string{{l.nsA, "lo"}, {l.nsA, l.ifA}, {l.nsA, l.decoyA}, {l.nsB, "lo"}, {l.nsB, l.ifB}, {l.nsB, l.decoyB}} {
		l.ip("-n", x[0], "link", "set", x[1], "up")
	}
	l.macA = l.linkMAC(l.nsA, l.ifA)
	return l
}

// newBridgedLab is three namespaces on one LAN: A (the node running the announcer),
// B (a client, 192.0.2.2/24 and 2001:db8::2/64) and P (a printer, no address yet),
// each linked by a veth pair to a bridge in a fourth namespace, the switch. The
// bridge floods multicast (no snooping), as a small office switch does.
func newBridgedLab(t *testing.T) *lab {
	t.Helper()
	l, id := labFor(t)
	l.nsP, l.ifP = "herald-l2test-"+id+"-p", "hl2p"+id
	nsS, br := "herald-l2test-"+id+"-s", "hl2br"+id
	labtest.Namespaces(l.t, l.nsA, l.nsB, l.nsP, nsS)
	l.ip("-n", nsS, "link", "add", br, "type", "bridge", "mcast_snooping", "0")
	for _, end := range []struct{ ns, ifname, port string }{
		{l.nsA, l.ifA, "hl2sa" + id}, {l.nsB, l.ifB, "hl2sb" + id}, {l.nsP, l.ifP, "hl2sp" + id},
	} {
		l.ip("link", "add", end.ifname, "netns", end.ns, "type", "veth", "peer", "name", end.port, "netns", nsS)
		l.ip("-n", nsS, "link", "set", end.port, "master", br, "up")
		l.ip("-n", end.ns, "link", "set", "lo", "up")
		l.ip("-n", end.ns, "link", "set", end.ifname, "up")
	}
	l.ip("-n", nsS, "link", "set", br, "up")
	l.addressB()
	l.macA = l.linkMAC(l.nsA, l.ifA)
	l.macP = l.linkMAC(l.nsP, l.ifP)
	return l
}

// ip runs the ip command and fails the test on error.
func (l *lab) ip(args ...string) string {
	l.t.Helper()
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		l.t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// in runs a command inside a namespace and returns its output and error.
func (l *lab) in(ns string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns}, args...)...).CombinedOutput()
	return string(out), err
}

func (l *lab) linkMAC(ns, ifname string) string {
	l.t.Helper()
	f := strings.Fields(l.ip("-n", ns, "-br", "link", "show", "dev", ifname))
	if len(f) < 3 {
		l.t.Fatalf("no MAC for %s in %s", ifname, ns)
	}
	return strings.ToLower(f[2])
}

// neigh is B's neighbour entry for ip: MAC and state ("" if none).
func (l *lab) neigh(ip netip.Addr) (mac, state string) {
	l.t.Helper()
	out := l.ip("-n", l.nsB, "neigh", "show", ip.String(), "dev", l.ifB)
	f := strings.Fields(out)
	for i := range f {
		if f[i] == "lladdr" && i+1 < len(f) {
			mac = strings.ToLower(f[i+1])
		}
	}
	if len(f) > 0 {
		state = f[len(f)-1]
	}
	return mac, state
}

// waitNeigh polls B's neighbour table until ip is at mac, in one of the states if given.
func (l *lab) waitNeigh(ip netip.Addr, mac string, states ...string) {
	l.t.Helper()
	testkit.Eventually(l.t, hangGuard, 20*time.Millisecond, fmt.Sprintf("B's neighbour entry for %s at %s %v", ip, mac, states), func() error {
		m, s := l.neigh(ip)
		if m == mac && (len(states) == 0 || slices.Contains(states, s)) {
			return nil
		}
		return fmt.Errorf("it is %q %q", m, s)
	})
}

// sendUDP makes B's kernel send a datagram to ip, resolving it first if needed.
func (l *lab) sendUDP(ip netip.Addr) {
	l.t.Helper()
	cmd := exec.Command("ip", "netns", "exec", l.nsB, os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(os.Environ(), "HERALD_L2_HELPER=udp", "HERALD_L2_TARGET="+netip.AddrPortFrom(ip, 9).String())
	if out, err := cmd.CombinedOutput(); err != nil {
		l.t.Fatalf("sending UDP from B to %s: %v: %s", ip, err, out)
	}
}

var macRE = regexp.MustCompile(`(?i)\b([0-9a-f]{2}:){5}[0-9a-f]{2}\b`)

// arping asks for ip from B on ifname with extra arping flags; it returns the MAC of
// the first reply, or "" if none came.
func (l *lab) arping(ifname string, ip netip.Addr, extra ...string) string {
	l.t.Helper()
	args := append([]string{"arping", "-c", "2", "-C", "1", "-w", "3", "-i", ifname}, extra...)
	out, err := l.in(l.nsB, append(args, ip.String())...)
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 1 {
			return "" // no reply
		}
		l.t.Fatalf("arping: %v: %s", err, out)
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "from") {
			if m := macRE.FindString(line); m != "" {
				return strings.ToLower(m)
			}
		}
	}
	l.t.Fatalf("arping succeeded without a MAC in its output: %s", out)
	return ""
}

// announcerProc is the helper process running the Announcer in namespace A.
type announcerProc struct {
	t     *testing.T
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
	seen  []string // lines read but not yet awaited
}

func (l *lab) startAnnouncer(env ...string) *announcerProc {
	l.t.Helper()
	cmd := exec.Command("ip", "netns", "exec", l.nsA, os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(append(os.Environ(), "HERALD_L2_HELPER=announcer"), env...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		l.t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		l.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		l.t.Fatal(err)
	}
	p := &announcerProc{t: l.t, cmd: cmd, stdin: stdin, lines: make(chan string, 100)}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	l.t.Cleanup(func() {
		stdin.Close() // the helper stops on EOF
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				l.t.Errorf("announcer helper: %v", err)
			}
		case <-time.After(hangGuard):
			cmd.Process.Kill() // by pid: only the process this test started
			<-done
			l.t.Error("announcer helper did not stop on EOF")
		}
	})
	return p
}

// do sends a command and returns the first line starting with reply.
func (p *announcerProc) do(command, reply string) string {
	p.t.Helper()
	if _, err := fmt.Fprintln(p.stdin, command); err != nil {
		p.t.Fatalf("helper: %v", err)
	}
	return p.await(reply)
}

// await returns the first line (already read or still to come) starting with prefix.
func (p *announcerProc) await(prefix string) string {
	p.t.Helper()
	if i := slices.IndexFunc(p.seen, func(s string) bool { return strings.HasPrefix(s, prefix) }); i >= 0 {
		line := p.seen[i]
		p.seen = slices.Delete(p.seen, i, i+1)
		return line
	}
	timeout := time.After(hangGuard)
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				p.t.Fatalf("helper exited while waiting for %q", prefix)
			}
			if strings.HasPrefix(line, prefix) {
				return line
			}
			p.seen = append(p.seen, line)
		case <-timeout:
			p.t.Fatalf("helper never said %q (said %q)", prefix, p.seen)
		}
	}
}

// waitResponders polls until the helper runs exactly the wanted responders.
func (p *announcerProc) waitResponders(want string) {
	p.t.Helper()
	testkit.Eventually(p.t, hangGuard, 50*time.Millisecond, fmt.Sprintf("responders %q", want), func() error {
		if got := strings.TrimPrefix(p.do("responders", "responders"), "responders "); got != want {
			return fmt.Errorf("responders %q", got)
		}
		return nil
	})
}

// metric reads one counter or gauge from the helper, e.g.
// herald_l2_arp_replies_total.
func (p *announcerProc) metric(name string) float64 {
	p.t.Helper()
	v, ok := p.metrics()[name]
	if !ok {
		p.t.Fatalf("helper has no metric %s", name)
	}
	return v
}

// metrics reads every series from the helper.
func (p *announcerProc) metrics() map[string]float64 {
	p.t.Helper()
	out := map[string]float64{}
	for _, kv := range strings.Fields(strings.TrimPrefix(p.do("metrics", "metrics"), "metrics ")) {
		i := strings.LastIndex(kv, "=")
		var f float64
		fmt.Sscan(kv[i+1:], &f)
		out[kv[:i]] = f
	}
	return out
}

// TestNetnsARP: a real ARP responder in namespace A answers B's kernel and arping with
// A's interface MAC, its gratuitous ARP moves B's cached entry, it answers the unicast
// probes of B's neighbour reachability check, it never answers on an excluded
// interface or for VLAN-tagged frames, and it stops answering on Withdraw.
func TestNetnsARP(t *testing.T) {
	l := newLab(t)
	p := l.startAnnouncer()
	p.waitResponders(l.ifA + "/arp " + l.ifA + "/ndp") // lo and the veth* decoy skipped

	// Takeover: B has the VIP cached at a stale MAC; the gratuitous ARP moves it to A.
	l.ip("-n", l.nsB, "neigh", "replace", labVIP4.String(), "lladdr", "02:00:00:00:00:99", "dev", l.ifB, "nud", "stale")
	p.do("set "+labVIP4.String(), "ok")
	an := p.await("announced " + labVIP4.String())
	if !strings.Contains(an, l.ifA+"="+l.macA) {
		t.Fatalf("announcement %q does not name %s=%s", an, l.ifA, l.macA)
	}
	l.waitNeigh(labVIP4, l.macA)

	// arping from B gets A's interface MAC.
	if mac := l.arping(l.ifB, labVIP4); mac != l.macA {
		t.Fatalf("arping got %q, want A's %s", mac, l.macA)
	}

	// B's kernel resolves the VIP from scratch (broadcast request, unicast reply).
	l.ip("-n", l.nsB, "neigh", "flush", "dev", l.ifB)
	l.sendUDP(labVIP4)
	l.waitNeigh(labVIP4, l.macA, "REACHABLE", "STALE", "DELAY")

	// Reachability confirmation: a stale entry in use is probed with unicast requests to
	// A's MAC (RFC 1122 style, Linux NUD PROBE); only an answer makes it REACHABLE.
	l.in(l.nsB, "sysctl", "-qw", "net.ipv4.neigh."+l.ifB+".delay_first_probe_time=1")
	l.ip("-n", l.nsB, "neigh", "replace", labVIP4.String(), "lladdr", l.macA, "dev", l.ifB, "nud", "stale")
	l.sendUDP(labVIP4)
	l.waitNeigh(labVIP4, l.macA, "REACHABLE")

	// Not on the excluded interface A also has on this LAN segment, nor for a frame
	// tagged with VLAN 10 arriving on the answering one. Without the socket filter the
	// kernel hands the tagged request to the ARP socket untagged and it is answered,
	// untagged, on the native LAN (arping -V would not see that reply, so the
	// responder's own counters are the check).
	seen := p.metric("herald_l2_arp_requests_total")
	if mac := l.arping(l.decoyB, labVIP4); mac != "" {
		t.Fatalf("answered on the excluded interface %s with %s", l.decoyA, mac)
	}
	if mac := l.arping(l.ifB, labVIP4, "-V", "10"); mac != "" {
		t.Fatalf("answered a VLAN 10 request with %s", mac)
	}
	if got := p.metric("herald_l2_arp_requests_total"); got != seen {
		t.Fatalf("requests went from %v to %v: a frame from the excluded link or VLAN 10 reached a responder", seen, got)
	}

	replies := p.metric("herald_l2_arp_replies_total")
	if replies < 3 || p.metric("herald_l2_gratuitous_sent_total") < 2 {
		t.Fatalf("metrics: %d replies, %v gratuitous", int(replies), p.metric("herald_l2_gratuitous_sent_total"))
	}

	// Withdraw: no more answers.
	p.do("withdraw "+labVIP4.String(), "ok")
	if mac := l.arping(l.ifB, labVIP4); mac != "" {
		t.Fatalf("answered with %s after Withdraw", mac)
	}
	if got := p.metric("herald_l2_arp_replies_total"); got != replies {
		t.Fatalf("replies went from %v to %v after Withdraw", replies, got)
	}
	if p.metric(`herald_l2_dropped_frames_total{reason="not-owned"}`) < 1 {
		t.Fatal("requests after Withdraw not counted as not-owned")
	}
}

// TestNetnsLinkFlap: with periodic rescans out of the picture, the responder follows
// the link going down and coming back through the kernel's link notifications alone,
// and answers again once the link is back (a node whose cable returns).
func TestNetnsLinkFlap(t *testing.T) {
	l := newLab(t)
	p := l.startAnnouncer("HERALD_L2_RESCAN=never")
	p.waitResponders(l.ifA + "/arp " + l.ifA + "/ndp")
	p.do("set "+labVIP4.String(), "ok")
	if mac := l.arping(l.ifB, labVIP4); mac != l.macA {
		t.Fatalf("arping got %q, want A's %s", mac, l.macA)
	}
	l.ip("-n", l.nsA, "link", "set", l.ifA, "down")
	p.waitResponders("")
	l.ip("-n", l.nsA, "link", "set", l.ifA, "up")
	p.waitResponders(l.ifA + "/arp " + l.ifA + "/ndp")
	if mac := l.arping(l.ifB, labVIP4); mac != l.macA {
		t.Fatalf("after the link came back, arping got %q, want A's %s", mac, l.macA)
	}
}

// TestNetnsNDP: a real NDP responder in namespace A joins the VIP's solicited-node
// group, its unsolicited NA moves B's cached entry, B's kernel resolves the VIP with a
// multicast solicitation, B's reachability probes (unicast solicitations to the VIP,
// which a responder bound to the solicited-node group alone would miss) are answered, and the group is left on Withdraw.
func TestNetnsNDP(t *testing.T) {
	l := newLab(t)
	p := l.startAnnouncer()
	p.waitResponders(l.ifA + "/arp " + l.ifA + "/ndp")
	group := "ff02::1:ff00:10"

	l.ip("-n", l.nsB, "-6", "neigh", "replace", labVIP6.String(), "lladdr", "02:00:00:00:00:99", "dev", l.ifB, "nud", "stale")
	p.do("set "+labVIP6.String(), "ok")
	p.await("announced " + labVIP6.String())
	if out := l.ip("-n", l.nsA, "-6", "maddr", "show", "dev", l.ifA); !strings.Contains(out, group) {
		t.Fatalf("A did not join %s:\n%s", group, out)
	}
	l.waitNeigh(labVIP6, l.macA) // the unsolicited NA with Override moved it

	// Resolution from scratch: multicast NS to the solicited-node group.
	l.ip("-n", l.nsB, "-6", "neigh", "flush", "dev", l.ifB)
	l.sendUDP(labVIP6)
	l.waitNeigh(labVIP6, l.macA, "REACHABLE", "STALE", "DELAY")

	// NUD: in PROBE state Linux sends unicast solicitations to the VIP at A's MAC and
	// only a solicited answer to one of them makes the entry REACHABLE.
	l.in(l.nsB, "sysctl", "-qw", "net.ipv6.neigh."+l.ifB+".delay_first_probe_time=1")
	l.ip("-n", l.nsB, "-6", "neigh", "replace", labVIP6.String(), "lladdr", l.macA, "dev", l.ifB, "nud", "stale")
	l.sendUDP(labVIP6)
	l.waitNeigh(labVIP6, l.macA, "REACHABLE")
	if p.metric("herald_l2_ndp_advertisements_total") < 2 {
		t.Fatal("fewer than 2 solicited advertisements counted")
	}

	p.do("withdraw "+labVIP6.String(), "ok")
	if out := l.ip("-n", l.nsA, "-6", "maddr", "show", "dev", l.ifA); strings.Contains(out, group) {
		t.Fatalf("A still in %s after Withdraw:\n%s", group, out)
	}
	before := p.metric("herald_l2_ndp_advertisements_total")
	l.ip("-n", l.nsB, "-6", "neigh", "flush", "dev", l.ifB)
	l.sendUDP(labVIP6)
	time.Sleep(2 * time.Second) // B solicits for about 3 s; we only need some of it answered, or not
	if got := p.metric("herald_l2_ndp_advertisements_total"); got != before {
		t.Fatalf("advertisements went from %v to %v after Withdraw", before, got)
	}
}

// conflictGauge is the helper's herald_l2_conflict series name for ip and mac.
func conflictGauge(ip netip.Addr, mac string) string {
	return fmt.Sprintf(`herald_l2_conflict{ip=%q}{mac=%q}`, ip.String(), mac)
}

// labRefresh is the schedule refresh of the conflict tests' announcer, and so the
// period of its conflict rechecks.
const labRefresh = 2 * time.Second

// awaitCleared waits for the helper to take ip back after the printer let it go at
// gone, and checks it did so within one recheck period (plus a probe round and slack
// for a loaded machine).
func (p *announcerProc) awaitCleared(ip netip.Addr, gone time.Time) {
	p.t.Helper()
	p.await("cleared " + ip.String())
	if took := time.Since(gone); took > labRefresh+DefaultProbeWait+time.Second {
		p.t.Fatalf("took %v to take %s back, more than the recheck period %v", took, ip, labRefresh)
	}
}

// TestNetnsConflictProbe: a printer on the LAN holds the VIP as a kernel address; a
// Set with Probe finds it by an ARP probe, which the printer's kernel answers, and
// yields at once: no gratuitous ARP ever goes out, requests go unanswered, B resolves
// the VIP to the printer. Once the printer's address is removed, the next recheck
// takes the VIP back and announces it.
func TestNetnsConflictProbe(t *testing.T) {
	l := newBridgedLab(t)
	p := l.startAnnouncer("HERALD_L2_REFRESH=" + labRefresh.String())
	p.waitResponders(l.ifA + "/arp " + l.ifA + "/ndp")
	l.ip("-n", l.nsP, "addr", "add", labVIP4.String()+"/24", "dev", l.ifP)

	p.do("set "+labVIP4.String()+" probe", "ok")
	if line := p.await("conflict " + labVIP4.String()); line != fmt.Sprintf("conflict %s %s %s before=true", labVIP4, l.macP, l.ifA) {
		t.Fatalf("got %q, want the printer %s found before announcing", line, l.macP)
	}
	if got := p.metric(conflictGauge(labVIP4, l.macP)); got != 1 {
		t.Fatalf("conflict gauge %v, want 1", got)
	}
	if mac := l.arping(l.ifB, labVIP4); mac != l.macP {
		t.Fatalf("B's arping got %q, want only the printer %s", mac, l.macP)
	}
	if got := p.metric("herald_l2_gratuitous_sent_total"); got != 0 {
		t.Fatalf("%v gratuitous frames sent for an IP found in use", got)
	}
	if got := p.metric("herald_l2_arp_replies_total"); got != 0 {
		t.Fatalf("%v ARP replies sent for a yielded IP", got)
	}
	if p.metric(`herald_l2_dropped_frames_total{reason="suppressed"}`) < 1 {
		t.Fatal("B's requests were not dropped as suppressed")
	}

	l.ip("-n", l.nsP, "addr", "del", labVIP4.String()+"/24", "dev", l.ifP)
	p.awaitCleared(labVIP4, time.Now())
	p.await("announced " + labVIP4.String())
	if mac := l.arping(l.ifB, labVIP4); mac != l.macA {
		t.Fatalf("after the printer left, arping got %q, want A's %s", mac, l.macA)
	}
	if _, ok := p.metrics()[conflictGauge(labVIP4, l.macP)]; ok {
		t.Fatal("the conflict gauge is still there after the conflict cleared")
	}
}

// TestNetnsConflictWhileOwning: A announces the VIP; then the printer is given it by
// hand and announces it with gratuitous ARP. A defends once and probes; the printer's
// kernel answers the probe, and A yields: B's arping gets the printer only. When the
// printer's address goes, A takes the VIP back within a recheck period and B's cache
// follows A's announcement.
func TestNetnsConflictWhileOwning(t *testing.T) {
	l := newBridgedLab(t)
	p := l.startAnnouncer("HERALD_L2_REFRESH=" + labRefresh.String())
	p.waitResponders(l.ifA + "/arp " + l.ifA + "/ndp")
	p.do("set "+labVIP4.String(), "ok")
	p.await("announced " + labVIP4.String())
	if mac := l.arping(l.ifB, labVIP4); mac != l.macA {
		t.Fatalf("arping got %q, want A's %s", mac, l.macA)
	}

	l.ip("-n", l.nsP, "addr", "add", labVIP4.String()+"/24", "dev", l.ifP)
	// arping exits 1 as nobody replies to a gratuitous request.
	if out, err := l.in(l.nsP, "arping", "-U", "-c", "1", "-i", l.ifP, "-S", labVIP4.String(), labVIP4.String()); err != nil && !strings.Contains(out, "1 packets transmitted") {
		t.Fatalf("gratuitous ARP from the printer: %v: %s", err, out)
	}
	if line := p.await("conflict " + labVIP4.String()); line != fmt.Sprintf("conflict %s %s %s before=false", labVIP4, l.macP, l.ifA) {
		t.Fatalf("got %q, want a conflict with the printer %s", line, l.macP)
	}
	if got := p.metric(conflictGauge(labVIP4, l.macP)); got != 1 {
		t.Fatalf("conflict gauge %v, want 1", got)
	}
	if got := p.metric(fmt.Sprintf(`herald_l2_foreign_claims_total{ip=%q}`, labVIP4.String())); got < 2 {
		t.Fatalf("%v foreign claims counted, want at least the printer's announcement and its answer to the probe", got)
	}
	replies := p.metric("herald_l2_arp_replies_total")
	if mac := l.arping(l.ifB, labVIP4); mac != l.macP {
		t.Fatalf("B's arping got %q, want only the printer %s", mac, l.macP)
	}
	if got := p.metric("herald_l2_arp_replies_total"); got != replies {
		t.Fatalf("A answered for a yielded IP (%v → %v replies)", replies, got)
	}

	// B's kernel has the printer cached; A's announcement after the recovery moves it.
	l.ip("-n", l.nsB, "neigh", "replace", labVIP4.String(), "lladdr", l.macP, "dev", l.ifB, "nud", "stale")
	l.ip("-n", l.nsP, "addr", "del", labVIP4.String()+"/24", "dev", l.ifP)
	p.awaitCleared(labVIP4, time.Now())
	l.waitNeigh(labVIP4, l.macA)
	if mac := l.arping(l.ifB, labVIP4); mac != l.macA {
		t.Fatalf("after the printer left, arping got %q, want A's %s", mac, l.macA)
	}
}

// TestNetnsConflictNDP: the printer holds the IPv6 VIP; a Set with Probe sends a
// duplicate address detection solicitation, the printer's kernel answers it, A
// yields; when the address goes, A takes the VIP back and announces it.
func TestNetnsConflictNDP(t *testing.T) {
	l := newBridgedLab(t)
	p := l.startAnnouncer("HERALD_L2_REFRESH=" + labRefresh.String())
	p.waitResponders(l.ifA + "/arp " + l.ifA + "/ndp")
	l.ip("-n", l.nsP, "-6", "addr", "add", labVIP6.String()+"/64", "dev", l.ifP, "nodad")

	p.do("set "+labVIP6.String()+" probe", "ok")
	if line := p.await("conflict " + labVIP6.String()); line != fmt.Sprintf("conflict %s %s %s before=true", labVIP6, l.macP, l.ifA) {
		t.Fatalf("got %q, want the printer %s found before announcing", line, l.macP)
	}
	if got := p.metric("herald_l2_gratuitous_sent_total"); got != 0 {
		t.Fatalf("%v unsolicited advertisements sent for an IP found in use", got)
	}
	l.ip("-n", l.nsP, "-6", "addr", "del", labVIP6.String()+"/64", "dev", l.ifP)
	p.awaitCleared(labVIP6, time.Now())
	p.await("announced " + labVIP6.String())
	l.sendUDP(labVIP6) // B resolves the VIP from scratch: A answers now
	l.waitNeigh(labVIP6, l.macA, "REACHABLE", "STALE", "DELAY")
}

// TestHelperProcess is the body of the helper processes the netns tests start; run
// directly it does nothing.
func TestHelperProcess(t *testing.T) {
	switch os.Getenv("HERALD_L2_HELPER") {
	case "announcer":
		helperAnnouncer()
	case "udp":
		c, err := net.Dial("udp", os.Getenv("HERALD_L2_TARGET"))
		if err == nil {
			_, err = c.Write([]byte("herald"))
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
}

// helperAnnouncer runs an Announcer in the current network namespace and obeys
// commands on stdin (set IP [probe], withdraw IP, responders, metrics) until EOF. It
// prints what the callbacks report (announced, claim, conflict, cleared).
func helperAnnouncer() {
	var mu sync.Mutex
	say := func(format string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Printf(format+"\n", a...)
	}
	reg := prometheus.NewRegistry()
	cfg := DefaultConfig()
	cfg.Rescan = 100 * time.Millisecond
	if os.Getenv("HERALD_L2_RESCAN") == "never" {
		cfg.Rescan = 24 * time.Hour // only link change notifications rescan
	}
	if d, err := time.ParseDuration(os.Getenv("HERALD_L2_REFRESH")); err == nil {
		cfg.Schedule.Refresh = d // also the conflict recheck period
	}
	cfg.Registerer = reg
	cfg.OnSighting = func(c Sighting) { say("claim %s %s %s peer=%v", c.IP, c.MAC, c.Kind, c.Peer) }
	cfg.OnConflict = func(c Conflict) {
		say("conflict %s %s %s before=%v", c.IP, c.MAC, c.Interface, c.BeforeAnnounce)
	}
	cfg.OnConflictCleared = func(c Conflict) { say("cleared %s %s", c.IP, c.MAC) }
	cfg.OnAnnounce = func(an Announcement) {
		var links []string
		for _, l := range an.Links {
			links = append(links, l.Interface+"="+l.MAC.String())
		}
		say("announced %s %s %d", an.IP, strings.Join(links, ","), an.At.UnixNano())
	}
	a, err := New(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()

	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		cmd, arg, _ := strings.Cut(sc.Text(), " ")
		arg, opt, _ := strings.Cut(arg, " ")
		switch cmd {
		case "set", "withdraw":
			ip, err := netip.ParseAddr(arg)
			var opts []SetOption
			if opt == "probe" {
				opts = append(opts, Probe())
			}
			if err == nil && cmd == "set" {
				err = a.Set("test/svc", ip, nil, opts...)
			} else if err == nil {
				a.Withdraw("test/svc", ip)
			}
			if err != nil {
				say("error %v", err)
				continue
			}
			say("ok")
		case "responders":
			var rs []string
			for _, r := range a.Responders() {
				rs = append(rs, r.Interface+"/"+r.Protocol)
			}
			say("responders %s", strings.Join(rs, " "))
		case "metrics":
			mfs, _ := reg.Gather()
			var kv []string
			for _, mf := range mfs {
				for _, m := range mf.GetMetric() {
					name := mf.GetName()
					for _, lp := range m.GetLabel() {
						name += fmt.Sprintf("{%s=%q}", lp.GetName(), lp.GetValue())
					}
					v := m.GetCounter().GetValue()
					if m.GetGauge() != nil {
						v = m.GetGauge().GetValue()
					}
					kv = append(kv, fmt.Sprintf("%s=%v", name, v))
				}
			}
			say("metrics %s", strings.Join(kv, " "))
		default:
			say("error unknown command %q", cmd)
		}
	}
	cancel()
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}
