// Package nftdirect applies the small transactions of herald's nftables proxier (the
// partial syncs of an endpoint change, and stale-chain deletions) straight over
// netlink, without the nft binary.
//
// Why: before nft runs any command that adds a rule, it reads every chain of every
// table into its cache, in time that grows with the chains on the node. With 10,000
// Services that read is most of a one-endpoint sync (docs/nftables.md), and it grows with the
// Service count. The kernel resolves chains and sets by name itself, so a netlink batch
// of the same operations needs no cache and costs the same at any table size.
//
// Compile accepts only the nft commands and rule forms below, turned into the exact
// expressions nft 1.0 generates for them (checked against nft in a network namespace,
// kernel_test.go). Anything else is ErrUnsupported, and the caller runs the transaction
// with nft as before:
//
//	add chain|flush chain|delete chain FAMILY TABLE CHAIN
//	add rule FAMILY TABLE CHAIN STATEMENT... [comment "TEXT"]
//	add element|delete element FAMILY TABLE SET { ADDRESS . ADDRESS . tcp|udp|sctp . PORT }
//
// where a STATEMENT is one of
//
//	numgen random mod N 0
//	meta l4proto tcp|udp|sctp
//	ip|ip6 saddr @SET
//	update @SET { ip|ip6 saddr }
//	dnat to ADDRESS:PORT        (last)
//	goto|jump CHAIN             (last)
//
// which are the forms of kube-proxy's service, endpoint and affinity rules as herald
// writes them (proxy/nftables policyChain); the element form is that of the
// hairpin-connections set, which every change of a local endpoint touches.
package nftdirect

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"
)

// ErrUnsupported says a transaction holds something Compile does not translate.
var ErrUnsupported = errors.New("not supported over netlink")

// opKind is what one operation of a Batch does.
type opKind int

const (
	addChain opKind = iota
	flushChain
	deleteChain
	addRule
	addElement
	deleteElement
)

// op is one operation: a chain command, or a rule to append.
type op struct {
	kind     opKind
	chain    string // or the set, for elements
	exprs    []expr.Any
	userData []byte // the rule's comment, as nft stores it
	key      []byte // an element's key, as the kernel stores it
}

// Batch is a compiled transaction: operations on one table, applied atomically.
type Batch struct {
	family nftables.TableFamily
	table  string
	ops    []op
}

// Len is the number of operations.
func (b *Batch) Len() int { return len(b.ops) }

// Compile translates an nft script (knftables' Transaction.String) into a Batch, or
// says ErrUnsupported, naming the line, when any line is outside the forms above.
func Compile(script string) (*Batch, error) {
	b := &Batch{}
	for line := range strings.Lines(script) {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if err := b.compileLine(line); err != nil {
			return nil, fmt.Errorf("%q: %w", line, err)
		}
	}
	if len(b.ops) == 0 {
		return nil, fmt.Errorf("empty transaction: %w", ErrUnsupported)
	}
	return b, nil
}

func (b *Batch) compileLine(line string) error {
	words, err := splitWords(line)
	if err != nil {
		return err
	}
	if len(words) < 5 {
		return ErrUnsupported
	}
	verb, object, family, table, chain := words[0], words[1], words[2], words[3], words[4]
	fam, err := b.useTable(family, table)
	if err != nil {
		return err
	}
	switch {
	case object == "chain" && len(words) == 5:
		kinds := map[string]opKind{"add": addChain, "flush": flushChain, "delete": deleteChain}
		kind, ok := kinds[verb]
		if !ok {
			return ErrUnsupported
		}
		b.ops = append(b.ops, op{kind: kind, chain: chain})
		return nil
	case object == "element" && (verb == "add" || verb == "delete"):
		key, err := compileKey(fam, words[5:])
		if err != nil {
			return err
		}
		kind := addElement
		if verb == "delete" {
			kind = deleteElement
		}
		b.ops = append(b.ops, op{kind: kind, chain: chain, key: key})
		return nil
	case object == "rule" && verb == "add" && len(words) > 5:
		o, err := compileRule(fam, words[5:])
		if err != nil {
			return err
		}
		o.chain = chain
		b.ops = append(b.ops, o)
		return nil
	}
	return ErrUnsupported
}

