package charts

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	runtimeconv "k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"herald.dev/herald/cmd/herald/app"
	"herald.dev/herald/internal/testenv"
)

// The namespace config/default installs into, and the release name the README uses.
const (
	namespace = "herald-system"
	release   = "herald"
)

// repoRoot is the repository's directory (this file is in charts/).
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..")
}

func repoPath(path string) string { return filepath.Join(repoRoot(), filepath.FromSlash(path)) }

var chartDir = repoPath("charts/herald")

// helmBin is the helm of hack/setup-helm.sh, named by $HELM; the test fails (never
// skips) without it.
func helmBin(t testing.TB) string {
	t.Helper()
	bin := os.Getenv("HELM")
	if bin == "" {
		t.Fatal("HELM is unset: run `make test`, or export HELM=$(hack/setup-helm.sh)")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("HELM=%s: %v: build it with hack/setup-helm.sh", bin, err)
	}
	return bin
}

// helm runs the helm binary; the error carries its stderr.
func helm(t testing.TB, args ...string) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, helmBin(t), args...)
	// Keep helm away from the user's configuration and caches.
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+home, "HELM_CACHE_HOME="+home, "HELM_DATA_HOME="+home)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("helm %s: %w\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return out, nil
}

// object is a decoded Kubernetes object.
type object = map[string]any

// render runs `helm template` with values (YAML, may be empty) and decodes the objects.
func render(t testing.TB, values string) []object {
	t.Helper()
	out, err := renderErr(t, values)
	if err != nil {
		t.Fatal(err)
	}
	return decode(t, "helm template", out)
}

func renderErr(t testing.TB, values string) ([]byte, error) {
	t.Helper()
	args := []string{"template", release, chartDir, "--namespace", namespace}
	if values != "" {
		f := filepath.Join(t.TempDir(), "values.yaml")
		if err := os.WriteFile(f, []byte(values), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--values", f)
	}
	return helm(t, args...)
}

func decode(t testing.TB, what string, data []byte) []object {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []object
	for {
		var o object
		if err := dec.Decode(&o); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			t.Fatalf("%s: %v", what, err)
		}
		if len(o) > 0 {
			out = append(out, o)
		}
	}
}

func readObjects(t testing.TB, paths ...string) []object {
	t.Helper()
	var out []object
	for _, p := range paths {
		data, err := os.ReadFile(repoPath(p))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, decode(t, p, data)...)
	}
	return out
}

// key names an object: kind namespace/name.
func key(o object) string {
	md, _ := o["metadata"].(map[string]any)
	if ns, ok := md["namespace"]; ok {
		return fmt.Sprintf("%v %v/%v", o["kind"], ns, md["name"])
	}
	return fmt.Sprintf("%v %v", o["kind"], md["name"])
}

func metadataMap(o object, field string) map[string]any {
	md, _ := o["metadata"].(map[string]any)
	m, _ := md[field].(map[string]any)
	return m
}

func deleteMetadata(o object, field string, keys ...string) {
	m := metadataMap(o, field)
	for _, k := range keys {
		delete(m, k)
	}
	if m != nil && len(m) == 0 {
		delete(o["metadata"].(map[string]any), field)
	}
}

// The deliberate differences between the chart and config/ (config/manifests/herald.yaml
// with the defaults, config/prometheus with the Prometheus options), with their reasons.
// normalize undoes each on the chart's objects before they are compared.
//
//  1. Every object the chart renders carries Helm's labels helm.sh/chart and
//     app.kubernetes.io/managed-by, which config/ cannot know.
//  2. The CRDs carry helm.sh/resource-policy: keep (crds.keep), so that `helm
//     uninstall` does not delete them and every pool and advertisement with them.
//  3. The Namespace is rendered only with namespace.create=true: `helm install` stores
//     its release in the namespace before it creates any object, so by default the
//     namespace exists beforehand (TestDefaultsAreTheManifest renders it both ways).
//  4. The PodMonitors, PrometheusRule and scraping identity carry
//     app.kubernetes.io/part-of: herald like every other object of the release;
//     config/prometheus, applied on its own, has no such label.
func normalize(objs []object, prometheus bool) []object {
	for _, o := range objs {
		deleteMetadata(o, "labels", "helm.sh/chart", "app.kubernetes.io/managed-by")
		if o["kind"] == "CustomResourceDefinition" {
			deleteMetadata(o, "annotations", "helm.sh/resource-policy")
		}
		if prometheus {
			deleteMetadata(o, "labels", "app.kubernetes.io/part-of")
		}
	}
	return objs
}

