package controllers

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"herald.dev/herald/internal/memberkey"
)

// create cannot be limited by name; get is, to the memberlist Secret.
// +kubebuilder:rbac:groups="",resources=secrets,verbs=create,namespace=herald-system
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get,namespace=herald-system,resourceNames=herald-memberlist

// ensureMemberlistSecret creates the speakers' memberlist Secret with a fresh random
// key when it does not exist. An existing Secret is never changed: speakers running
// with the old key could no longer talk to restarted ones. It runs once, on the
// leader, at start-up; a Secret deleted later comes back at the next controller
// start (the running speakers keep their key in memory meanwhile).
func ensureMemberlistSecret(ctx context.Context, api client.Reader, c client.Client, ns, name string, log logr.Logger) error {
	key := types.NamespacedName{Namespace: ns, Name: name}
	var s corev1.Secret
	err := api.Get(ctx, key, &s)
	if err == nil {
		if _, err := memberkey.FromSecretData(s.Data); err != nil {
			log.Error(err, "memberlist Secret is unusable; speakers will not start until it is fixed", "secret", key)
		}
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("memberlist Secret %s: %w", key, err)
	}
	material, err := memberkey.New()
	if err != nil {
		return err
	}
	s = corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app.kubernetes.io/part-of": "herald"}},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{memberkey.DataKey: material},
	}
	if err := c.Create(ctx, &s); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating memberlist Secret %s: %w", key, err)
	}
	log.Info("created the memberlist Secret", "secret", key)
	return nil
}

// memberlistSecretRunnable runs ensureMemberlistSecret once the manager is the leader.
func memberlistSecretRunnable(mgr manager.Manager, ns, name string) manager.Runnable {
	return manager.RunnableFunc(func(ctx context.Context) error {
		return ensureMemberlistSecret(ctx, mgr.GetAPIReader(), mgr.GetClient(), ns, name, mgr.GetLogger().WithName("memberlist-secret"))
	})
}
