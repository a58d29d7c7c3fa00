package records

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"k8s.io/apimachinery/pkg/util/validation"

	"herald.dev/herald/internal/recordformat"
	"herald.dev/herald/speaker/quorum"
)

// The labels of a record (see the package doc).
const (
	// ModeLabel is the record's quorum.Mode, as its mode annotation says.
	ModeLabel = recordformat.ModeLabel
	// missesLabelPrefix starts the label of each speaker a record's writer misses.
	missesLabelPrefix = "misses.herald.dev/"
	// hearsLabelPrefix and olderModeLabel are the older format's labels.
	hearsLabelPrefix = "hears.herald.dev/"
	olderModeLabel   = "herald.dev/mode"
)

// MissesLabel is the label a record carries when its writer knows of node and does not
// hear it: the node's name where it is a valid label name (63 characters at most),
// else "h." and a hash of it.
func MissesLabel(node string) string {
	if !strings.Contains(node, "/") && len(validation.IsQualifiedName(node)) == 0 {
		return missesLabelPrefix + node
	}
	sum := sha256.Sum256([]byte(node))
	return missesLabelPrefix + "h." + hex.EncodeToString(sum[:20])
}

// recordLabels are the labels of a record saying mode, written by a speaker missing
// misses.
func recordLabels(misses []string, mode quorum.Mode) map[string]string {
	out := make(map[string]string, len(misses)+2)
	out[Label] = "true"
	out[ModeLabel] = string(mode)
	for _, m := range misses {
		out[MissesLabel(m)] = ""
	}
	return out
}

// setLabels gives a record these labels, dropping the misses labels it had that want
// lacks, and the older format's.
func setLabels(have map[string]string, want map[string]string) map[string]string {
	if have == nil {
		have = map[string]string{}
	}
	maps.DeleteFunc(have, func(k, _ string) bool {
		return strings.HasPrefix(k, missesLabelPrefix) || strings.HasPrefix(k, hearsLabelPrefix) || k == olderModeLabel
	})
	maps.Copy(have, want)
	return have
}

// missed returns the speakers a record's writer misses: those it knows of (known:
// the writers of the records it has seen, the members it has heard, and those it
// expects) that it does not hear (heard), itself aside. Sorted, unique. Every speaker
// that may read the record while in Quorum has written a record this writer has seen
// (its first one, written in trouble, reaches every speaker's watch) or has been
// heard by it, so a record that does not list a reader carries the reader's misses
// label.
func missed(self string, known, heard []string) []string {
	hears := make(map[string]bool, len(heard))
	for _, n := range heard {
		hears[n] = true
	}
	out := make([]string, 0, len(known))
	for _, n := range known {
		if n != self && !hears[n] {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Misses returns the speakers this one's record labels as missed (missed): those it
// expects, has heard or whose record it has seen, that it does not hear, less those
// not expected whose Node is gone (forgotten then). A record goes with its Node (its
// owner), and a speaker in Quorum may never see that deletion: a record that listed it
// leaves none of its watches. Without the check, every Node replaced would stay in
// every record.
func (r *Keeper) Misses(expected, heard []string) []string {
	out := missed(r.self, r.known(expected, heard), heard)
	isExpected := make(map[string]bool, len(expected))
	for _, n := range expected {
		isExpected[n] = true
	}
	return slices.DeleteFunc(out, func(n string) bool {
		if isExpected[n] {
			return false
		}
		var node corev1.Node
		if err := r.cache.Get(context.Background(), types.NamespacedName{Name: n}, &node); apierrors.IsNotFound(err) {
			r.forgetNode(n)
			return true
		}
		return false
	})
}
