package manifests

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"herald.dev/herald/internal/lab"
	"herald.dev/herald/internal/testenv"
)

// rendered is the all-in-one manifest, relative to the repository.
const rendered = lab.Manifest

// repoPath is path (slash-separated, relative to the repository) on disk.
func repoPath(path string) string {
	return filepath.Join(testenv.RepoRoot(), filepath.FromSlash(path))
}

// readObjects decodes the objects of a file of the repository.
func readObjects(t testing.TB, path string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(repoPath(path))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := lab.DecodeObjects(data)
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
