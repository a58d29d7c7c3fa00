package manifests

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"herald.dev/herald/internal/lab"
	"herald.dev/herald/test/observability"
)

// The panels the dashboard must have, by title.
var requiredPanels = []string{
	"Leader changes per VIP",
	"Owner timeline",
	"Failover duration",
	"ARP traffic per node",
	"Memberlist members seen by each speaker",
	"Pool usage",
	"iptables sync time",
	"iptables rules",
	"Speakers by quorum mode",
	"Speaker record writes by reason",
	"Record watch events received by the speakers",
}

// The alerts the rules must have.
var requiredAlerts = []string{
	"HeraldPoolNearlyExhausted",
	"HeraldVIPWithoutOwner",
	"HeraldVIPMultipleOwners",
	"HeraldVIPFlapping",
	"HeraldProxySyncFailing",
	"HeraldSpeakerSilent",
	"HeraldSpeakerTokenNotNodeBound",
}

// TestDashboardLayout: the dashboard has the required panels, every query goes to the
// dashboard's Prometheus data source variable, and the panels fit Grafana's 24-column
// grid without overlapping.
func TestDashboardLayout(t *testing.T) {
	d, err := observability.ReadDashboard(repoPath(observability.DashboardPath))
	if err != nil {
		t.Fatal(err)
	}
	var dsVar bool
	for _, v := range d.Templating.List {
		if v.Name == "datasource" && v.Type == "datasource" && string(v.Query) == `"prometheus"` {
			dsVar = true
		}
	}
	if !dsVar {
		t.Errorf("no Prometheus data source variable ($datasource of type datasource, query prometheus)")
	}
	if d.UID == "" || d.Title == "" {
		t.Errorf("dashboard uid %q, title %q: both must be set (the uid keeps links stable)", d.UID, d.Title)
	}
	titles := map[string]bool{}
	ids := map[int]string{}
	for i, p := range d.Panels {
		titles[p.Title] = true
		if prev, dup := ids[p.ID]; dup {
			t.Errorf("panels %q and %q share id %d", prev, p.Title, p.ID)
		}
		ids[p.ID] = p.Title
		g := p.GridPos
		if g.W <= 0 || g.H <= 0 || g.X < 0 || g.Y < 0 || g.X+g.W > 24 {
			t.Errorf("panel %q: gridPos %+v is outside the 24-column grid", p.Title, g)
		}
		for _, q := range d.Panels[:i] {
			h := q.GridPos
			if g.X < h.X+h.W && h.X < g.X+g.W && g.Y < h.Y+h.H && h.Y < g.Y+g.H {
				t.Errorf("panels %q %+v and %q %+v overlap", q.Title, h, p.Title, g)
			}
		}
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, ds := range append([]*observability.DatasourceRef{p.Datasource}, targetSources(p)...) {
			if ds == nil || ds.Type != "prometheus" || ds.UID != "${datasource}" {
				t.Errorf("panel %q: data source %+v, want {prometheus ${datasource}}", p.Title, ds)
			}
		}
		for _, tg := range p.Targets {
			if strings.TrimSpace(tg.Expr) == "" {
				t.Errorf("panel %q query %s has no expression", p.Title, tg.RefID)
			}
		}
	}
	for _, want := range requiredPanels {
		if !titles[want] {
			t.Errorf("the dashboard lacks the panel %q", want)
		}
	}
}

func targetSources(p observability.Panel) []*observability.DatasourceRef {
	var out []*observability.DatasourceRef
	for _, tg := range p.Targets {
		out = append(out, tg.Datasource)
	}
	return out
}

// TestPromQLParses: every dashboard query (Grafana's variables filled in) and every
// alert parses with Prometheus' own parser, through promtool check rules; the alerts'
// annotation templates are checked too. A broken expression shows the check can fail.
func TestPromQLParses(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool not found: install the Debian package prometheus (.ci/run does)")
	}
	d, err := observability.ReadDashboard(repoPath(observability.DashboardPath))
	if err != nil {
		t.Fatal(err)
	}
	queries, err := d.Queries()
	if err != nil {
		t.Fatal(err)
	}
	groups, err := observability.ReadRules(repoPath(observability.RulesPath))
	if err != nil {
		t.Fatal(err)
	}
	alerts := map[string]bool{}
	for _, g := range groups {
		for _, r := range g.Rules {
			alerts[r.Alert] = true
		}
	}
	for _, want := range requiredAlerts {
		if !alerts[want] {
			t.Errorf("%s lacks the alert %s", observability.RulesPath, want)
		}
	}

	dir := t.TempDir()
	check := func(name string, groups []observability.RuleGroup) error {
		data, err := observability.RuleFile(groups)
		if err != nil {
			return err
		}
		path := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, promtool, "check", "rules", path).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%w: %s", err, bytes.TrimSpace(out))
		}
		return nil
	}
	if err := check("alerts", groups); err != nil {
		t.Errorf("%s: %v", observability.RulesPath, err)
	}
	for i, q := range queries {
		expr, err := observability.ForPrometheus(q.Expr)
		if err != nil {
			t.Errorf("%s: %v", q.Where, err)
			continue
		}
		g := []observability.RuleGroup{{Name: "dashboard", Rules: []observability.Rule{{Alert: "Query", Expr: expr}}}}
		if err := check(fmt.Sprintf("query%d", i), g); err != nil {
			t.Errorf("%s: %s does not parse: %v", q.Where, expr, err)
		}
		if len(observability.MetricNames(expr)) == 0 {
			t.Errorf("%s: %s uses no herald_ metric", q.Where, expr)
		}
	}
	broken := []observability.RuleGroup{{Name: "broken", Rules: []observability.Rule{{Alert: "Broken", Expr: `sum by (ip) (herald_l2_owner > `}}}}
	if err := check("broken", broken); err == nil {
		t.Errorf("promtool accepted a broken expression: the check above cannot fail")
	}
	if _, err := observability.ForPrometheus(`rate(x[$__unknown])`); err == nil {
		t.Errorf("an unknown Grafana variable was not reported")
	}
}

// TestDashboardConfigMap: config/grafana renders the dashboard, byte for byte, into one
// ConfigMap labelled for Grafana's dashboard sidecar.
func TestDashboardConfigMap(t *testing.T) {
	objs, err := lab.DecodeObjects(kustomize(t, "config/grafana"))
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 1 || objs[0].GetKind() != "ConfigMap" {
		t.Fatalf("config/grafana renders %d objects, want one ConfigMap", len(objs))
	}
	cm := objs[0]
	if cm.GetLabels()["grafana_dashboard"] != "1" {
		t.Errorf("ConfigMap %s lacks the label grafana_dashboard=1 that Grafana's sidecar looks for: %v", cm.GetName(), cm.GetLabels())
	}
	want, err := os.ReadFile(repoPath(observability.DashboardPath))
	if err != nil {
		t.Fatal(err)
	}
	got, _, _ := unstructured.NestedString(cm.Object, "data", filepath.Base(observability.DashboardPath))
	if got != string(want) {
		t.Errorf("ConfigMap %s does not hold %s as it is", cm.GetName(), observability.DashboardPath)
	}
}
