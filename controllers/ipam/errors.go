package ipam

import (
	"errors"
	"fmt"
)

// Sentinel errors let the reconciler decide when to retry; test them with errors.Is.
// The error texts themselves are written for a Kubernetes Event read by a user.
var (
	// ErrNoAvailableIPs: every pool the Service may use is full, or its free addresses
	// are in conflict with devices on the network. Retry when IPs are released or a
	// conflict clears.
	ErrNoAvailableIPs = errors.New("no available IPs")
	// ErrIPInUse: an IP the Service needs is held by a Service it may not share with.
	// Retry when IPs are released.
	ErrIPInUse = errors.New("IP in use")
	// ErrIPConflict: an IP the Service requests is claimed by a device on the network
	// (SetConflicts). Retry when the conflict clears.
	ErrIPConflict = errors.New("IP in conflict")
	// ErrNoUsablePool: no pool the Service may use can give what it asks for. Retry when
	// pools change.
	ErrNoUsablePool = errors.New("no usable pool")
	// ErrInvalidService: the Service's request is malformed (families, requested IPs).
	// Retry when the Service changes.
	ErrInvalidService = errors.New("invalid Service")
)

// ipamError carries a user-facing message and the sentinel it belongs to, so the message
// does not have to start with the sentinel's text.
type ipamError struct {
	kind error
	msg  string
}

func (e *ipamError) Error() string { return e.msg }
func (e *ipamError) Unwrap() error { return e.kind }

func newError(kind error, format string, args ...any) error {
	return &ipamError{kind: kind, msg: fmt.Sprintf(format, args...)}
}
