// Package observability reads the PromQL that herald ships, in the Grafana dashboard
// (config/grafana) and the PrometheusRule (config/prometheus), for the tests that parse
// it with Prometheus' own parser and run it against a real Prometheus in the lab.
package observability

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// Repository paths of the shipped dashboard and rules.
const (
	DashboardPath = "config/grafana/herald-dashboard.json"
	RulesPath     = "config/prometheus/rules.yaml"
)

// Query is one PromQL expression and where it is used.
type Query struct {
	Where string // e.g. `panel "Owner timeline" query A`
	Expr  string // as written, Grafana variables included
}

// Dashboard is the part of a Grafana dashboard the tests read.
type Dashboard struct {
	Title      string  `json:"title"`
	UID        string  `json:"uid"`
	Panels     []Panel `json:"panels"`
	Templating struct {
		List []Variable `json:"list"`
	} `json:"templating"`
}

// Panel is a dashboard panel (rows included).
type Panel struct {
	ID         int            `json:"id"`
	Type       string         `json:"type"`
	Title      string         `json:"title"`
	Datasource *DatasourceRef `json:"datasource"`
	GridPos    GridPos        `json:"gridPos"`
	Targets    []Target       `json:"targets"`
	Panels     []Panel        `json:"panels"` // a collapsed row's panels
}

// DatasourceRef points a panel or query at a data source.
type DatasourceRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// GridPos places a panel on Grafana's 24-column grid.
type GridPos struct {
	H int `json:"h"`
	W int `json:"w"`
	X int `json:"x"`
	Y int `json:"y"`
}

// Target is one query of a panel.
type Target struct {
	RefID      string         `json:"refId"`
	Expr       string         `json:"expr"`
	Datasource *DatasourceRef `json:"datasource"`
}

// Variable is a dashboard template variable.
type Variable struct {
	Name  string          `json:"name"`
	Type  string          `json:"type"`
	Query json.RawMessage `json:"query"`
}

// ReadDashboard parses the dashboard JSON at path.
func ReadDashboard(path string) (*Dashboard, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var d Dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, fmt.Errorf("dashboard %s: %w", path, err)
	}
	return &d, nil
}

// labelValues matches Grafana's label_values(metric, label) variable query.
var labelValues = regexp.MustCompile(`^label_values\(\s*([^,]+?)\s*,\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)$`)

// AllPanels returns the dashboard's panels with those of collapsed rows, which Grafana
// (and the dashboard SDK's rows) keep inside the row rather than beside it.
func (d *Dashboard) AllPanels() []Panel {
	var out []Panel
	for _, p := range d.Panels {
		out = append(out, p)
		out = append(out, p.Panels...)
	}
	return out
}

// Queries returns every PromQL expression of the dashboard: the queries of its panels,
// collapsed rows' included, and the metric selectors of its label_values variables.
func (d *Dashboard) Queries() ([]Query, error) {
	var out []Query
	for _, p := range d.AllPanels() {
		for _, t := range p.Targets {
			out = append(out, Query{Where: fmt.Sprintf("panel %q query %s", p.Title, t.RefID), Expr: t.Expr})
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			return nil, fmt.Errorf("variable %s: %w", v.Name, err)
		}
		m := labelValues.FindStringSubmatch(strings.TrimSpace(q.Query))
		if m == nil {
			return nil, fmt.Errorf("variable %s: query %q is not label_values(metric, label)", v.Name, q.Query)
		}
		out = append(out, Query{Where: fmt.Sprintf("variable %s", v.Name), Expr: m[1]})
	}
	return out, nil
}

// Rule is one alerting rule of the PrometheusRule.
type Rule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// RuleGroup is a group of rules as Prometheus' rule files have them.
type RuleGroup struct {
	Name  string `json:"name"`
	Rules []Rule `json:"rules"`
}

// ReadRules returns the rule groups of the PrometheusRule at path.
func ReadRules(path string) ([]RuleGroup, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var pr struct {
		APIVersion string         `json:"apiVersion"`
		Kind       string         `json:"kind"`
		Metadata   map[string]any `json:"metadata"`
		Spec       struct {
			Groups []RuleGroup `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.UnmarshalStrict(data, &pr); err != nil {
		return nil, fmt.Errorf("rules %s: %w", path, err)
	}
	if pr.Kind != "PrometheusRule" || len(pr.Spec.Groups) == 0 {
		return nil, fmt.Errorf("rules %s: want a PrometheusRule with groups, got kind %q with %d groups", path, pr.Kind, len(pr.Spec.Groups))
	}
	return pr.Spec.Groups, nil
}

// RuleQueries returns the expression of every alert.
func RuleQueries(groups []RuleGroup) []Query {
	var out []Query
	for _, g := range groups {
		for _, r := range g.Rules {
			out = append(out, Query{Where: fmt.Sprintf("alert %s (group %s)", r.Alert, g.Name), Expr: r.Expr})
		}
	}
	return out
}

// RuleFile renders groups as a Prometheus rule file (the PrometheusRule's spec).
func RuleFile(groups []RuleGroup) ([]byte, error) {
	return yaml.Marshal(map[string]any{"groups": groups})
}

// grafanaVars are the values Grafana would put in place of its variables; $vip is a
// regular expression (the dashboard uses it only in =~ matchers).
var grafanaVars = strings.NewReplacer(
	"$__rate_interval", "1m",
	"$__interval", "15s",
	"$__range", "1h",
	"$vip", ".*",
	"${vip}", ".*",
)

// ForPrometheus replaces the dashboard's Grafana variables with values, giving plain
// PromQL. It fails on a variable it does not know.
func ForPrometheus(expr string) (string, error) {
	out := grafanaVars.Replace(expr)
	if i := strings.Index(out, "$"); i >= 0 {
		return "", fmt.Errorf("unknown Grafana variable in %q at %q", expr, out[i:])
	}
	return out, nil
}

// WithVIP is ForPrometheus with $vip set to one IP: a regular expression matching just
// that IP, its backslashes escaped for a PromQL string.
func WithVIP(expr, vip string) (string, error) {
	re := strings.ReplaceAll(regexp.QuoteMeta(vip), `\`, `\\`)
	return ForPrometheus(strings.NewReplacer("${vip}", re, "$vip", re).Replace(expr))
}

var heraldName = regexp.MustCompile(`\bherald_[a-zA-Z0-9_:]*[a-zA-Z0-9]`)

// MetricNames returns the herald_* metric names expr uses, sorted and unique.
func MetricNames(expr string) []string {
	names := heraldName.FindAllString(expr, -1)
	slices.Sort(names)
	return slices.Compact(names)
}