// diff lists where got and want differ, as paths.
func diff(path string, got, want any) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: got %v, want a map", path, got)}
		}
		keys := map[string]bool{}
		for k := range g {
			keys[k] = true
		}
		for k := range w {
			keys[k] = true
		}
		var out []string
		for _, k := range slices.Sorted(func(yield func(string) bool) {
			for k := range keys {
				if !yield(k) {
					return
				}
			}
		}) {
			gv, gok := g[k]
			wv, wok := w[k]
			switch {
			case !gok:
				out = append(out, fmt.Sprintf("%s.%s: missing, want %v", path, k, wv))
			case !wok:
				out = append(out, fmt.Sprintf("%s.%s: %v, want nothing", path, k, gv))
			default:
				out = append(out, diff(path+"."+k, gv, wv)...)
			}
		}
		return out
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return []string{fmt.Sprintf("%s: got %v, want %v", path, got, want)}
		}
		var out []string
		for i := range w {
			out = append(out, diff(fmt.Sprintf("%s[%d]", path, i), g[i], w[i])...)
		}
		return out
	default:
		if !reflect.DeepEqual(got, want) {
			return []string{fmt.Sprintf("%s: got %v (%T), want %v (%T)", path, got, got, want, want)}
		}
		return nil
	}
}

// sameObjects fails unless got and want hold the same objects (by kind, namespace and
// name) with the same content.
func sameObjects(t *testing.T, what string, got, want []object) {
	t.Helper()
	index := func(objs []object) map[string]object {
		m := map[string]object{}
		for _, o := range objs {
			if _, dup := m[key(o)]; dup {
				t.Errorf("%s: %s twice", what, key(o))
			}
			m[key(o)] = o
		}
		return m
	}
	g, w := index(got), index(want)
	var keys []string
	for k := range w {
		keys = append(keys, k)
	}
	for k := range g {
		if _, ok := w[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch {
		case g[k] == nil:
			t.Errorf("%s: the chart lacks %s", what, k)
		case w[k] == nil:
			t.Errorf("%s: the chart has %s, which is not wanted", what, k)
		default:
			for _, d := range diff(k, g[k], w[k]) {
				t.Errorf("%s: %s", what, d)
			}
		}
	}
}

func without(objs []object, kind string) []object {
	return slices.DeleteFunc(slices.Clone(objs), func(o object) bool { return o["kind"] == kind })
}

func TestLint(t *testing.T) {
	for _, c := range []struct{ name, values string }{
		{"defaults", ""},
		{"everything on", everythingOn},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := []string{"lint", "--strict", chartDir}
			if c.values != "" {
				f := filepath.Join(t.TempDir(), "values.yaml")
				if err := os.WriteFile(f, []byte(c.values), 0o644); err != nil {
					t.Fatal(err)
				}
				args = append(args, "--values", f)
			}
			if _, err := helm(t, args...); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestDefaultsAreTheManifest: the defaults render config/manifests/herald.yaml, but for
// the Namespace, which namespace.create=true adds.
func TestDefaultsAreTheManifest(t *testing.T) {
	manifest := readObjects(t, "config/manifests/herald.yaml")
	t.Run("defaults", func(t *testing.T) {
		sameObjects(t, "defaults", normalize(render(t, ""), false), without(manifest, "Namespace"))
	})
	t.Run("namespace.create", func(t *testing.T) {
		sameObjects(t, "namespace.create=true", normalize(render(t, "namespace: {create: true}"), false), manifest)
	})
}

// TestPrometheusIsConfigPrometheus: the Prometheus options add config/prometheus's
// objects, and nothing else.
func TestPrometheusIsConfigPrometheus(t *testing.T) {
	defaults := map[string]bool{}
	for _, o := range render(t, "") {
		defaults[key(o)] = true
	}
	var added []object
	for _, o := range render(t, "prometheus: {podMonitor: {enabled: true}, prometheusRule: {enabled: true}}") {
		if !defaults[key(o)] {
			added = append(added, o)
		}
	}
	want := readObjects(t, "config/prometheus/scraper.yaml", "config/prometheus/podmonitors.yaml", "config/prometheus/rules.yaml")
	sameObjects(t, "prometheus", normalize(added, true), want)
}

// TestFilesAreCurrent: the chart's copies of config files are the files.
func TestFilesAreCurrent(t *testing.T) {
	copies := map[string]string{"charts/herald/files/prometheus/rules.yaml": "config/prometheus/rules.yaml"}
	bases, err := filepath.Glob(repoPath("config/crd/bases/*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(bases) == 0 {
		t.Fatal("no CRDs in config/crd/bases")
	}
	for _, b := range bases {
		copies["charts/herald/files/crds/"+filepath.Base(b)] = "config/crd/bases/" + filepath.Base(b)
	}
	inChart, err := filepath.Glob(repoPath("charts/herald/files/crds/*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range inChart {
		if _, ok := copies["charts/herald/files/crds/"+filepath.Base(c)]; !ok {
			t.Errorf("charts/herald/files/crds/%s has no original in config/crd/bases: run `make manifests`", filepath.Base(c))
		}
	}
	for cp, orig := range copies {
		a, errA := os.ReadFile(repoPath(cp))
		b, errB := os.ReadFile(repoPath(orig))
		if errB != nil {
			t.Fatal(errB)
		}
		if errA != nil || !bytes.Equal(a, b) {
			t.Errorf("%s is not a copy of %s: run `make manifests` (it copies both)", cp, orig)
		}
	}
}

// find returns the rendered object of that kind and name, converted, or fails.
func find[T any](t testing.TB, objs []object, kind, name string) *T {
	t.Helper()
	for _, o := range objs {
		if md, _ := o["metadata"].(map[string]any); o["kind"] == kind && md["name"] == name {
			out := new(T)
			if err := runtimeconv.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o, out, true); err != nil {
				t.Fatalf("%s %s: %v", kind, name, err)
			}
			return out
		}
	}
	t.Fatalf("no %s %s rendered", kind, name)
	return nil
}

func workloads(t testing.TB, objs []object) (controller, speaker *corev1.PodTemplateSpec) {
	t.Helper()
	d := find[appsv1.Deployment](t, objs, "Deployment", "herald-controller")
	ds := find[appsv1.DaemonSet](t, objs, "DaemonSet", "herald-speaker")
	return &d.Spec.Template, &ds.Spec.Template
}

// TestValuesReachBothWorkloads: each scheduling and image value lands in the pod
// template it names, for the controller and the speaker alike.
func TestValuesReachBothWorkloads(t *testing.T) {
	objs := render(t, `
imagePullSecrets: [{name: regcred}]
controller:
  image: {repository: registry.example/herald-controller, tag: v9.9.9, pullPolicy: Always}
  tolerations: [{key: dedicated, operator: Equal, value: controller, effect: NoSchedule}]
  nodeSelector: {example.com/role: controller}
  affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: example.com/c, operator: Exists}]}]}}}
  resources: {requests: {cpu: 10m, memory: 32Mi}, limits: {memory: 128Mi}}
  priorityClassName: controller-class
  podAnnotations: {example.com/note: controller}
  podLabels: {example.com/team: controller}
speaker:
  image: {repository: registry.example/herald-speaker, digest: "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", pullPolicy: Never}
  tolerations: [{key: dedicated, operator: Equal, value: speaker, effect: NoExecute}]
  nodeSelector: {example.com/role: speaker}
  affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: example.com/s, operator: Exists}]}]}}}
  resources: {requests: {cpu: 20m, memory: 48Mi}, limits: {memory: 256Mi}}
  priorityClassName: speaker-class
  podAnnotations: {example.com/note: speaker}
  podLabels: {example.com/team: speaker}
`)
	controller, speaker := workloads(t, objs)
	for _, c := range []struct {
		name, image, affinityKey string
		pull                     corev1.PullPolicy
		pod                      *corev1.PodTemplateSpec
		effect                   corev1.TaintEffect
		memLimit                 string
	}{
		{"controller", "registry.example/herald-controller:v9.9.9", "example.com/c", corev1.PullAlways, controller, corev1.TaintEffectNoSchedule, "128Mi"},
		{"speaker", "registry.example/herald-speaker@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "example.com/s", corev1.PullNever, speaker, corev1.TaintEffectNoExecute, "256Mi"},
	} {
		spec, ctr := c.pod.Spec, c.pod.Spec.Containers[0]
		if ctr.Image != c.image || ctr.ImagePullPolicy != c.pull {
			t.Errorf("%s: image %s (%s), want %s (%s)", c.name, ctr.Image, ctr.ImagePullPolicy, c.image, c.pull)
		}
		if want := []corev1.LocalObjectReference{{Name: "regcred"}}; !reflect.DeepEqual(spec.ImagePullSecrets, want) {
			t.Errorf("%s: imagePullSecrets %v, want %v", c.name, spec.ImagePullSecrets, want)
		}
		if len(spec.Tolerations) != 1 || spec.Tolerations[0].Value != c.name || spec.Tolerations[0].Effect != c.effect {
			t.Errorf("%s: tolerations %+v, want only the one given", c.name, spec.Tolerations)
		}
		// Helm merges maps: the given selector joins the default kubernetes.io/os.
		if want := map[string]string{"kubernetes.io/os": "linux", "example.com/role": c.name}; !reflect.DeepEqual(spec.NodeSelector, want) {
			t.Errorf("%s: nodeSelector %v, want %v", c.name, spec.NodeSelector, want)
		}
		if a := spec.Affinity; a == nil || a.NodeAffinity == nil ||
			a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0].Key != c.affinityKey {
			t.Errorf("%s: affinity %+v, want the one given", c.name, a)
		}
		if got := ctr.Resources.Limits[corev1.ResourceMemory]; got.Cmp(resource.MustParse(c.memLimit)) != 0 {
			t.Errorf("%s: memory limit %s, want %s", c.name, got.String(), c.memLimit)
		}
		if spec.PriorityClassName != c.name+"-class" {
			t.Errorf("%s: priorityClassName %q", c.name, spec.PriorityClassName)
		}
		if c.pod.Annotations["example.com/note"] != c.name {
			t.Errorf("%s: pod annotations %v", c.name, c.pod.Annotations)
		}
		want := map[string]string{"app.kubernetes.io/name": "herald", "app.kubernetes.io/component": c.name, "example.com/team": c.name}
		if !reflect.DeepEqual(c.pod.Labels, want) {
			t.Errorf("%s: pod labels %v, want %v", c.name, c.pod.Labels, want)
		}
	}
	// podLabels stay out of the selectors, which a Deployment cannot change.
	d := find[appsv1.Deployment](t, objs, "Deployment", "herald-controller")
	if _, ok := d.Spec.Selector.MatchLabels["example.com/team"]; ok {
		t.Errorf("podLabels reached the Deployment's selector %v", d.Spec.Selector.MatchLabels)
	}
}

// everythingOn turns on every flag and option the chart has.
const everythingOn = `
loadBalancerClass: example.com/herald
namespace: {create: true}
apiServer: {host: 172.18.0.2, port: 6443}
metrics: {certSecretName: herald-metrics-tls}
controller:
  logLevel: 1
  extraArgs: [--service-workers=8]
speaker:
  logLevel: debug
  memberlist: {mlBindPort: 7947, secretName: my-memberlist}
  excludeInterfaces: ^(lo|docker.*)$
  ignoreExcludeLB: true
  proxy: {mode: none, clusterCIDR: [10.244.0.0/16, "fd00:10:244::/56"]}
  extraArgs: [--gratuitous-refresh=30s]
prometheus:
  podMonitor: {enabled: true, additionalLabels: {release: kps}, relabelings: [{targetLabel: cluster, replacement: lab}]}
  prometheusRule: {enabled: true, additionalLabels: {release: kps}}
`

// TestFlags: the speaker's and the controller's options become the binary's flags.
func TestFlags(t *testing.T) {
	objs := render(t, everythingOn)
	controller, speaker := workloads(t, objs)
	wantController := []string{"controller", "--leader-elect=true", "--metrics-bind-address=:7472", "--metrics-secure=true",
		"--metrics-cert-dir=/etc/herald/metrics-tls", "--health-probe-bind-address=:7473", "--memberlist-secret=my-memberlist",
		"--lb-class=example.com/herald", "--v=1", "--service-workers=8"}
	if got := controller.Spec.Containers[0].Args; !slices.Equal(got, wantController) {
		t.Errorf("controller args\n got %q\nwant %q", got, wantController)
	}
	wantSpeaker := []string{"speaker", "--ml-bind-port=7947", "--ml-secret-name=my-memberlist", "--metrics-bind-address=:7474",
		"--metrics-secure=true", "--metrics-cert-dir=/etc/herald/metrics-tls", "--health-probe-bind-address=:7475",
		"--lb-class=example.com/herald", "--exclude-interfaces=^(lo|docker.*)$", "--ignore-exclude-lb", "--proxy=none",
		"--cluster-cidr=10.244.0.0/16,fd00:10:244::/56", "--v=2", "--gratuitous-refresh=30s"}
	if got := speaker.Spec.Containers[0].Args; !slices.Equal(got, wantSpeaker) {
		t.Errorf("speaker args\n got %q\nwant %q", got, wantSpeaker)
	}
	// The memberlist port is the container's (host) port, TCP and UDP.
	for _, p := range speaker.Spec.Containers[0].Ports {
		if strings.HasPrefix(p.Name, "memberlist-") && p.ContainerPort != 7947 {
			t.Errorf("speaker port %s is %d, want 7947", p.Name, p.ContainerPort)
		}
	}
	// The memberlist Secret's new name: mounted, and the one Secret both Roles may get.
	var mounted string
	for _, v := range speaker.Spec.Volumes {
		if v.Name == "memberlist" && v.Secret != nil {
			mounted = v.Secret.SecretName
		}
	}
	if mounted != "my-memberlist" {
		t.Errorf("speaker mounts Secret %q, want my-memberlist", mounted)
	}
	for _, role := range []string{"herald-controller", "herald-speaker"} {
		r := find[rbacv1.Role](t, objs, "Role", role)
		var names []string
		for _, rule := range r.Rules {
			if slices.Contains(rule.Resources, "secrets") {
				names = append(names, rule.ResourceNames...)
			}
		}
		if !slices.Contains(names, "my-memberlist") || slices.Contains(names, "herald-memberlist") {
			t.Errorf("Role %s gets Secrets %v, want my-memberlist", role, names)
		}
	}
	// The certificate Secret is mounted where --metrics-cert-dir points, in both.
	for name, pod := range map[string]*corev1.PodTemplateSpec{"controller": controller, "speaker": speaker} {
		ok := false
		for _, m := range pod.Spec.Containers[0].VolumeMounts {
			ok = ok || (m.Name == "metrics-tls" && m.MountPath == "/etc/herald/metrics-tls")
		}
		for _, v := range pod.Spec.Volumes {
			ok = ok && (v.Name != "metrics-tls" || v.Secret.SecretName == "herald-metrics-tls")
		}
		if !ok {
			t.Errorf("%s does not mount herald-metrics-tls at /etc/herald/metrics-tls", name)
		}
	}
	cm := find[corev1.ConfigMap](t, objs, "ConfigMap", "herald-apiserver")
	if cm.Data["host"] != "172.18.0.2" || cm.Data["port"] != "6443" {
		t.Errorf("ConfigMap herald-apiserver: %v", cm.Data)
	}
}

// TestFlagsExist: every flag the chart passes, with the defaults or with every option
// on, is defined by the subcommand it is passed to.
func TestFlagsExist(t *testing.T) {
	root := app.NewRootCommand()
	for _, values := range []string{"", everythingOn, "metrics: {secure: false}\ncontroller: {metricsPort: 0}\nspeaker: {metricsPort: 0}"} {
		controller, speaker := workloads(t, render(t, values))
		for _, pod := range []*corev1.PodTemplateSpec{controller, speaker} {
			args := pod.Spec.Containers[0].Args
			cmd, _, err := root.Find(args[:1])
			if err != nil || cmd == root {
				t.Fatalf("herald has no subcommand %q: %v", args[0], err)
			}
			for _, a := range args[1:] {
				name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
				if !strings.HasPrefix(a, "--") || cmd.Flags().Lookup(name) == nil {
					t.Errorf("herald %s has no flag %q (values %q)", args[0], a, values)
				}
			}
		}
	}
}

// TestMetricsOff: metricsPort 0 switches a component's metrics off, its port and its
// PodMonitor with it; metrics.secure=false scrapes plain HTTP without a token.
func TestMetricsOff(t *testing.T) {
	objs := render(t, "metrics: {secure: false}\ncontroller: {metricsPort: 0}\nprometheus: {podMonitor: {enabled: true}}")
	controller, speaker := workloads(t, objs)
	if args := controller.Spec.Containers[0].Args; !slices.Contains(args, "--metrics-bind-address=0") {
		t.Errorf("controller args %q lack --metrics-bind-address=0", args)
	}
	for _, p := range controller.Spec.Containers[0].Ports {
		if p.Name == "metrics" {
			t.Errorf("controller still has port metrics")
		}
	}
	if args := speaker.Spec.Containers[0].Args; !slices.Contains(args, "--metrics-secure=false") {
		t.Errorf("speaker args %q lack --metrics-secure=false", args)
	}
	var monitors []string
	for _, o := range objs {
		switch o["kind"] {
		case "PodMonitor":
			monitors = append(monitors, key(o))
			ep := o["spec"].(map[string]any)["podMetricsEndpoints"].([]any)[0].(map[string]any)
			if ep["scheme"] != "http" || ep["authorization"] != nil || ep["tlsConfig"] != nil {
				t.Errorf("%s scrapes %v with authorization %v, want plain http", key(o), ep["scheme"], ep["authorization"])
			}
		case "Secret", "ServiceAccount":
			if metadataMap(o, "annotations")["kubernetes.io/service-account.name"] != nil || key(o) == "ServiceAccount herald-system/herald-metrics-reader" {
				t.Errorf("%s rendered although plain HTTP needs no token", key(o))
			}
		}
	}
	if want := []string{"PodMonitor herald-system/herald-speaker"}; !slices.Equal(monitors, want) {
		t.Errorf("PodMonitors %v, want %v", monitors, want)
	}
}

// TestProxyOffDropsNetAdmin: NET_ADMIN is for the proxier; without it the speaker
// adds NET_RAW alone.
func TestProxyOffDropsNetAdmin(t *testing.T) {
	for _, c := range []struct {
		values string
		want   []corev1.Capability
	}{
		{"", []corev1.Capability{"NET_RAW", "NET_ADMIN"}},
		{"speaker: {proxy: {mode: nftables}}", []corev1.Capability{"NET_RAW", "NET_ADMIN"}},
		{"speaker: {proxy: {mode: none}}", []corev1.Capability{"NET_RAW"}},
	} {
		_, speaker := workloads(t, render(t, c.values))
		sc := speaker.Spec.Containers[0].SecurityContext
		if sc == nil || sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Add, c.want) {
			t.Errorf("values %q: speaker security context %+v, want capabilities %v added", c.values, sc, c.want)
		}
	}
}

// TestNetworkPolicies: off by default; on, each pod admits its own ports only, the
// speaker's memberlist from anyone and the rest from networkPolicy.from.
func TestNetworkPolicies(t *testing.T) {
	for _, o := range render(t, "") {
		if o["kind"] == "NetworkPolicy" {
			t.Errorf("%s rendered by default", key(o))
		}
	}
	objs := render(t, "networkPolicy: {enabled: true, from: [{namespaceSelector: {matchLabels: {name: monitoring}}}]}\nspeaker: {proxy: {mode: none}}")
	ports := func(r networkingv1.NetworkPolicyIngressRule) []string {
		var out []string
		for _, p := range r.Ports {
			out = append(out, fmt.Sprintf("%s/%s", *p.Protocol, p.Port))
		}
		return out
	}
	c := find[networkingv1.NetworkPolicy](t, objs, "NetworkPolicy", "herald-controller")
	if len(c.Spec.Ingress) != 1 || !slices.Equal(ports(c.Spec.Ingress[0]), []string{"TCP/7472", "TCP/7473"}) || len(c.Spec.Ingress[0].From) != 1 {
		t.Errorf("controller ingress %+v, want TCP 7472 and 7473 from the monitoring namespace", c.Spec.Ingress)
	}
	s := find[networkingv1.NetworkPolicy](t, objs, "NetworkPolicy", "herald-speaker")
	if len(s.Spec.Ingress) != 2 ||
		!slices.Equal(ports(s.Spec.Ingress[0]), []string{"TCP/7474", "TCP/7475"}) || len(s.Spec.Ingress[0].From) != 1 ||
		!slices.Equal(ports(s.Spec.Ingress[1]), []string{"TCP/7946", "UDP/7946"}) || len(s.Spec.Ingress[1].From) != 0 {
		t.Errorf("speaker ingress %+v, want metrics and health from the monitoring namespace (no proxier health: proxy none), memberlist from anyone", s.Spec.Ingress)
	}
}

// TestOwnNodePolicyOff: speaker.ownNodePolicy false (clusters before 1.30) leaves out
// the policy and its binding, and nothing else.
func TestOwnNodePolicyOff(t *testing.T) {
	var left []string
	for _, o := range render(t, "speaker: {ownNodePolicy: false}") {
		if k, _ := o["kind"].(string); strings.HasPrefix(k, "ValidatingAdmissionPolicy") {
			left = append(left, key(o))
		}
	}
	if len(left) != 0 {
		t.Errorf("speaker.ownNodePolicy false still renders %v", left)
	}
	if on, off := len(render(t, "")), len(render(t, "speaker: {ownNodePolicy: false}")); on-off != 2 {
		t.Errorf("%d objects with the policy, %d without: want 2 fewer", on, off)
	}
}

// TestBadLogLevel: a log level the binaries do not know stops the rendering.
func TestBadLogLevel(t *testing.T) {
	out, err := renderErr(t, "speaker: {logLevel: warn}")
	if err == nil || !strings.Contains(err.Error(), `logLevel "warn"`) {
		t.Errorf("logLevel warn rendered (error %v):\n%.300s", err, out)
	}
}

// TestInstallUpgradeUninstall: on a real kube-apiserver (envtest, with the Prometheus
// Operator's CRDs), `helm install` with every option on is accepted in a namespace made
// beforehand as the README says, `helm upgrade --reset-values` to the defaults removes
// the optional objects (without values helm would reuse the old ones), and `helm
// uninstall` leaves the CRDs (crds.keep). No pod runs: there is no scheduler and no node.
func TestInstallUpgradeUninstall(t *testing.T) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		t.Fatal("KUBEBUILDER_ASSETS is unset: run `make test`, or export KUBEBUILDER_ASSETS=$(hack/setup-test-binaries.sh)")
	}
	monitoring := filepath.Join(assets, "monitoring-crds")
	if paths, _ := filepath.Glob(filepath.Join(monitoring, "*.yaml")); len(paths) < 2 {
		t.Fatalf("%s lacks the PodMonitor and PrometheusRule CRDs: run hack/setup-test-binaries.sh", monitoring)
	}
	env := testenv.Environment(assets, testenv.ServiceCIDRs, testenv.NoCRDs())
	env.CRDDirectoryPaths = []string{monitoring}
	if _, err := env.Start(); err != nil {
		_ = env.Stop()
		t.Fatalf("starting kube-apiserver and etcd: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping envtest: %v", err)
		}
	})
	admin, err := env.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := admin.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(env.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "privileged",
	}}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}

	run := func(args ...string) {
		t.Helper()
		if _, err := helm(t, append(args, "--kubeconfig", kubeconfig, "--namespace", namespace)...); err != nil {
			t.Fatal(err)
		}
	}
	values := filepath.Join(t.TempDir(), "values.yaml")
	on := strings.Replace(everythingOn, "namespace: {create: true}", "namespace: {create: false}", 1)
	if err := os.WriteFile(values, []byte(on), 0o644); err != nil {
		t.Fatal(err)
	}
	// exists tells whether the object is there; namespaced kinds are looked up in namespace.
	exists := func(apiVersion, kind, name string) bool {
		t.Helper()
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(apiVersion)
		u.SetKind(kind)
		key := client.ObjectKey{Namespace: namespace, Name: name}
		if kind == "CustomResourceDefinition" {
			key.Namespace = ""
		}
		err := c.Get(ctx, key, u)
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}

	run("install", release, chartDir, "--values", values)
	if !exists("apps/v1", "DaemonSet", "herald-speaker") || !exists("monitoring.coreos.com/v1", "PodMonitor", "herald-speaker") ||
		!exists("v1", "ConfigMap", "herald-apiserver") {
		t.Fatal("helm install did not create the DaemonSet, the PodMonitor and the ConfigMap")
	}
	run("upgrade", release, chartDir, "--reset-values")
	if exists("monitoring.coreos.com/v1", "PodMonitor", "herald-speaker") || exists("v1", "ConfigMap", "herald-apiserver") {
		t.Error("helm upgrade to the defaults left the PodMonitor or the ConfigMap")
	}
	run("uninstall", release, "--wait")
	if exists("apps/v1", "Deployment", "herald-controller") {
		t.Error("helm uninstall left the Deployment")
	}
	for _, crd := range []string{"ipaddresspools.herald.dev", "l2advertisements.herald.dev", "vipstatuses.herald.dev"} {
		if !exists("apiextensions.k8s.io/v1", "CustomResourceDefinition", crd) {
			t.Errorf("helm uninstall deleted CRD %s (crds.keep)", crd)
		}
	}
}