// useTable checks that every line names the same table, of the ip or ip6 family.
func (b *Batch) useTable(family, table string) (nftables.TableFamily, error) {
	var fam nftables.TableFamily
	switch family {
	case "ip":
		fam = nftables.TableFamilyIPv4
	case "ip6":
		fam = nftables.TableFamilyIPv6
	default:
		return 0, fmt.Errorf("family %s: %w", family, ErrUnsupported)
	}
	if b.table == "" {
		b.family, b.table = fam, table
	} else if b.family != fam || b.table != table {
		return 0, fmt.Errorf("more than one table: %w", ErrUnsupported)
	}
	return fam, nil
}

// familyInfo is what a rule's expressions depend on in each family.
type familyInfo struct {
	keyword    string // "ip", "ip6"
	saddrAt    uint32 // offset of the source address in the network header
	addrLen    uint32
	natFamily  uint32
	validIP    func(netip.Addr) bool
	registerOf func(netip.Addr) []byte
}

var families = map[nftables.TableFamily]familyInfo{
	nftables.TableFamilyIPv4: {"ip", 12, 4, unix.NFPROTO_IPV4, netip.Addr.Is4,
		func(a netip.Addr) []byte { b := a.As4(); return b[:] }},
	nftables.TableFamilyIPv6: {"ip6", 8, 16, unix.NFPROTO_IPV6, func(a netip.Addr) bool { return a.Is6() && !a.Is4In6() },
		func(a netip.Addr) []byte { b := a.As16(); return b[:] }},
}

var l4protos = map[string]byte{"tcp": unix.IPPROTO_TCP, "udp": unix.IPPROTO_UDP, "sctp": unix.IPPROTO_SCTP}

// compileRule turns a rule's words into expressions, register 1 throughout as nft
// allocates it for these forms.
func compileRule(fam nftables.TableFamily, words []string) (op, error) {
	f := families[fam]
	o := op{kind: addRule}
	terminal := false
	for len(words) > 0 {
		if terminal && words[0] != "comment" {
			return op{}, fmt.Errorf("%q after the verdict: %w", words[0], ErrUnsupported)
		}
		var n int
		switch {
		case len(words) >= 5 && words[0] == "numgen" && words[1] == "random" && words[2] == "mod" && words[4] == "0":
			mod, err := strconv.ParseUint(words[3], 10, 32)
			if err != nil || mod == 0 {
				return op{}, fmt.Errorf("numgen modulus %q: %w", words[3], ErrUnsupported)
			}
			o.exprs = append(o.exprs,
				&expr.Numgen{Register: 1, Modulus: uint32(mod), Type: unix.NFT_NG_RANDOM},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{0, 0, 0, 0}})
			n = 5
		case len(words) >= 3 && words[0] == "meta" && words[1] == "l4proto":
			proto, ok := l4protos[words[2]]
			if !ok {
				return op{}, fmt.Errorf("l4proto %q: %w", words[2], ErrUnsupported)
			}
			o.exprs = append(o.exprs,
				&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{proto}})
			n = 3
		case len(words) >= 3 && words[0] == f.keyword && words[1] == "saddr" && setName(words[2]) != "":
			o.exprs = append(o.exprs, f.saddr(), &expr.Lookup{SourceRegister: 1, SetName: setName(words[2])})
			n = 3
		case len(words) >= 6 && words[0] == "update" && setName(words[1]) != "" &&
			words[2] == "{" && words[3] == f.keyword && words[4] == "saddr" && words[5] == "}":
			o.exprs = append(o.exprs, f.saddr(),
				&expr.Dynset{SrcRegKey: 1, SetName: setName(words[1]), Operation: unix.NFT_DYNSET_OP_UPDATE})
			n = 6
		case len(words) >= 3 && words[0] == "dnat" && words[1] == "to":
			ap, err := netip.ParseAddrPort(words[2])
			if err != nil || !f.validIP(ap.Addr()) || ap.Addr().Zone() != "" {
				return op{}, fmt.Errorf("dnat target %q: %w", words[2], ErrUnsupported)
			}
			port := []byte{byte(ap.Port() >> 8), byte(ap.Port())}
			o.exprs = append(o.exprs,
				&expr.Immediate{Register: 1, Data: f.registerOf(ap.Addr())},
				&expr.Immediate{Register: 2, Data: port},
				&expr.NAT{Type: expr.NATTypeDestNAT, Family: f.natFamily, RegAddrMin: 1, RegProtoMin: 2, Specified: true})
			n, terminal = 3, true
		case len(words) >= 2 && (words[0] == "goto" || words[0] == "jump"):
			kind := expr.VerdictGoto
			if words[0] == "jump" {
				kind = expr.VerdictJump
			}
			o.exprs = append(o.exprs, &expr.Verdict{Kind: kind, Chain: words[1]})
			n, terminal = 2, true
		case len(words) == 2 && words[0] == "comment" && len(o.exprs) > 0:
			text, err := strconv.Unquote(words[1])
			// nft takes neither quotes inside a comment nor more than 128 bytes.
			if err != nil || strings.ContainsAny(text, "\"\\") || len(text) >= 128 {
				return op{}, fmt.Errorf("comment %s: %w", words[1], ErrUnsupported)
			}
			o.userData = userdata.AppendString(nil, userdata.TypeComment, text)
			n = 2
		default:
			return op{}, fmt.Errorf("statement at %q: %w", words[0], ErrUnsupported)
		}
		words = words[n:]
	}
	if len(o.exprs) == 0 {
		return op{}, ErrUnsupported
	}
	return o, nil
}

