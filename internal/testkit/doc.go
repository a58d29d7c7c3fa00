// Package testkit holds the helpers herald's tests share and nothing else imports: a
// wait for a condition, a heap measure, a quantile and a LoadBalancer Service builder.
// It needs no control plane and no network namespace; those are testenv's and lab's.
package testkit
