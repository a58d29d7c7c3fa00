// Package metricsserve holds the metrics endpoint's flags, which the controller and the
// speaker share, and turns them into controller-runtime's metrics server options: by
// default HTTPS, answering only clients that the API server authenticates and allows to
// get /metrics; plain HTTP to anyone with --metrics-secure=false (the lab).
package metricsserve

import (
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// The file names in CertDir, as in kubebuilder's --metrics-cert-path and cert-manager's
// Secrets.
const (
	CertName = "tls.crt"
	KeyName  = "tls.key"
)

// Config is what the metrics flags say.
type Config struct {
	// BindAddress is where /metrics is served; "0" disables the endpoint.
	BindAddress string
	// Secure serves HTTPS, behind the API server's authentication (TokenReview) and
	// authorization (SubjectAccessReview for get on the non-resource URL /metrics).
	Secure bool
	// CertDir holds CertName and KeyName, reloaded when they change; "" means a
	// self-signed certificate generated at start. Only with Secure.
	CertDir string
}

// Defaults returns a cluster install's settings for an endpoint on addr: secure.
func Defaults(addr string) Config {
	return Config{BindAddress: addr, Secure: true}
}

// AddFlags registers --metrics-bind-address, --metrics-secure and --metrics-cert-dir,
// with c's values as defaults.
func (c *Config) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.BindAddress, "metrics-bind-address", c.BindAddress,
		"address of the Prometheus metrics endpoint; 0 disables it")
	fs.BoolVar(&c.Secure, "metrics-secure", c.Secure,
		"serve metrics over HTTPS, only to clients whose bearer token the API server authenticates and allows to get the non-resource URL /metrics (ClusterRole herald-metrics-reader); false serves plain HTTP to anyone (for the lab)")
	fs.StringVar(&c.CertDir, "metrics-cert-dir", c.CertDir,
		"directory holding "+CertName+" and "+KeyName+" of the HTTPS metrics endpoint, reloaded when they change (default: a self-signed certificate generated at start)")
}

// Validate reports settings that contradict each other or name missing files.
func (c Config) Validate() error {
	if c.BindAddress == "0" || c.CertDir == "" {
		return nil
	}
	if !c.Secure {
		return errors.New("--metrics-cert-dir needs --metrics-secure: plain HTTP uses no certificate")
	}
	// controller-runtime falls back to a self-signed certificate when a file is
	// missing; someone who named a directory wants their certificate, so say so.
	var errs []error
	for _, name := range []string{CertName, KeyName} {
		if _, err := os.Stat(filepath.Join(c.CertDir, name)); err != nil {
			errs = append(errs, fmt.Errorf("--metrics-cert-dir: %w", err))
		}
	}
	return errors.Join(errs...)
}

// Options returns controller-runtime's metrics server options for c.
func (c Config) Options() (metricsserver.Options, error) {
	if err := c.Validate(); err != nil {
		return metricsserver.Options{}, err
	}
	if !c.Secure || c.BindAddress == "0" {
		return metricsserver.Options{BindAddress: c.BindAddress}, nil
	}
	return metricsserver.Options{
		BindAddress:   c.BindAddress,
		SecureServing: true,
		// TokenReview and SubjectAccessReview with the process's own credentials,
		// hence the RBAC rules on tokenreviews and subjectaccessreviews.
		FilterProvider: filters.WithAuthenticationAndAuthorization,
		CertDir:        c.CertDir,
		CertName:       CertName,
		KeyName:        KeyName,
		TLSOpts:        []func(*tls.Config){http1Only},
	}, nil
}

// http1Only turns HTTP/2 off, as kubebuilder's scaffold does by default: a scraper
// needs no more than HTTP/1.1, and HTTP/2 servers were open to stream-reset floods
// (CVE-2023-44487, CVE-2023-39325).
func http1Only(c *tls.Config) {
	c.NextProtos = []string{"http/1.1"}
}
