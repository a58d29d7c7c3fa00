package v1beta1_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"herald.dev/herald/internal/testenv"
)

func loadCRD(t *testing.T, file string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "crd", "bases", file))
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(raw, &crd); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return &crd
}

// Every field under spec and status has a description, so `kubectl explain` helps.
func TestEveryFieldIsDescribed(t *testing.T) {
	for _, file := range []string{"herald.dev_ipaddresspools.yaml", "herald.dev_l2advertisements.yaml", "herald.dev_vipstatuses.yaml"} {
		crd := loadCRD(t, file)
		root := crd.Spec.Versions[0].Schema.OpenAPIV3Schema
		visited := 0
		var walk func(path string, s apiextensionsv1.JSONSchemaProps)
		walk = func(path string, s apiextensionsv1.JSONSchemaProps) {
			visited++
			if strings.TrimSpace(s.Description) == "" {
				t.Errorf("%s: %s has no description", file, path)
			}
			for name, p := range s.Properties {
				walk(path+"."+name, p)
			}
			if s.Items != nil && s.Items.Schema != nil && len(s.Items.Schema.Properties) > 0 {
				for name, p := range s.Items.Schema.Properties {
					walk(path+"[]."+name, p)
				}
			}
		}
		for _, top := range []string{"spec", "status"} {
			if p, ok := root.Properties[top]; ok {
				for name, f := range p.Properties {
					walk(top+"."+name, f)
				}
			}
		}
		if visited < 10 {
			t.Errorf("%s: only %d fields visited; the walk is broken", file, visited)
		}
	}
}

// The columns of `kubectl get` match MetalLB's, plus usage for pools.
func TestPrinterColumns(t *testing.T) {
	for file, want := range map[string][]string{
		"herald.dev_ipaddresspools.yaml":   {"Auto Assign", "Avoid Buggy IPs", "Addresses", "In Use", "Available"},
		"herald.dev_l2advertisements.yaml": {"IPAddressPools", "IPAddressPool Selectors", "Interfaces", "Node Selectors"},
		"herald.dev_vipstatuses.yaml":      {"IP", "Node", "MAC", "Since", "Changes", "Pool"},
	} {
		var got []string
		for _, c := range loadCRD(t, file).Spec.Versions[0].AdditionalPrinterColumns {
			if c.Priority == 0 {
				got = append(got, c.Name)
			}
		}
		for _, w := range want {
			if !slices.Contains(got, w) {
				t.Errorf("%s: default columns %v lack %q", file, got, w)
			}
		}
	}
}
