package handover

import (
	"encoding/json"
	"fmt"
)

// Count is what one VIP's forwarding carried so far.
type Count struct {
	Flows   int    // distinct TCP flows forwarded (the chain's set)
	Packets uint64 // segments forwarded (the chain's counter)
}

// parseCounts reads `nft -j list table` output: per chain name, the packets its
// counters saw; per set name, how many elements it holds.
func parseCounts(out []byte) (packets map[string]uint64, elems map[string]int, err error) {
	var doc struct {
		Nftables []struct {
			Set *struct {
				Name string            `json:"name"`
				Elem []json.RawMessage `json:"elem"`
			} `json:"set"`
			Rule *struct {
				Chain string `json:"chain"`
				Expr  []struct {
					Counter *struct {
						Packets uint64 `json:"packets"`
					} `json:"counter"`
				} `json:"expr"`
			} `json:"rule"`
		} `json:"nftables"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		return nil, nil, fmt.Errorf("reading nft's JSON listing: %w", err)
	}
	packets, elems = map[string]uint64{}, map[string]int{}
	for _, o := range doc.Nftables {
		if o.Set != nil {
			elems[o.Set.Name] = len(o.Set.Elem)
		}
		if o.Rule != nil {
			for _, e := range o.Rule.Expr {
				if e.Counter != nil {
					packets[o.Rule.Chain] += e.Counter.Packets
				}
			}
		}
	}
	return packets, elems, nil
}
