package manifests

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

const heraldNS = "herald-system"

// components are herald's ServiceAccounts, the workloads running under them and the
// roles controller-gen derives from the markers of their code (make manifests).
var components = []struct {
	name      string
	generated string // config/rbac: the markers' minimum, never deployed
	sa        types.NamespacedName
	workload  string // kind/name of the workload that runs as sa
}{
	{"controller", "config/rbac/role.yaml", types.NamespacedName{Namespace: heraldNS, Name: "herald-controller"}, "Deployment/herald-controller"},
	{"speaker", "config/rbac/speaker/role.yaml", types.NamespacedName{Namespace: heraldNS, Name: "herald-speaker"}, "DaemonSet/herald-speaker"},
}

// narrowings are where the deployed roles grant less than the markers, on purpose: the
// narrower grant is enough (lab_test.go and every lab run the components under it) and
// the markers could say so (namespace=..., resourceNames=...) but do not. Each entry
// must still be needed: once a marker says it, the test asks to delete the entry. None
// now: the markers name herald-system and the memberlist Secret themselves.
var narrowings = []struct {
	component, group, resource string
	verbs                      []string
	namespace                  string // the deployed scope, "" = the marker's
	name                       string // the only resourceName, "" = any
	why                        string
}{}

// extras are what the deployed roles grant beyond the markers, each with its reason:
// anything else a hand-written role grants fails the test, so privileges cannot creep
// in unnoticed. Like narrowings, an entry the markers come to cover must be deleted.
// None now: leader election's Lease and Event have markers in controllers/manager.go.
var extras = []struct {
	component, namespace, group, resource string
	verbs                                 []string
	name                                  string
	why                                   string
}{}

// grant is one permission: a verb on a resource, in a namespace or everywhere, on
// objects of one name or any.
type grant struct {
	Namespace string // "" = every namespace and cluster-scoped objects
	Group     string
	Resource  string
	Verb      string
	Name      string // "" = any name
}

func (g grant) String() string {
	s := fmt.Sprintf("%s %s", g.Verb, g.Resource)
	if g.Group != "" {
		s += "." + g.Group
	}
	if g.Name != "" {
		s += " named " + g.Name
	}
	if g.Namespace == "" {
		return s + " cluster-wide"
	}
	return s + " in " + g.Namespace
}

// covers says whether holding g allows everything o allows.
func (g grant) covers(o grant) bool {
	return g.Group == o.Group && g.Resource == o.Resource && g.Verb == o.Verb &&
		(g.Namespace == "" || g.Namespace == o.Namespace) && (g.Name == "" || g.Name == o.Name)
}

func anyCovers(gs []grant, o grant) bool {
	return slices.ContainsFunc(gs, func(g grant) bool { return g.covers(o) })
}

// expand turns rules into grants in namespace ns ("" for a ClusterRole bound cluster-wide).
func expand(t testing.TB, where string, rules []rbacv1.PolicyRule, ns string) []grant {
	t.Helper()
	var out []grant
	for _, r := range rules {
		if len(r.NonResourceURLs) > 0 {
			t.Errorf("%s: nonResourceURLs %v: herald needs none", where, r.NonResourceURLs)
		}
		names := r.ResourceNames
		if len(names) == 0 {
			names = []string{""}
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					for _, n := range names {
						out = append(out, grant{Namespace: ns, Group: g, Resource: res, Verb: v, Name: n})
					}
				}
			}
		}
	}
	return out
}

// rbacObjects are the roles and bindings of a set of manifests.
type rbacObjects struct {
	clusterRoles map[string]*rbacv1.ClusterRole
	roles        map[types.NamespacedName]*rbacv1.Role
	crbs         []*rbacv1.ClusterRoleBinding
	rbs          []*rbacv1.RoleBinding
}

