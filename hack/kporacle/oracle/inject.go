//go:build linux

package oracle

import (
	"reflect"
	"unsafe"
)

// kube-proxy's NewProxier builds some of its host handles itself, with no
// parameter to inject a fake: a netlink conntrack handle, an nfacct netlink
// socket, the health-check server that listens on healthCheckNodePorts and the
// view of the host's network interfaces. The oracle swaps them for fakes right
// after NewProxier returns, before the first sync, by writing the Proxier's
// unexported fields (kphost.Replace). The field names and types are checked,
// so a kube-proxy version that renames or retypes them makes New fail instead
// of silently using the real host.

// closer is implemented by the netlink socket inside kube-proxy's nfacct runner.
type closer interface{ Close() }

// closeNFAcctProbeSocket closes the netlink socket that NewProxier's
// nfacct.New opened to probe for nfacct support (the runner is
// runner{handler: *netlinkHandler{socket: *nl.NetlinkSocket}}). Without this
// every Oracle would leak one file descriptor. It does nothing when the probe
// failed or the runner's layout is not the expected one.
func closeNFAcctProbeSocket(runner any) {
	v := reflect.ValueOf(runner)
	for _, name := range []string{"handler", "socket"} {
		s, ok := derefToStruct(v)
		if !ok {
			return
		}
		field := s.FieldByName(name)
		if !field.IsValid() {
			return
		}
		v = reflect.NewAt(field.Type(), unsafe.Pointer(field.UnsafeAddr())).Elem()
	}
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return
	}
	if socket, ok := v.Interface().(closer); ok {
		socket.Close()
	}
}

// derefToStruct follows interfaces and pointers down to an addressable struct.
func derefToStruct(v reflect.Value) (reflect.Value, bool) {
	for v.Kind() == reflect.Interface || v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return v, false
		}
		v = v.Elem()
	}
	return v, v.Kind() == reflect.Struct && v.CanAddr()
}
