package lab

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"herald.dev/herald/internal/lab/netlab"
)

// The lab runs herald's controller and speakers as a cluster would: under the
// ServiceAccounts of the deployment manifest, with its RBAC and nothing more, so that
// every lab run (the end-to-end tests, `make demo`) shows the RBAC is enough. The lab
// agents (the kubelets' stand-ins) and the tests' clients stay cluster admin.

// Manifest is herald's all-in-one manifest, relative to the repository: `make render`
// writes it from config/default.
const Manifest = "config/manifests/herald.yaml"

// The ServiceAccounts of the manifest that herald's components run as.
var (
	ControllerAccount = types.NamespacedName{Namespace: HeraldNamespace, Name: "herald-controller"}
	SpeakerAccount    = types.NamespacedName{Namespace: HeraldNamespace, Name: "herald-speaker"}
)

const (
	// fieldOwner is the lab's server-side apply field manager.
	fieldOwner = "herald-lab"
	// tokenTTL is how long the components' tokens last: as long as anyone keeps a lab.
	// The lab's kube-apiserver sets no --service-account-max-token-expiration, so a
	// TokenRequest gets what it asks for (ServiceAccountKubeconfig checks).
	tokenTTL = 365 * 24 * time.Hour
)

// installedKinds are the kinds of the manifest the lab applies, by group: the CRDs, the
// namespace, the ServiceAccounts and their RBAC. The workloads are not (the lab runs
// the processes), nor anything else (monitoring.coreos.com's PodMonitors, if the
// manifest ever holds them: the lab has no Prometheus operator).
var installedKinds = map[string][]string{
	"":                          {"Namespace", "ServiceAccount"},
	"apiextensions.k8s.io":      {"CustomResourceDefinition"},
	"rbac.authorization.k8s.io": {"Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"},
}

// DecodeObjects decodes every non-empty document of a multi-document YAML stream.
func DecodeObjects(data []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
}

// ClusterObjects are the objects of a manifest the lab applies (installedKinds), the
// Namespaces first, then the CRDs, then the rest in the manifest's order.
func ClusterObjects(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		if slices.Contains(installedKinds[gvk.Group], gvk.Kind) {
			out = append(out, o)
		}
	}
	rank := func(o *unstructured.Unstructured) int {
		switch o.GetKind() {
		case "Namespace":
			return 0
		case "CustomResourceDefinition":
			return 1
		}
		return 2
	}
	slices.SortStableFunc(out, func(a, b *unstructured.Unstructured) int { return cmp.Compare(rank(a), rank(b)) })
	return out
}

// InstallManifest server-side applies, as the cluster admin c, the ClusterObjects of
// the manifest in the repository at root, and waits until its CRDs are served. It
// returns what it applied.
func InstallManifest(ctx context.Context, c client.Client, root string) ([]*unstructured.Unstructured, error) {
	path := filepath.Join(root, filepath.FromSlash(Manifest))
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("lab: %w", err)
	}
	all, err := DecodeObjects(data)
	if err != nil {
		return nil, fmt.Errorf("lab: %s: %w", path, err)
	}
	objs := ClusterObjects(all)
	if len(objs) == 0 {
		return nil, fmt.Errorf("lab: %s holds none of the objects the lab applies", path)
	}
	for _, o := range objs {
		err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()), client.ForceOwnership, client.FieldOwner(fieldOwner))
		if err != nil {
			return nil, fmt.Errorf("lab: applying %s %s of %s: %w", o.GetKind(), o.GetName(), Manifest, err)
		}
	}
	return objs, WaitEstablished(ctx, c, objs)
}

