//go:build kind

package kind

// probe: curls from the client, back to back, while a fault is injected; what the user
// of a VIP sees during a failover.

import (
	"bytes"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"herald.dev/herald/internal/testkit"
)

// probeScript curls http://$1/ every 50 ms (connect timeout 0.5 s) and prints
// "<unix time> ok <pod>" or "<unix time> fail" per attempt. It ends after $4 successes
// in a row counted once the file $2 exists (the fault is in place), or after $3 seconds.
const probeScript = `vip=$1 marker=$2 max=$3 need=$4
end=$(($(date +%s) + max)) run=0
rm -f "$marker"
while [ "$(date +%s)" -lt "$end" ]; do
	t=$(date +%s.%N)
	h=$(curl -s --connect-timeout 0.5 --max-time 1 "http://$vip/" | sed -n 's/^Hostname: //p')
	if [ -n "$h" ]; then
		echo "$t ok $h"
		[ -e "$marker" ] && run=$((run + 1))
	else
		echo "$t fail"
		run=0
	fi
	[ "$run" -ge "$need" ] && exit 0
	sleep 0.05
done
exit 3`

type probe struct {
	t      testing.TB
	vip    string
	marker string
	cmd    *exec.Cmd
	out    syncBuffer
}

// syncBuffer is the probe's output, read while docker exec writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type attempt struct {
	at  time.Time
	ok  bool
	pod string
}

// startProbe starts probing vip from the client; stop it with (*probe).faultInPlace
// and (*probe).wait.
func startProbe(t testing.TB, vip string, max time.Duration, need int) *probe {
	t.Helper()
	p := &probe{t: t, vip: vip, marker: "/tmp/fault-" + strings.ReplaceAll(vip, ".", "-")}
	p.cmd = exec.CommandContext(t.Context(), "docker", "exec", e.client, "sh", "-c", probeScript, "sh",
		vip, p.marker, fmt.Sprint(int(max.Seconds())), fmt.Sprint(need))
	p.cmd.Stdout = &p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting the probe of %s: %v", vip, err)
	}
	// Until the first answer the VIP is not known to work: wait for one.
	testkit.Eventually(t, 10*time.Second, 100*time.Millisecond, "probe of "+vip+": an answer before the fault", func() error {
		if !strings.Contains(p.out.String(), " ok ") {
			return fmt.Errorf("none yet: %q", p.out.String())
		}
		return nil
	})
	return p
}

// faultInPlace tells the probe to count successes from now on.
func (p *probe) faultInPlace() {
	p.t.Helper()
	inClient(p.t, `touch "$1"`, p.marker)
}

// wait waits for the probe to end and returns its attempts; it fails the test when
// the VIP did not answer `need` times in a row before max.
func (p *probe) wait() []attempt {
	p.t.Helper()
	err := p.cmd.Wait()
	var as []attempt
	for _, l := range strings.Split(strings.TrimSpace(p.out.String()), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		sec, perr := strconv.ParseFloat(f[0], 64)
		if perr != nil {
			continue
		}
		a := attempt{at: time.Unix(0, int64(sec*1e9)), ok: f[1] == "ok"}
		if a.ok && len(f) > 2 {
			a.pod = f[2]
		}
		as = append(as, a)
	}
	if err != nil {
		p.t.Fatalf("probe of %s did not see the VIP answer again in a row: %v (last attempts: %v)", p.vip, err, tail(as, 10))
	}
	return as
}

func tail(as []attempt, n int) []attempt {
	return as[max(0, len(as)-n):]
}

// outage sums up what the client saw from t0 (the fault's start) on.
type outage struct {
	attempts, failed int
	firstFail        time.Duration // from t0; -1 without failures
	lastFail         time.Duration
	// answered is when the first success after the first failure came, from t0: the
	// VIP answers again (through the new owner); failures may follow (requests sent
	// to endpoints on the dead node).
	answered time.Duration
	// recovered is when the first success after the last failure came, from t0.
	recovered time.Duration
	// failedBy5s counts the failures in each 5 s from t0.
	failedBy5s []int
	pods       map[string]int // who answered after the last failure
}

func summarize(as []attempt, t0 time.Time) outage {
	o := outage{firstFail: -1, lastFail: -1, answered: -1, recovered: -1, pods: map[string]int{}}
	for _, a := range as {
		if a.at.Before(t0) {
			continue
		}
		o.attempts++
		if !a.ok {
			o.failed++
			if o.firstFail < 0 {
				o.firstFail = a.at.Sub(t0)
			}
			o.lastFail = a.at.Sub(t0)
			o.recovered = -1
			b := int(o.lastFail / (5 * time.Second))
			for len(o.failedBy5s) <= b {
				o.failedBy5s = append(o.failedBy5s, 0)
			}
			o.failedBy5s[b]++
			clear(o.pods)
			continue
		}
		if o.recovered < 0 {
			o.recovered = a.at.Sub(t0)
		}
		if o.answered < 0 && o.failed > 0 {
			o.answered = a.at.Sub(t0)
		}
		o.pods[a.pod]++
	}
	return o
}

func (o outage) String() string {
	if o.failed == 0 {
		return fmt.Sprintf("no failed request in %d (every one answered; first at +%.2fs), answered by %v", o.attempts, o.recovered.Seconds(), o.pods)
	}
	return fmt.Sprintf("%d of %d requests failed, from +%.2fs to +%.2fs (failures per 5 s: %v); first success after the first failure at +%.2fs, after the last one at +%.2fs, then answered by %v",
		o.failed, o.attempts, o.firstFail.Seconds(), o.lastFail.Seconds(), o.failedBy5s, o.answered.Seconds(), o.recovered.Seconds(), o.pods)
}
