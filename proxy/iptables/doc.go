// Package iptables generates kube-proxy's iptables chains as a pure function and applies
// them with iptables-restore. To be built in issue 4.
package iptables
