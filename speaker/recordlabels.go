package speaker

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"herald.dev/herald/internal/recordformat"
	"herald.dev/herald/speaker/quorum"
)

// A record's labels repeat what the API server needs to send each speaker only the
// records that concern it (recordview.go): one label per member its writer hears, and
// its mode. A speaker that hears a majority watches the records that do not list it
// (a selector "!hears.herald.dev/<itself>") and those of speakers in trouble (mode
// other than Quorum); a death rewrites every survivor's record, and none of those
// writes reaches a survivor.
const (
	// RecordModeLabel is the record's quorum.Mode, as its mode annotation says.
	RecordModeLabel = recordformat.ModeLabel
	// hearsLabelPrefix starts the label of each member a record's writer hears.
	hearsLabelPrefix = "hears.herald.dev/"
)

// HearsLabel is the label a record carries when its writer hears node: the node's name
// where it is a valid label name (63 characters at most), else "h." and a hash of it.
func HearsLabel(node string) string {
	if !strings.Contains(node, "/") && len(validation.IsQualifiedName(node)) == 0 {
		return hearsLabelPrefix + node
	}
	sum := sha256.Sum256([]byte(node))
	return hearsLabelPrefix + "h." + hex.EncodeToString(sum[:20])
}

// recordLabels are the labels of a record saying mode, written by a speaker hearing
// members.
func recordLabels(members []string, mode quorum.Mode) map[string]string {
	out := make(map[string]string, len(members)+2)
	out[RecordLabel] = "true"
	out[RecordModeLabel] = string(mode)
	for _, m := range members {
		out[HearsLabel(m)] = ""
	}
	return out
}

// setLabels gives l these labels, dropping the hears labels it had that want lacks.
func setLabels(have map[string]string, want map[string]string) map[string]string {
	if have == nil {
		have = map[string]string{}
	}
	maps.DeleteFunc(have, func(k, _ string) bool { return strings.HasPrefix(k, hearsLabelPrefix) })
	maps.Copy(have, want)
	return have
}
