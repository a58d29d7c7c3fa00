package app

import (
	"errors"
	"fmt"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
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
