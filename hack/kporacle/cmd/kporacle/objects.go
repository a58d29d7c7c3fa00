//go:build linux

package main

import (
	"errors"
	"fmt"
	"io"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// objects are the inputs kube-proxy's proxier watches.
type objects struct {
	services []*v1.Service
	slices   []*discoveryv1.EndpointSlice
}

// decoder turns YAML or JSON documents into typed core/v1 and discovery/v1 objects.
var decoder = func() runtime.Decoder {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{v1.AddToScheme, discoveryv1.AddToScheme} {
		if err := add(scheme); err != nil {
			panic(fmt.Sprintf("build API scheme: %v", err))
		}
	}
	return serializer.NewCodecFactory(scheme).UniversalDeserializer()
}()

// readObjects reads a stream of YAML ("---"-separated) or JSON documents, each
// a Service, an EndpointSlice, or a List of them (as "kubectl get -o yaml"
// prints).
func readObjects(r io.Reader, into *objects) error {
	docs := utilyaml.NewYAMLOrJSONDecoder(r, 4096)
	for i := 1; ; i++ {
		var raw runtime.RawExtension
		err := docs.Decode(&raw)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("document %d: %w", i, err)
		}
		if len(raw.Raw) == 0 || string(raw.Raw) == "null" {
			continue
		}
		if err := into.add(raw.Raw); err != nil {
			return fmt.Errorf("document %d: %w", i, err)
		}
	}
}

// add decodes one object and files it, recursing into lists.
func (o *objects) add(data []byte) error {
	obj, gvk, err := decoder.Decode(data, nil, nil)
	if err != nil {
		return fmt.Errorf("decode object: %w", err)
	}
	switch obj := obj.(type) {
	case *v1.Service:
		o.services = append(o.services, obj)
	case *discoveryv1.EndpointSlice:
		o.slices = append(o.slices, obj)
	case *v1.ServiceList:
		for i := range obj.Items {
			o.services = append(o.services, &obj.Items[i])
		}
	case *discoveryv1.EndpointSliceList:
		for i := range obj.Items {
			o.slices = append(o.slices, &obj.Items[i])
		}
	case *v1.List:
		for i, item := range obj.Items {
			if err := o.add(item.Raw); err != nil {
				return fmt.Errorf("list item %d: %w", i+1, err)
			}
		}
	default:
		return fmt.Errorf("unsupported kind %s (want Service, EndpointSlice or a List of them)", gvk.Kind)
	}
	return nil
}
