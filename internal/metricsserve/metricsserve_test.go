package metricsserve

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func parse(t *testing.T, args ...string) Config {
	t.Helper()
	c := Defaults(":7472")
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	c.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestSecureByDefault(t *testing.T) {
	o, err := parse(t).Options()
	if err != nil {
		t.Fatal(err)
	}
	if !o.SecureServing || o.FilterProvider == nil || o.BindAddress != ":7472" {
		t.Errorf("defaults: SecureServing %v, filter %v, address %q; want HTTPS behind the filter on :7472",
			o.SecureServing, o.FilterProvider != nil, o.BindAddress)
	}
	if o.CertDir != "" {
		t.Errorf("CertDir %q, want none (self-signed)", o.CertDir)
	}
	tc := &tls.Config{NextProtos: []string{"h2"}}
	for _, f := range o.TLSOpts {
		f(tc)
	}
	if strings.Join(tc.NextProtos, ",") != "http/1.1" {
		t.Errorf("NextProtos %v, want HTTP/1.1 only", tc.NextProtos)
	}
}

func TestPlainHTTP(t *testing.T) {
	o, err := parse(t, "--metrics-secure=false", "--metrics-bind-address", "127.0.0.1:7474").Options()
	if err != nil {
		t.Fatal(err)
	}
	if o.SecureServing || o.FilterProvider != nil || o.BindAddress != "127.0.0.1:7474" {
		t.Errorf("--metrics-secure=false: SecureServing %v, filter %v, address %q; want plain HTTP without filter",
			o.SecureServing, o.FilterProvider != nil, o.BindAddress)
	}
}

func TestCertDir(t *testing.T) {
	dir := t.TempDir()
	if _, err := parse(t, "--metrics-cert-dir", dir).Options(); err == nil || !strings.Contains(err.Error(), CertName) {
		t.Errorf("empty cert dir: err = %v, want one naming %s", err, CertName)
	}
	for _, name := range []string{CertName, KeyName} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	o, err := parse(t, "--metrics-cert-dir", dir).Options()
	if err != nil {
		t.Fatal(err)
	}
	if o.CertDir != dir || o.CertName != CertName || o.KeyName != KeyName || !o.SecureServing {
		t.Errorf("options %+v, want HTTPS with the certificate in %s", o, dir)
	}
	if _, err := parse(t, "--metrics-cert-dir", dir, "--metrics-secure=false").Options(); err == nil {
		t.Error("--metrics-cert-dir with --metrics-secure=false: no error")
	}
	if o, err := parse(t, "--metrics-cert-dir", dir, "--metrics-secure=false", "--metrics-bind-address=0").Options(); err != nil || o.BindAddress != "0" {
		t.Errorf("disabled endpoint: %+v, %v; want it disabled, whatever the other flags", o, err)
	}
}