func collectRBAC(t testing.TB, objs []*unstructured.Unstructured) rbacObjects {
	t.Helper()
	s := rbacObjects{clusterRoles: map[string]*rbacv1.ClusterRole{}, roles: map[types.NamespacedName]*rbacv1.Role{}}
	for _, o := range objs {
		switch o.GetKind() {
		case "ClusterRole":
			s.clusterRoles[o.GetName()] = into[rbacv1.ClusterRole](t, o)
		case "Role":
			s.roles[types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}] = into[rbacv1.Role](t, o)
		case "ClusterRoleBinding":
			s.crbs = append(s.crbs, into[rbacv1.ClusterRoleBinding](t, o))
		case "RoleBinding":
			s.rbs = append(s.rbs, into[rbacv1.RoleBinding](t, o))
		}
	}
	return s
}

func bindsSA(subjects []rbacv1.Subject, sa types.NamespacedName) bool {
	return slices.ContainsFunc(subjects, func(s rbacv1.Subject) bool {
		return s.Kind == rbacv1.ServiceAccountKind && s.Namespace == sa.Namespace && s.Name == sa.Name
	})
}

// grantsOf returns everything the bindings give sa.
func (s rbacObjects) grantsOf(t testing.TB, sa types.NamespacedName) []grant {
	t.Helper()
	var out []grant
	for _, b := range s.crbs {
		if !bindsSA(b.Subjects, sa) {
			continue
		}
		cr, ok := s.clusterRoles[b.RoleRef.Name]
		if b.RoleRef.Kind != "ClusterRole" || !ok {
			t.Errorf("ClusterRoleBinding %s refers to %s %s, which the manifest lacks", b.Name, b.RoleRef.Kind, b.RoleRef.Name)
			continue
		}
		out = append(out, expand(t, "ClusterRole "+cr.Name, cr.Rules, "")...)
	}
	for _, b := range s.rbs {
		if !bindsSA(b.Subjects, sa) {
			continue
		}
		var rules []rbacv1.PolicyRule
		switch b.RoleRef.Kind {
		case "Role":
			r, ok := s.roles[types.NamespacedName{Namespace: b.Namespace, Name: b.RoleRef.Name}]
			if !ok {
				t.Errorf("RoleBinding %s/%s refers to Role %s, which the manifest lacks", b.Namespace, b.Name, b.RoleRef.Name)
				continue
			}
			rules = r.Rules
		case "ClusterRole":
			cr, ok := s.clusterRoles[b.RoleRef.Name]
			if !ok {
				t.Errorf("RoleBinding %s/%s refers to ClusterRole %s, which the manifest lacks", b.Namespace, b.Name, b.RoleRef.Name)
				continue
			}
			rules = cr.Rules
		}
		out = append(out, expand(t, "RoleBinding "+b.Namespace+"/"+b.Name, rules, b.Namespace)...)
	}
	return out
}

