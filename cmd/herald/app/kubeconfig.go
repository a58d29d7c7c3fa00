package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// loadRESTConfig loads the kubeconfig as kubectl does: kubeconfig, else $KUBECONFIG,
// else ~/.kube/config, else the in-cluster config; kubeContext picks the context.
func loadRESTConfig(kubeconfig, kubeContext, userAgent string, timeout time.Duration) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: kubeContext})
	cfg, err := cc.ClientConfig()
	switch {
	case clientcmd.IsEmptyConfig(err):
		return nil, errors.New("no kubeconfig found: pass --kubeconfig, set $KUBECONFIG or create ~/.kube/config")
	case err != nil:
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = userAgent
	if timeout > 0 {
		cfg.Timeout = timeout
	}
	return cfg, nil
}

// connect loads the kubeconfig (loadRESTConfig), bounds ctx by timeout when it is set,
// and returns a client with statusClient's fixed mapping. Call cancel when done.
func connect(ctx context.Context, kubeconfig, kubeContext, userAgent string, timeout time.Duration) (context.Context, context.CancelFunc, *rest.Config, client.Client, error) {
	cfg, err := loadRESTConfig(kubeconfig, kubeContext, userAgent, timeout)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	c, err := statusClient(cfg)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	cancel := context.CancelFunc(func() {})
	if timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, timeout)
	}
	return ctx, cancel, cfg, c, nil
}
