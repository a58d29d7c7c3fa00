// Package charts holds the tests of herald's Helm chart (charts/herald); the chart
// itself is YAML and templates, not Go.
//
// chart_test.go runs the helm binary that hack/setup-helm.sh builds (named by $HELM,
// which `make test` sets) and fails, never skips, without it:
//
//   - helm lint passes, with the defaults and with every optional part turned on;
//   - with the defaults, `helm template --namespace herald-system` renders the objects
//     of config/manifests/herald.yaml, compared as parsed objects, and the optional
//     Prometheus objects are those of config/prometheus; the differences, each with
//     its reason, are listed in chartOnly;
//   - the chart's copies of config files (files/) are current;
//   - values reach the objects they name, on both workloads, and every flag the chart
//     passes is one that `herald controller` or `herald speaker` defines.
package charts