// compileKey encodes "{ ADDRESS . ADDRESS . PROTO . PORT }" as nft does for a set of
// type addr . addr . inet_proto . inet_service: each field in network byte order,
// padded with zeros to a multiple of 4 bytes (a register's size).
func compileKey(fam nftables.TableFamily, words []string) ([]byte, error) {
	f := families[fam]
	if len(words) != 9 || words[0] != "{" || words[2] != "." || words[4] != "." || words[6] != "." || words[8] != "}" {
		return nil, fmt.Errorf("element form: %w", ErrUnsupported)
	}
	var key []byte
	for _, w := range []string{words[1], words[3]} {
		a, err := netip.ParseAddr(w)
		if err != nil || !f.validIP(a) || a.Zone() != "" {
			return nil, fmt.Errorf("element address %q: %w", w, ErrUnsupported)
		}
		key = append(key, f.registerOf(a)...)
	}
	proto, ok := l4protos[words[5]]
	if !ok {
		return nil, fmt.Errorf("element protocol %q: %w", words[5], ErrUnsupported)
	}
	port, err := strconv.ParseUint(words[7], 10, 16)
	if err != nil {
		return nil, fmt.Errorf("element port %q: %w", words[7], ErrUnsupported)
	}
	return append(key, proto, 0, 0, 0, byte(port>>8), byte(port), 0, 0), nil
}

// saddr loads the packet's source address into register 1.
func (f familyInfo) saddr() expr.Any {
	return &expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: f.saddrAt, Len: f.addrLen}
}

// setName is the name in "@name", or "".
func setName(word string) string {
	if len(word) < 2 || word[0] != '@' {
		return ""
	}
	return word[1:]
}

// splitWords splits a line at spaces, keeping a double-quoted string (with its
// quotes) as one word.
func splitWords(line string) ([]string, error) {
	var words []string
	for line != "" {
		line = strings.TrimLeft(line, " \t")
		if line == "" {
			break
		}
		if line[0] == '"' {
			end := 1
			for ; end < len(line) && line[end] != '"'; end++ {
				if line[end] == '\\' {
					end++
				}
			}
			if end >= len(line) {
				return nil, fmt.Errorf("unterminated quote: %w", ErrUnsupported)
			}
			words = append(words, line[:end+1])
			line = line[end+1:]
			continue
		}
		end := strings.IndexAny(line, " \t")
		if end < 0 {
			end = len(line)
		}
		words = append(words, line[:end])
		line = line[end:]
	}
	return words, nil
}