// WaitEstablished waits until every CustomResourceDefinition among objs is Established,
// so that its resources are served, for two minutes at most.
func WaitEstablished(ctx context.Context, c client.Client, objs []*unstructured.Unstructured) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	for _, o := range objs {
		if o.GetKind() != "CustomResourceDefinition" {
			continue
		}
		for {
			crd := &unstructured.Unstructured{}
			crd.SetGroupVersionKind(o.GroupVersionKind())
			err := c.Get(ctx, client.ObjectKey{Name: o.GetName()}, crd)
			if err == nil && established(crd) {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("lab: CRD %s not Established: %w (last read: %v)", o.GetName(), ctx.Err(), err)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}

func established(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "Established" {
			return m["status"] == "True"
		}
	}
	return false
}

// ServiceAccountToken returns a token of sa from cp's API server (TokenRequest API,
// asked for ttl), checking that it lasts at least 90% of ttl. The ServiceAccount must
// exist.
func ServiceAccountToken(ctx context.Context, cp *netlab.ControlPlane, sa types.NamespacedName, ttl time.Duration) (string, error) {
	admin, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		return "", fmt.Errorf("lab: %w", err)
	}
	tr, err := admin.CoreV1().ServiceAccounts(sa.Namespace).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(ttl / time.Second))},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("lab: token of ServiceAccount %s: %w", sa, err)
	}
	if left := time.Until(tr.Status.ExpirationTimestamp.Time); left < ttl*9/10 {
		return "", fmt.Errorf("lab: the token of ServiceAccount %s expires in %v, asked for %v: does kube-apiserver cap it (--service-account-max-token-expiration)?",
			sa, left.Round(time.Second), ttl)
	}
	return tr.Status.Token, nil
}

// ServiceAccountKubeconfig writes at path a kubeconfig for cp's API server holding a
// token of sa (ServiceAccountToken), and checks that the API server takes it as that
// account.
func ServiceAccountKubeconfig(ctx context.Context, cp *netlab.ControlPlane, sa types.NamespacedName, ttl time.Duration, path string) error {
	token, err := ServiceAccountToken(ctx, cp, sa, ttl)
	if err != nil {
		return err
	}
	return writeTokenKubeconfig(ctx, cp, sa, token, path)
}

// writeTokenKubeconfig writes at path a kubeconfig for cp's API server holding token,
// and checks that the API server takes it as sa.
func writeTokenKubeconfig(ctx context.Context, cp *netlab.ControlPlane, sa types.NamespacedName, token, path string) error {
	kc, err := clientcmd.LoadFromFile(cp.Kubeconfig)
	if err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	ctxt := kc.Contexts[kc.CurrentContext]
	if ctxt == nil || kc.Clusters[ctxt.Cluster] == nil {
		return fmt.Errorf("lab: %s: no cluster in the current context", cp.Kubeconfig)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["lab"] = kc.Clusters[ctxt.Cluster]
	cfg.AuthInfos[sa.Name] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["lab"] = &clientcmdapi.Context{Cluster: "lab", AuthInfo: sa.Name, Namespace: sa.Namespace}
	cfg.CurrentContext = "lab"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("lab: %w", err)
	}

	// Who does the API server think we are with it?
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	rc, err := clientcmd.RESTConfigFromKubeConfig(b)
	if err != nil {
		return fmt.Errorf("lab: %s: %w", path, err)
	}
	rc.Dial = cp.Config.Dial
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	review, err := kube.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("lab: SelfSubjectReview with %s: %w", path, err)
	}
	if want := "system:serviceaccount:" + sa.Namespace + ":" + sa.Name; review.Status.UserInfo.Username != want {
		return fmt.Errorf("lab: %s authenticates as %q, want %q", path, review.Status.UserInfo.Username, want)
	}
	return nil
}

// Refusals returns the lines of a log where the API server refused a request: an RBAC
// denial (`... is forbidden: User "system:serviceaccount:..." cannot list ...`) or a
// rejected credential (Unauthorized). A log that cannot be read is one line saying so.
func Refusals(path string) []string {
	f, err := os.Open(path)
	if err != nil {
		return []string{err.Error()}
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if l := strings.ToLower(line); strings.Contains(l, "forbidden") || strings.Contains(l, "unauthorized") {
			out = append(out, line)
		}
	}
	if err := sc.Err(); err != nil {
		out = append(out, fmt.Sprintf("reading %s: %v", path, err))
	}
	return out
}

// Refusals returns, by log file, the lines where the API server refused herald's
// controller or a speaker anything (Refusals), over every run of them in this lab: the
// logs are appended to when a component starts again.
func (s *State) Refusals() map[string][]string {
	out := map[string][]string{}
	for _, p := range s.Procs {
		if p.Name != "controller" && p.Name != "speaker" {
			continue
		}
		if lines := Refusals(p.Log); len(lines) > 0 {
			out[p.Log] = lines
		}
	}
	return out
}