// generatedGrants reads a controller-gen RBAC file: its ClusterRole applies everywhere,
// its Roles in their namespaces.
func generatedGrants(t testing.TB, path string) []grant {
	t.Helper()
	var out []grant
	for _, o := range readObjects(t, path) {
		switch o.GetKind() {
		case "ClusterRole":
			out = append(out, expand(t, path, into[rbacv1.ClusterRole](t, o).Rules, "")...)
		case "Role":
			out = append(out, expand(t, path, into[rbacv1.Role](t, o).Rules, o.GetNamespace())...)
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s grants nothing: is it still what `make manifests` writes?", path)
	}
	return out
}

// TestRolesCoverTheMarkers: for each component, the rendered manifest binds to its
// ServiceAccount at least what the markers ask for (but for the listed narrowings) and
// nothing more (but for the listed extras), and its workload runs as that account.
func TestRolesCoverTheMarkers(t *testing.T) {
	objs := readObjects(t, rendered)
	rb := collectRBAC(t, objs)
	for _, c := range components {
		t.Run(c.name, func(t *testing.T) {
			find(t, objs, "ServiceAccount", c.sa.Namespace, c.sa.Name)
			kind, name, _ := strings.Cut(c.workload, "/")
			w := find(t, objs, kind, heraldNS, name)
			if sa, _, _ := unstructured.NestedString(w.Object, "spec", "template", "spec", "serviceAccountName"); sa != c.sa.Name {
				t.Errorf("%s runs as ServiceAccount %q, want %s", c.workload, sa, c.sa.Name)
			}

			have := rb.grantsOf(t, c.sa)
			want := generatedGrants(t, c.generated)
			usedNarrowing := map[string]bool{}
			for _, g := range want {
				if anyCovers(have, g) {
					continue
				}
				narrowed, key, ok := narrow(c.name, g)
				switch {
				case !ok:
					t.Errorf("%s: the markers (%s) ask for %s, which the manifests do not grant: add it to config/%s/rbac.yaml with a comment saying why",
						c.sa.Name, c.generated, g, c.name)
				case !anyCovers(have, narrowed):
					t.Errorf("%s: the markers ask for %s; narrowed to %s by this test, but the manifests do not grant even that", c.sa.Name, g, narrowed)
				default:
					usedNarrowing[key] = true
				}
			}
			for _, n := range narrowings {
				if n.component != c.name {
					continue
				}
				for _, v := range n.verbs {
					if key := narrowingKey(n.component, n.group, n.resource, v); !usedNarrowing[key] {
						t.Errorf("narrowing %s no longer needed (the markers ask for no more than the manifests grant): delete it from this test", key)
					}
				}
			}

			usedExtra := map[grant]bool{}
			for _, h := range have {
				if anyCovers(want, h) {
					continue
				}
				if !isExtra(c.name, h) {
					t.Errorf("%s: the manifests grant %s, which neither the markers (%s) ask for nor this test's extras explain: remove it, or add a marker or an extra with its reason",
						c.sa.Name, h, c.generated)
				}
				usedExtra[h] = true
			}
			for _, e := range extras {
				if e.component != c.name {
					continue
				}
				for _, v := range e.verbs {
					g := grant{Namespace: e.namespace, Group: e.group, Resource: e.resource, Verb: v, Name: e.name}
					switch {
					case anyCovers(want, g):
						t.Errorf("extra %s is now asked for by the markers: delete it from this test", g)
					case !usedExtra[g]:
						t.Errorf("extra %s is not granted by the manifests: delete it from this test", g)
					}
				}
			}
		})
	}
}

func narrowingKey(component, group, resource, verb string) string {
	return fmt.Sprintf("%s: %s %s/%s", component, verb, group, resource)
}

// narrow returns the narrowed form of the marker's grant g, if a narrowing applies.
func narrow(component string, g grant) (grant, string, bool) {
	for _, n := range narrowings {
		if n.component != component || n.group != g.Group || n.resource != g.Resource || !slices.Contains(n.verbs, g.Verb) {
			continue
		}
		out := g
		if n.namespace != "" {
			out.Namespace = n.namespace
		}
		if n.name != "" {
			out.Name = n.name
		}
		return out, narrowingKey(component, g.Group, g.Resource, g.Verb), true
	}
	return grant{}, "", false
}

func isExtra(component string, h grant) bool {
	for _, e := range extras {
		if e.component == component && e.namespace == h.Namespace && e.group == h.Group &&
			e.resource == h.Resource && e.name == h.Name && slices.Contains(e.verbs, h.Verb) {
			return true
		}
	}
	return false
}

// yamlFiles lists the YAML files under config/, relative to the repository.
func yamlFiles(t testing.TB) []string {
	t.Helper()
	var out []string
	root := repoPath("config")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || (!strings.HasSuffix(path, ".yaml") && !strings.HasSuffix(path, ".yml")) {
			return err
		}
		rel, err := filepath.Rel(repoPath("."), path)
		out = append(out, filepath.ToSlash(rel))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// generatedOrRendered says whether a file under config/ is written by a tool, which
// writes no comments: controller-gen's roles and CRDs, and the rendered manifest.
func generatedOrRendered(path string) bool {
	return strings.HasPrefix(path, "config/rbac/") || strings.HasPrefix(path, "config/crd/bases/") || strings.HasPrefix(path, "config/manifests/")
}

// roleDocs returns the Role and ClusterRole documents of a YAML file as yaml.v3 nodes,
// which keep comments.
func roleDocs(t testing.TB, path string) []*yaml.Node {
	t.Helper()
	f, err := os.Open(repoPath(path))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := yaml.NewDecoder(f)
	var out []*yaml.Node
	for {
		var doc yaml.Node
		if err := dec.Decode(&doc); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			t.Fatalf("%s: %v", path, err)
		}
		if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
			continue
		}
		m := doc.Content[0]
		if k := value(m, "kind"); k != nil && (k.Value == "Role" || k.Value == "ClusterRole") {
			out = append(out, m)
		}
	}
}

