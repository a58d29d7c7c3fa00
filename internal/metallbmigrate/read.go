package metallbmigrate

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
)

// Input is what migrate reads: MetalLB's objects and the Services.
type Input struct {
	Objects  []*unstructured.Unstructured
	Services []corev1.Service
}

// ReadFiles reads YAML or JSON documents from each path: a file, a directory (its
// *.yaml, *.yml and *.json files, not its subdirectories) or "-" for stdin. A List
// (kubectl get -o yaml) counts as its items. Services among them go to Services.
func ReadFiles(paths []string, stdin io.Reader) (Input, error) {
	var in Input
	for _, p := range paths {
		files, err := expand(p)
		if err != nil {
			return in, err
		}
		for _, f := range files {
			if err := readFile(f, stdin, &in); err != nil {
				return in, err
			}
		}
	}
	return in, nil
}

func expand(path string) ([]string, error) {
	if path == "-" {
		return []string{path}, nil
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("-f %s: %w", path, err)
	}
	if !st.IsDir() {
		return []string{path}, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, fmt.Errorf("-f %s: %w", path, err)
	}
	var files []string
	for _, e := range entries {
		switch filepath.Ext(e.Name()) {
		case ".yaml", ".yml", ".json":
			if !e.IsDir() {
				files = append(files, filepath.Join(path, e.Name()))
			}
		}
	}
	return files, nil
}

func readFile(path string, stdin io.Reader, in *Input) error {
	r := stdin
	name := "stdin"
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("-f %s: %w", path, err)
		}
		defer f.Close()
		r, name = f, path
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bufio.NewReader(r), 4096)
	for doc := 1; ; doc++ {
		var obj map[string]any
		err := dec.Decode(&obj)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s, document %d: %w", name, doc, err)
		}
		if len(obj) == 0 {
			continue // an empty document between two ---
		}
		if err := add(&unstructured.Unstructured{Object: obj}, in); err != nil {
			return fmt.Errorf("%s, document %d: %w", name, doc, err)
		}
	}
}

func add(u *unstructured.Unstructured, in *Input) error {
	if u.IsList() {
		return u.EachListItem(func(o runtime.Object) error { return add(o.(*unstructured.Unstructured), in) })
	}
	if u.GetKind() == "" || u.GetAPIVersion() == "" {
		return fmt.Errorf("not a Kubernetes object: no apiVersion or kind")
	}
	if u.GetAPIVersion() == "v1" && u.GetKind() == "Service" {
		var svc corev1.Service
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &svc); err != nil {
			return fmt.Errorf("Service %s: %w", u.GetName(), err)
		}
		in.Services = append(in.Services, svc)
		return nil
	}
	in.Objects = append(in.Objects, u)
	return nil
}

// clusterResources are MetalLB's configuration resources: the kinds herald converts
// first, then those it refuses (read so that they are named, not silently left).
var clusterResources = []schema.GroupVersionResource{
	{Group: MetalLBGroup, Version: "v1beta1", Resource: "ipaddresspools"},
	{Group: MetalLBGroup, Version: "v1beta1", Resource: "l2advertisements"},
	{Group: MetalLBGroup, Version: "v1beta2", Resource: "bgppeers"},
	{Group: MetalLBGroup, Version: "v1beta1", Resource: "bgpadvertisements"},
	{Group: MetalLBGroup, Version: "v1beta1", Resource: "bfdprofiles"},
	{Group: MetalLBGroup, Version: "v1beta1", Resource: "communities"},
}

// ReadCluster lists MetalLB's configuration in namespace ("" for every namespace;
// MetalLB itself reads only its own) and every Service. A MetalLB resource the API
// server does not have is skipped, except IPAddressPool: without it there is no
// MetalLB configuration to read.
func ReadCluster(ctx context.Context, c dynamic.Interface, namespace string) (Input, error) {
	var in Input
	for _, gvr := range clusterResources {
		list, err := c.Resource(gvr).Namespace(namespace).List(ctx, metav1.ListOptions{})
		if apierrors.IsNotFound(err) && gvr.Resource != "ipaddresspools" {
			continue
		}
		if err != nil {
			return in, fmt.Errorf("listing %s.%s/%s: %w", gvr.Resource, gvr.Group, gvr.Version, err)
		}
		for i := range list.Items {
			in.Objects = append(in.Objects, &list.Items[i])
		}
	}
	svcs, err := c.Resource(corev1.SchemeGroupVersion.WithResource("services")).List(ctx, metav1.ListOptions{})
	if err != nil {
		return in, fmt.Errorf("listing Services: %w", err)
	}
	for i := range svcs.Items {
		if err := add(&svcs.Items[i], &in); err != nil {
			return in, err
		}
	}
	return in, nil
}
