package metallbmigrate

import (
	"fmt"
	"slices"
)

// shape lists the fields herald knows of an object: each field's own shape, nil for a
// value taken as it is. A list has the shape of its items.
type shape map[string]shape

var (
	selectorShape = shape{
		"matchLabels":      nil,
		"matchExpressions": {"key": nil, "operator": nil, "values": nil},
	}
	// ipAddressPoolSpec is every field of MetalLB's IPAddressPool spec that herald's
	// has, with the same name and meaning.
	ipAddressPoolSpec = shape{
		"addresses":     nil,
		"autoAssign":    nil,
		"avoidBuggyIPs": nil,
		"serviceAllocation": {
			"priority":           nil,
			"namespaces":         nil,
			"namespaceSelectors": selectorShape,
			"serviceSelectors":   selectorShape,
		},
	}
	// l2AdvertisementSpec is the same for L2Advertisement.
	l2AdvertisementSpec = shape{
		"ipAddressPools":         nil,
		"ipAddressPoolSelectors": selectorShape,
		"nodeSelectors":          selectorShape,
		"interfaces":             nil,
	}
)

// unknownFields returns the paths (below path) of the fields of v that s lacks, sorted.
func unknownFields(v any, s shape, path string) []string {
	if s == nil {
		return nil
	}
	var out []string
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			sub, ok := s[k]
			if !ok {
				out = append(out, path+"."+k)
				continue
			}
			out = append(out, unknownFields(x, sub, path+"."+k)...)
		}
	case []any:
		for i, x := range v {
			out = append(out, unknownFields(x, s, fmt.Sprintf("%s[%d]", path, i))...)
		}
	}
	slices.Sort(out)
	return out
}
