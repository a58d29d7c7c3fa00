// Package scheme builds the runtime.Scheme every herald binary and test uses.
package scheme

import (
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	heraldv1 "herald.dev/herald/api/v1beta1"
)

// New returns a scheme with the core Kubernetes types and herald's.
func New() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(heraldv1.AddToScheme(s))
	return s
}
