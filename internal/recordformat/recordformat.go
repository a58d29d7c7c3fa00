// Package recordformat is the format of the speakers' records as both the speaker,
// which writes and reads them, and herald's controller, which digests them, see
// them: their names, labels and annotations, and the records digest (digest.go).
//
// It lives below both so that neither depends on the other to read what the other
// writes. It is pure: no client, no clock.
package recordformat

import "strings"

const (
	// Label marks the speakers' records (and only them) among the Leases.
	Label = "herald.dev/speaker-record"
	// ModeLabel repeats the record's mode as a label, for the API server's selectors.
	// Its key is new with the misses labels (the speaker's, speaker/records): a record
	// of the older format, labelled with the members heard, lacks it.
	ModeLabel = "herald.dev/quorum-mode"
	// MembersAnnotation lists the memberlist members the speaker hears, sorted.
	MembersAnnotation = "herald.dev/members"
	// ModeAnnotation is the speaker's quorum mode.
	ModeAnnotation = "herald.dev/mode"
	// UnreachableAnnotation lists the expected speakers it does not hear, sorted.
	UnreachableAnnotation = "herald.dev/unreachable"
	// MACsAnnotation lists the MACs its ARP/NDP responders answer with.
	MACsAnnotation = "herald.dev/macs"

	namePrefix = "herald-speaker-"
)

// Name is the name of node's record.
func Name(node string) string { return namePrefix + node }

// NodeOf returns the node whose record name is, or "".
func NodeOf(name string) string {
	n, ok := strings.CutPrefix(name, namePrefix)
	if !ok {
		return ""
	}
	return n
}
