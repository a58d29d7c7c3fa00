package speaker

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// nodeNameExtra is where the API server puts the node of the pod a ServiceAccount
// token is bound to, in the user info of every request made with it.
const nodeNameExtra = "authentication.kubernetes.io/node-name"

// tokenNode is the node that u's token is bound to, "" when none.
func tokenNode(u authenticationv1.UserInfo) string {
	if v := u.Extra[nodeNameExtra]; len(v) == 1 {
		return v[0]
	}
	return ""
}

// checkTokenBinding asks the API server who the speaker is (a SelfSubjectReview, which
// every authenticated user may ask) and says in the log and in bound whether
// its token names self (bound: 1 or 0). It changes nothing else: with the admission policy installed a
// token that does not is refused every write, and the refusals say why; without it (a
// cluster older than Kubernetes 1.30) the speaker works as before, unguarded.
func checkTokenBinding(ctx context.Context, cfg *rest.Config, self string, bound prometheus.Gauge, log logr.Logger) error {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("token binding check: %w", err)
	}
	review, err := kube.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		log.Info("could not ask the API server which node this speaker's token is bound to", "error", err.Error())
		return nil
	}
	switch node := tokenNode(review.Status.UserInfo); node {
	case self:
		bound.Set(1)
	case "":
		bound.Set(0)
		log.Info("WARNING: this speaker's token is not bound to a pod on a node, so the API server cannot hold it to its own node's records; herald's admission policy refuses its writes (Kubernetes 1.32 and later bind pod tokens to their node)",
			"user", review.Status.UserInfo.Username)
	default:
		bound.Set(0)
		log.Info("WARNING: this speaker's token is bound to another node; herald's admission policy refuses its writes for this node",
			"tokenNode", node, "node", self)
	}
	return nil
}
