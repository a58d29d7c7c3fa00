//go:build linux

package oracle

import (
	"k8s.io/kubernetes/pkg/proxy/util/nfacct"
)

// fakeNFAcct stands in for kube-proxy's nfacct netlink runner. kube-proxy
// ensures its two counters on every full sync and adds "-m nfacct
// --nfacct-name <counter>" matches to two rules only when that succeeded, so
// whether the fake succeeds decides those matches.
type fakeNFAcct struct {
	available bool
	counters  map[string]*nfacct.Counter
}

var _ nfacct.Interface = (*fakeNFAcct)(nil)

func newFakeNFAcct(available bool) *fakeNFAcct {
	return &fakeNFAcct{available: available, counters: map[string]*nfacct.Counter{}}
}

// Ensure creates the counter if missing, or fails when nfacct is unavailable.
func (f *fakeNFAcct) Ensure(name string) error {
	if !f.available {
		return nfacct.ErrNotSupported
	}
	if _, ok := f.counters[name]; !ok {
		f.counters[name] = &nfacct.Counter{Name: name}
	}
	return nil
}

// Add creates the counter, failing if it exists or nfacct is unavailable.
func (f *fakeNFAcct) Add(name string) error {
	if !f.available {
		return nfacct.ErrNotSupported
	}
	if _, ok := f.counters[name]; ok {
		return nfacct.ErrObjectAlreadyExists
	}
	f.counters[name] = &nfacct.Counter{Name: name}
	return nil
}

// Get returns the counter (always zero: no packets pass through a fake).
func (f *fakeNFAcct) Get(name string) (*nfacct.Counter, error) {
	if !f.available {
		return nil, nfacct.ErrNotSupported
	}
	counter, ok := f.counters[name]
	if !ok {
		return nil, nfacct.ErrObjectNotFound
	}
	return counter, nil
}

// List returns every counter.
func (f *fakeNFAcct) List() ([]*nfacct.Counter, error) {
	if !f.available {
		return nil, nfacct.ErrNotSupported
	}
	counters := make([]*nfacct.Counter, 0, len(f.counters))
	for _, counter := range f.counters {
		counters = append(counters, counter)
	}
	return counters, nil
}
