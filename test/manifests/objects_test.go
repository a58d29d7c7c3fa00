package manifests

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"herald.dev/herald/internal/testenv"
)

// rendered is the all-in-one manifest, relative to the repository.
const rendered = "config/manifests/herald.yaml"

// repoPath is path (slash-separated, relative to the repository) on disk.
func repoPath(path string) string {
	return filepath.Join(testenv.RepoRoot(), filepath.FromSlash(path))
}

// decodeObjects decodes every non-empty document of a multi-document YAML stream.
func decodeObjects(data []byte) ([]*unstructured.Unstructured, error) {
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

// readObjects decodes the objects of a file of the repository.
func readObjects(t testing.TB, path string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(repoPath(path))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeObjects(data)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return objs
}

// find returns the object of that kind, namespace and name, or fails.
func find(t testing.TB, objs []*unstructured.Unstructured, kind, namespace, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetNamespace() == namespace && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %s/%s", kind, namespace, name)
	return nil
}

// into converts an unstructured object into a typed one.
func into[T any](t testing.TB, u *unstructured.Unstructured) *T {
	t.Helper()
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, out, true); err != nil {
		t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
	}
	return out
}
