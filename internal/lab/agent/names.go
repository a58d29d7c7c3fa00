package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// maxNameChars bounds the readable part of a pod namespace's name.
const maxNameChars = 20

// NamespaceFor is the network namespace of a pod: the lab's prefix, "pod", the pod's
// name reduced to [a-z0-9], and four hex digits of a hash of namespace/name, which tell
// apart pods whose names reduce alike (web-1, web1) or live in different namespaces.
// Everything after the prefix is [a-z0-9]+, so netlab.Cleanup(prefix) removes pod
// namespaces with the rest of the lab, and "pod" keeps them clear of host names.
func NamespaceFor(prefix, namespace, name string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		}
		if b.Len() == maxNameChars {
			break
		}
	}
	return prefix + "pod" + b.String() + shortHash(namespace+"/"+name, 4)
}

// vethFor is the node-side end of a pod's veth pair: "veth" and eight hex digits of the
// pod's UID, within the 15 bytes an interface name may have.
func vethFor(uid string) string { return "veth" + shortHash(uid, 8) }

func shortHash(s string, digits int) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:digits]
}
