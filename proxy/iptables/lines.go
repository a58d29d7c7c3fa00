package iptables

import "strings"

// lines accumulates restore-input lines, like kube-proxy's LineBuffer: each line is its
// words joined by single spaces. A discarding buffer only counts lines; partial syncs
// send the chains of unchanged services there, so rule counts stay right without
// writing them.
type lines struct {
	buf     []byte
	n       int
	discard bool
}

// add writes one line made of words. A word may itself hold several space-separated
// words (such as "! -s 10.0.0.0/8"); the text comes out the same.
func (l *lines) add(words ...string) {
	l.n++
	if l.discard {
		return
	}
	for i, w := range words {
		if i > 0 {
			l.buf = append(l.buf, ' ')
		}
		l.buf = append(l.buf, w...)
	}
	l.buf = append(l.buf, '\n')
}

// rule writes "-A <chain> -m comment --comment <comment> <words...>", leaving out the
// comment match when comment is "" (kube-proxy drops endpoint comments in large
// clusters, and some rules never have one).
func (l *lines) rule(chain, comment string, words ...string) {
	l.n++
	if l.discard {
		return
	}
	l.buf = append(l.buf, "-A "...)
	l.buf = append(l.buf, chain...)
	if comment != "" {
		l.buf = append(l.buf, " -m comment --comment "...)
		l.buf = append(l.buf, comment...)
	}
	for _, w := range words {
		l.buf = append(l.buf, ' ')
		l.buf = append(l.buf, w...)
	}
	l.buf = append(l.buf, '\n')
}

// chain declares a chain (iptables-restore ":NAME - [0:0]"), which also flushes it.
func (l *lines) chain(name string) {
	l.n++
	if l.discard {
		return
	}
	l.buf = append(l.buf, ':')
	l.buf = append(l.buf, name...)
	l.buf = append(l.buf, " - [0:0]\n"...)
}

// quote joins parts into a comment in double quotes, as kube-proxy writes comments that
// hold spaces, in one allocation. Callers only pass text built from validated names, so
// it never holds a quote itself.
func quote(parts ...string) string {
	n := 2
	for _, p := range parts {
		n += len(p)
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteByte('"')
	for _, p := range parts {
		b.WriteString(p)
	}
	b.WriteByte('"')
	return b.String()
}
