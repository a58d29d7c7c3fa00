package speaker

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"herald.dev/herald/internal/recordformat"
	"herald.dev/herald/speaker/quorum"
)

// A record's labels repeat what the API server needs to send each speaker only the
// records that concern it (recordview.go): one label per speaker its writer knows of
// and does not hear (a misses label), and its mode. A speaker that hears a majority
// watches the records that miss it (a selector "misses.herald.dev/<itself>") and those
// of speakers in trouble (mode other than Quorum); a death rewrites every survivor's
// record, and none of those writes reaches a survivor.
//
// The labels name the speakers missed, not those heard: a record lists its members in
// its annotation for the quorum rule, and in steady state (everyone hears everyone)
// it carries no misses label at all. A record that labelled every member heard
// weighed 42.5 KB at a thousand nodes, most of it labels, and every survivor rewrites
// its record at each death and each return: 85 MB of etcd revisions a flap.
//
// Records of the older format carry a hears label per member heard and their mode
// under another key (olderModeLabel): lacking ModeLabel, they are in trouble to a
// newer speaker's selector, which so sees each of them, whatever it lists, while a
// cluster is upgraded. A newer speaker rewriting its record drops both.
const (
	// RecordModeLabel is the record's quorum.Mode, as its mode annotation says.
	RecordModeLabel = recordformat.ModeLabel
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
	out[RecordLabel] = "true"
	out[RecordModeLabel] = string(mode)
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
