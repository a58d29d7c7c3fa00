package runner

import (
	"reflect"
	"testing"
)

func TestParseNFTTables(t *testing.T) {
	out := "table ip filter\ntable ip6 kube-proxy\ntable inet firewalld\n\n# not a table\n"
	want := []NFTTable{{"ip", "filter"}, {"ip6", "kube-proxy"}, {"inet", "firewalld"}}
	if got := ParseNFTTables(out); !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if got := ParseNFTTables(""); got != nil {
		t.Errorf("no tables: %v", got)
	}
}
