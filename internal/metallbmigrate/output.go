package metallbmigrate

import (
	"context"
	"fmt"
	"io"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	heraldv1 "herald.dev/herald/api/v1beta1"
)

// FieldManager owns the fields `herald migrate --apply` sets.
const FieldManager = "herald-migrate"

// WriteYAML writes objs as one multi-document YAML stream.
func WriteYAML(w io.Writer, objs []*unstructured.Unstructured) error {
	for i, o := range objs {
		b, err := yaml.Marshal(o.Object)
		if err != nil {
			return fmt.Errorf("%s %s: %w", o.GetKind(), o.GetName(), err)
		}
		if i > 0 {
			if _, err := io.WriteString(w, "---\n"); err != nil {
				return err
			}
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	return nil
}

// Apply creates or updates objs by server-side apply, in order, and says so on out as
// kubectl does. It stops at the first error.
func Apply(ctx context.Context, c dynamic.Interface, objs []*unstructured.Unstructured, out io.Writer) error {
	for _, o := range objs {
		gvr := heraldv1.GroupVersion.WithResource(strings.ToLower(o.GetKind()) + "s")
		_, err := c.Resource(gvr).Namespace(o.GetNamespace()).Apply(ctx, o.GetName(), o, metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
		if err != nil {
			return fmt.Errorf("applying %s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
		fmt.Fprintf(out, "%s.%s/%s serverside-applied\n", strings.ToLower(o.GetKind()), heraldv1.GroupVersion.Group, o.GetName())
	}
	return nil
}
