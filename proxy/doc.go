// Package proxy is the embedded kube-proxy-compatible proxier: change tracking and the
// sync loop. To be built in issue 4.
package proxy
