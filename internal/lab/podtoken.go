package lab

import (
	"context"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"herald.dev/herald/internal/lab/netlab"
)

// PodBoundKubeconfig writes at path a kubeconfig holding a token of sa bound to a Pod
// on node, as a kubelet gets one for a DaemonSet's pod: the API server writes the node
// into the token, and herald's admission policy holds the speaker to that node. The
// Pod (named after sa and node, created when missing) only carries the binding: no
// kubelet runs it. It tolerates an unreachable node as a DaemonSet's pod does, so that
// no eviction deletes it and with it the token's validity.
func PodBoundKubeconfig(ctx context.Context, cp *netlab.ControlPlane, sa types.NamespacedName, node string, ttl time.Duration, path string) error {
	admin, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	pod, err := bindingPod(ctx, admin, sa, node)
	if err != nil {
		return err
	}
	tr, err := admin.CoreV1().ServiceAccounts(sa.Namespace).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			ExpirationSeconds: ptr.To(int64(ttl / time.Second)),
			BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("lab: token of ServiceAccount %s bound to Pod %s: %w", sa, pod.Name, err)
	}
	return writeTokenKubeconfig(ctx, cp, sa, tr.Status.Token, path)
}

// bindingPod returns the Pod of sa on node, creating it if missing.
func bindingPod(ctx context.Context, admin kubernetes.Interface, sa types.NamespacedName, node string) (*corev1.Pod, error) {
	pods := admin.CoreV1().Pods(sa.Namespace)
	name := sa.Name + "-" + node
	pod, err := pods.Get(ctx, name, metav1.GetOptions{})
	if err == nil {
		return pod, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("lab: Pod %s/%s: %w", sa.Namespace, name, err)
	}
	pod, err = pods.Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: sa.Namespace, Name: name},
		Spec: corev1.PodSpec{
			ServiceAccountName: sa.Name,
			NodeName:           node,
			Containers:         []corev1.Container{{Name: "token-binding", Image: "herald-lab/none"}},
			Tolerations: []corev1.Toleration{
				{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
				{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("lab: creating Pod %s/%s: %w", sa.Namespace, name, err)
	}
	return pod, nil
}
