package members

import (
	"fmt"
	"io"
	"log"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	"github.com/hashicorp/memberlist"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"herald.dev/herald/internal/memberkey"
	"herald.dev/herald/internal/testkit"
)

var testKey = mustKey("test-key-material-0123456789")

func mustKey(s string) []byte {
	k, err := memberkey.FromSecretData(map[string][]byte{memberkey.DataKey: []byte(s)})
	if err != nil {
		panic(err)
	}
	return k
}

func testConfig(name string, key []byte) Config {
	c := DefaultConfig()
	c.NodeName = name
	c.BindAddr = "127.0.0.1"
	c.BindPort = 0 // a free port
	c.SecretKey = key
	return c
}

// loopbackTransport is memberlist's own transport on a free loopback port, quiet, for
// the tests' transports that wrap it.
func loopbackTransport() (*memberlist.NetTransport, error) {
	return memberlist.NewNetTransport(&memberlist.NetTransportConfig{
		BindAddrs: []string{"127.0.0.1"},
		Logger:    log.New(io.Discard, "", 0),
	})
}

// member is a started Members with its own registry.
type member struct {
	*Members
	name string
	reg  *prometheus.Registry
}

func start(tb testing.TB, name string, key []byte) member {
	tb.Helper()
	reg := prometheus.NewRegistry()
	var log logr.Logger = logr.Discard()
	if t, ok := tb.(*testing.T); ok && testing.Verbose() {
		log = testr.New(t)
	}
	m, err := Start(testConfig(name, key), log, reg)
	if err != nil {
		tb.Fatalf("Start(%s): %v", name, err)
	}
	tb.Cleanup(func() { _ = m.Shutdown() })
	return member{m, name, reg}
}

// cluster starts n members sharing testKey, joins them through the first and waits
// until every one sees all.
func cluster(tb testing.TB, n int) []member {
	tb.Helper()
	ms := make([]member, n)
	var names []string
	for i := range ms {
		ms[i] = start(tb, fmt.Sprintf("node%d", i), testKey)
		names = append(names, ms[i].name)
	}
	for _, m := range ms[1:] {
		if _, err := m.Join([]string{ms[0].Addr()}); err != nil {
			tb.Fatalf("%s joining: %v", m.name, err)
		}
	}
	for _, m := range ms {
		testkit.Eventually(tb, 10*time.Second, convergeTick, "every member sees all", testkit.Holds(func() bool { return slices.Equal(m.Live(), names) },
			func() string { return fmt.Sprintf("%s sees %v, want %v", m.name, m.Live(), names) }))
	}
	return ms
}

// convergeTick is how often a wait for the members asks again: they converge in milliseconds.
const convergeTick = 10 * time.Millisecond

func drain(c <-chan struct{}) {
	for {
		select {
		case <-c:
		default:
			return
		}
	}
}

func without(names []string, drop string) []string {
	return slices.DeleteFunc(slices.Clone(names), func(s string) bool { return s == drop })
}

func gaugeValue(g prometheus.Gauge) float64 {
	var m dto.Metric
	if err := g.Write(&m); err != nil {
		panic(err)
	}
	return m.GetGauge().GetValue()
}

// gatherCount is how many series named name reg gathers.
func gatherCount(reg prometheus.Gatherer, name string) (int, error) {
	mfs, err := reg.Gather()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, mf := range mfs {
		if mf.GetName() == name {
			n += len(mf.GetMetric())
		}
	}
	return n, nil
}