// value returns the value of key in mapping m, or nil.
func value(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

func roleName(m *yaml.Node) string {
	kind := value(m, "kind").Value
	md := value(m, "metadata")
	if md == nil {
		return kind
	}
	name, ns := value(md, "name"), value(md, "namespace")
	switch {
	case name == nil:
		return kind
	case ns == nil:
		return kind + " " + name.Value
	default:
		return kind + " " + ns.Value + "/" + name.Value
	}
}

// TestNoWildcards: no Role or ClusterRole anywhere in config/ (hand-written, generated
// or rendered) grants "*" in any field.
func TestNoWildcards(t *testing.T) {
	roles := 0
	for _, path := range yamlFiles(t) {
		for _, m := range roleDocs(t, path) {
			roles++
			if value(m, "aggregationRule") != nil {
				t.Errorf("%s: %s aggregates other roles: its rights would not be in this file", path, roleName(m))
			}
			rules := value(m, "rules")
			if rules == nil {
				continue
			}
			for i, r := range rules.Content {
				for _, field := range []string{"apiGroups", "resources", "verbs", "resourceNames", "nonResourceURLs"} {
					v := value(r, field)
					if v == nil {
						continue
					}
					for _, item := range v.Content {
						if strings.Contains(item.Value, "*") {
							t.Errorf("%s: %s rule %d: %s %q is a wildcard: name what is needed", path, roleName(m), i+1, field, item.Value)
						}
					}
				}
			}
		}
	}
	if roles < 6 { // 2 generated, 4 hand-written (and the rendered ones)
		t.Fatalf("found only %d roles under config/: is the test reading the right files?", roles)
	}
}

// TestEveryRuleIsCommented: every rule of the hand-written roles has a comment right
// above it (or at the end of its first line) saying why it is needed.
func TestEveryRuleIsCommented(t *testing.T) {
	roles := 0
	for _, path := range yamlFiles(t) {
		if generatedOrRendered(path) {
			continue
		}
		for _, m := range roleDocs(t, path) {
			roles++
			rules := value(m, "rules")
			if rules == nil || len(rules.Content) == 0 {
				t.Errorf("%s: %s has no rules", path, roleName(m))
				continue
			}
			for i, r := range rules.Content {
				if strings.TrimSpace(strings.TrimLeft(r.HeadComment, "# ")) != "" || r.LineComment != "" ||
					(len(r.Content) > 1 && (r.Content[0].LineComment != "" || r.Content[1].LineComment != "")) {
					continue
				}
				t.Errorf("%s:%d: %s rule %d has no comment saying why it is needed", path, r.Line, roleName(m), i+1)
			}
		}
	}
	if roles < 4 {
		t.Fatalf("found only %d hand-written roles under config/: is the test reading the right files?", roles)
	}
}
