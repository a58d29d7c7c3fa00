//go:build linux

// Package kphost holds what the iptables oracle (package oracle) and the
// nftables oracle (package nftoracle) share: swapping the host handles a
// kube-proxy Proxier builds for itself for fakes, the fake host's interface
// list, and the resolution of kube-proxy options into NewProxier arguments.
package kphost

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"reflect"
	"time"
	"unsafe"

	proxyutil "k8s.io/kubernetes/pkg/proxy/util"
	proxyutiltest "k8s.io/kubernetes/pkg/proxy/util/testing"
)

// Defaults of kube-proxy's configuration (pkg/proxy/apis/config/v1alpha1).
const (
	DefaultMasqueradeBit = 14
	DefaultSyncPeriod    = 30 * time.Second
	DefaultMinSyncPeriod = time.Second
)

// NodePortAddressesPrimary is the special --nodeport-addresses value meaning
// "the node's primary IP of each family".
const NodePortAddressesPrimary = "primary"

// Field returns a settable view of the unexported field name of the struct
// owner points to. The field must have exactly the type T, so a kube-proxy
// release that renames or retypes it makes the caller fail instead of
// silently leaving a real host handle in place.
func Field[T any](owner any, name string) (reflect.Value, error) {
	v := reflect.ValueOf(owner)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return reflect.Value{}, fmt.Errorf("%T is not a non-nil pointer to a struct", owner)
	}
	field := v.Elem().FieldByName(name)
	if !field.IsValid() {
		return reflect.Value{}, fmt.Errorf("kube-proxy's %T has no field %q", owner, name)
	}
	if want := reflect.TypeFor[T](); field.Type() != want {
		return reflect.Value{}, fmt.Errorf("kube-proxy's %T field %q has type %s, want %s", owner, name, field.Type(), want)
	}
	return reflect.NewAt(field.Type(), unsafe.Pointer(field.UnsafeAddr())).Elem(), nil
}

// Replace sets the field name of the struct owner points to (see Field) to
// value and returns the value it held before.
func Replace[T any](owner any, name string, value T) (old T, err error) {
	field, err := Field[T](owner, name)
	if err != nil {
		return old, err
	}
	if !isNil(field) {
		old = field.Interface().(T)
	}
	field.Set(reflect.ValueOf(&value).Elem())
	return old, nil
}

// Get returns the field name of the struct owner points to (see Field).
func Get[T any](owner any, name string) (T, error) {
	field, err := Field[T](owner, name)
	if err != nil {
		var zero T
		return zero, err
	}
	return field.Interface().(T), nil
}

func isNil(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan:
		return v.IsNil()
	}
	return false
}

// FakeNetwork is a host with lo (127.0.0.1/8, ::1/128) and eth0 holding
// addrs as host prefixes. kube-proxy reads it only to resolve
// --nodeport-addresses.
func FakeNetwork(addrs []netip.Addr) (*proxyutiltest.FakeNetwork, error) {
	network := proxyutiltest.NewFakeNetwork()
	network.AddInterfaceAddr(&net.Interface{Index: 1, Name: "lo", Flags: net.FlagUp | net.FlagLoopback}, []net.Addr{
		&net.IPNet{IP: net.IPv4(127, 0, 0, 1), Mask: net.CIDRMask(8, 32)},
		&net.IPNet{IP: net.IPv6loopback, Mask: net.CIDRMask(128, 128)},
	})
	eth0 := make([]net.Addr, 0, len(addrs))
	for _, ip := range addrs {
		if !ip.IsValid() {
			return nil, fmt.Errorf("interface address %v is not a valid address", ip)
		}
		ip = ip.Unmap()
		eth0 = append(eth0, &net.IPNet{IP: net.IP(ip.AsSlice()), Mask: net.CIDRMask(ip.BitLen(), ip.BitLen())})
	}
	network.AddInterfaceAddr(&net.Interface{Index: 2, Name: "eth0", Flags: net.FlagUp}, eth0)
	return network, nil
}

// LocalDetector builds the local-traffic detector kube-proxy's server would
// build for one family: BridgeInterface mode for bridge, InterfaceNamePrefix
// mode for prefix, otherwise ClusterCIDR mode with the first CIDR of the
// family, and a no-op detector when there is none. At most one of
// clusterCIDRs, bridge and prefix may be set.
func LocalDetector(ipv6 bool, clusterCIDRs []string, bridge, prefix string) (proxyutil.LocalTrafficDetector, error) {
	modes := 0
	for _, set := range []bool{len(clusterCIDRs) > 0, bridge != "", prefix != ""} {
		if set {
			modes++
		}
	}
	if modes > 1 {
		return nil, errors.New("set at most one of ClusterCIDRs, BridgeInterface and InterfaceNamePrefix")
	}
	switch {
	case bridge != "":
		return proxyutil.NewDetectLocalByBridgeInterface(bridge), nil
	case prefix != "":
		return proxyutil.NewDetectLocalByInterfaceNamePrefix(prefix), nil
	}
	for _, cidr := range clusterCIDRs {
		p, err := netip.ParsePrefix(cidr)
		if err != nil {
			return nil, fmt.Errorf("ClusterCIDRs: %w", err)
		}
		if p.Addr().Is6() == ipv6 {
			return proxyutil.NewDetectLocalByCIDR(p.Masked().String()), nil
		}
	}
	return proxyutil.NewNoOpLocalDetector(), nil
}

// NodePortAddresses checks the --nodeport-addresses CIDRs and expands
// "primary" the way kube-proxy's server does: to the primary node IP as a
// host prefix, unless that is a loopback address (then: all addresses).
func NodePortAddresses(cidrs []string, primaryNodeIP net.IP) ([]string, error) {
	if len(cidrs) == 1 && cidrs[0] == NodePortAddressesPrimary {
		if primaryNodeIP.IsLoopback() {
			return nil, nil
		}
		bits := 128
		if primaryNodeIP.To4() != nil {
			bits = 32
		}
		return []string{fmt.Sprintf("%s/%d", primaryNodeIP, bits)}, nil
	}
	for _, cidr := range cidrs {
		if _, err := netip.ParsePrefix(cidr); err != nil {
			return nil, fmt.Errorf("NodePortAddresses: %w", err)
		}
	}
	return cidrs, nil
}

// MasqueradeBit applies kube-proxy's default to bit (0 means 14) and checks
// its range.
func MasqueradeBit(bit int) (int, error) {
	if bit == 0 {
		return DefaultMasqueradeBit, nil
	}
	if bit < 0 || bit > 31 {
		return 0, fmt.Errorf("MasqueradeBit %d is outside 0..31", bit)
	}
	return bit, nil
}
