package model

import (
	"errors"
	"fmt"
)

// Reasons input is skipped. A Problem wraps one of them.
var (
	ErrInvalidName     = errors.New("invalid name")
	ErrInvalidType     = errors.New("unknown service type")
	ErrInvalidProtocol = errors.New("unknown protocol")
	ErrInvalidPort     = errors.New("port out of range")
	ErrInvalidAddress  = errors.New("invalid IP address")
	ErrInvalidPrefix   = errors.New("invalid CIDR")
	ErrInvalidTimeout  = errors.New("invalid session affinity timeout")
	ErrDuplicate       = errors.New("duplicate")
)

// Problem is one piece of input Resolve skipped because the rules it would produce could
// not be applied (or kube-proxy would produce nonsense). What was
// skipped is named by Subject: the whole service (""), one port ("port p80/TCP"), one
// address ("external IP ..."), or one endpoint ("endpoint ...").
type Problem struct {
	Service ServiceName
	Subject string
	Err     error
}

func (p Problem) Error() string {
	if p.Subject == "" {
		return fmt.Sprintf("service %s skipped: %v", p.Service, p.Err)
	}
	return fmt.Sprintf("service %s: %s skipped: %v", p.Service, p.Subject, p.Err)
}

func (p Problem) Unwrap() error { return p.Err }

// problems collects Problems while a snapshot is resolved.
type problems []Problem

func (ps *problems) add(svc ServiceName, subject string, err error) {
	*ps = append(*ps, Problem{Service: svc, Subject: subject, Err: err})
}
