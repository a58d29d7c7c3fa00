package model

import "reflect"

// ServiceSet is a set of services, used to name the services a partial sync rewrites.
type ServiceSet map[ServiceName]struct{}

// NewServiceSet returns a set holding names.
func NewServiceSet(names ...ServiceName) ServiceSet {
	s := make(ServiceSet, len(names))
	for _, n := range names {
		s.Insert(n)
	}
	return s
}

func (s ServiceSet) Insert(n ServiceName) { s[n] = struct{}{} }

func (s ServiceSet) Has(n ServiceName) bool {
	_, ok := s[n]
	return ok
}

// ChangedServices returns the services whose chains a partial sync from prev to next
// must rewrite: those added, removed, or different in any field (their EndpointSlices
// included). It is deliberately coarse, like kube-proxy, which marks a service as soon
// as one of its objects changes; rewriting an unchanged service is harmless, skipping a
// changed one is not. An empty prev marks everything.
func ChangedServices(prev, next []Service) ServiceSet {
	changed := ServiceSet{}
	before := map[ServiceName]*Service{}
	for i := range prev {
		before[prev[i].ServiceName()] = &prev[i]
	}
	for i := range next {
		svc := &next[i]
		name := svc.ServiceName()
		old, ok := before[name]
		delete(before, name)
		if !ok || !reflect.DeepEqual(old, svc) {
			changed.Insert(name)
		}
	}
	for name := range before {
		changed.Insert(name)
	}
	return changed
}
