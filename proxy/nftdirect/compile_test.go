package nftdirect

import (
	"errors"
	"testing"
)

func TestCompileAcceptsPartialSyncForms(t *testing.T) {
	script := `add chain ip herald service-ABC-ns/svc/tcp/http
flush chain ip herald service-ABC-ns/svc/tcp/http
add rule ip herald service-ABC-ns/svc/tcp/http ip saddr @affinity-X goto endpoint-X
add rule ip herald service-ABC-ns/svc/tcp/http numgen random mod 2 0 meta l4proto tcp dnat to 10.0.0.1:8080
add rule ip herald service-ABC-ns/svc/tcp/http meta l4proto udp dnat to 10.0.0.2:53 comment "ns/svc:dns"
add rule ip herald endpoint-X update @affinity-X { ip saddr }
delete chain ip herald endpoint-OLD
add element ip herald hairpin-connections { 10.0.0.1 . 10.0.0.1 . tcp . 8080 }
delete element ip herald hairpin-connections { 10.0.0.2 . 10.0.0.2 . udp . 53 }
`
	b, err := Compile(script)
	if err != nil {
		t.Fatal(err)
	}
	if b.Len() != 9 || b.table != "herald" {
		t.Errorf("%d operations on table %q, want 9 on herald", b.Len(), b.table)
	}
	want := []byte{10, 0, 0, 1, 10, 0, 0, 1, 6, 0, 0, 0, 0x1f, 0x90, 0, 0}
	if got := b.ops[7].key; string(got) != string(want) {
		t.Errorf("hairpin key % x, want % x (fields padded to 4 bytes)", got, want)
	}
	if _, err := Compile("add rule ip6 herald c numgen random mod 3 0 meta l4proto sctp dnat to [fd00::1]:80\n"); err != nil {
		t.Errorf("IPv6: %v", err)
	}
}

// Everything else goes to nft: Compile must refuse it rather than guess.
func TestCompileRefusesOtherForms(t *testing.T) {
	for _, script := range []string{
		"",
		"add table ip herald",
		"delete table ip herald",
		"add chain ip herald c { comment \"chain\" ; }",
		"add map ip herald m { type ipv4_addr : verdict ; }",
		"add element ip herald service-ips { 10.0.0.1 . tcp . 80 : goto c }",
		"delete element ip herald service-ips { 10.0.0.1 . tcp . 80 }",
		"add element ip herald cluster-ips { 10.0.0.1 }",
		"add element ip herald hairpin-connections { 10.0.0.1 . 10.0.0.1 . tcp . 80 comment \"x\" }",
		"add element ip herald hairpin-connections { 10.0.0.1 . 10.0.0.1 . tcp . 80 : goto c }",
		"add element ip herald hairpin-connections { 10.0.0.1 . 10.0.0.1 . icmp . 80 }",
		"add element ip herald hairpin-connections { 10.0.0.1 . 10.0.0.1 . tcp . 65536 }",
		"add element ip herald hairpin-connections { fd00::1 . fd00::1 . tcp . 80 }",
		"add set ip herald affinity-X { type ipv4_addr ; flags dynamic,timeout ; timeout 3h ; }",
		"add rule inet herald c goto d",
		"add rule ip herald c ip daddr 10.0.0.1 goto d",
		"add rule ip herald c ip saddr 10.0.0.1 jump mark-for-masquerade",
		"add rule ip herald c mark set mark or 0x4000",
		"add rule ip herald c meta l4proto icmp dnat to 10.0.0.1:80",
		"add rule ip herald c dnat to [fd00::1]:80",
		"add rule ip6 herald c dnat to 10.0.0.1:80",
		"add rule ip herald c dnat to 10.0.0.1",
		"add rule ip herald c goto d meta l4proto tcp",
		"add rule ip herald c numgen random mod 0 0 goto d",
		"add rule ip herald c numgen random mod 2 1 goto d",
		"add rule ip herald c goto d comment \"unterminated",
		"add rule ip herald c goto d comment \"with \\\"quotes\\\"\"",
		"add rule ip herald c comment \"only\"",
		"insert rule ip herald c goto d",
		"add rule ip herald c goto d\nadd rule ip other c goto d",
		"add rule ip herald c goto d\nadd rule ip6 herald c goto d",
		"add rule ip herald c goto d\n# ERROR: invalid chain",
	} {
		if _, err := Compile(script); !errors.Is(err, ErrUnsupported) {
			t.Errorf("Compile(%q): %v, want ErrUnsupported", script, err)
		}
	}
}
