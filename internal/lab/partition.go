package lab

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// Memberlist partitions: iptables rules inside the workers' namespaces (never the
// machine's) that drop the speakers' gossip while everything else, the API server
// included, stays reachable. Every rule carries partitionComment, so HealMemberlist
// removes exactly these and nothing the proxier installed.

const (
	// memberlistPort is the speakers' memberlist port, TCP and UDP.
	memberlistPort = "7946"
	// partitionComment tags every rule the partition faults insert.
	partitionComment = "herald-lab memberlist partition"
)

// PartitionMemberlist cuts each node off from every memberlist peer: its namespace
// drops TCP and UDP to or from port 7946 coming in and going out. Calling it again
// adds nothing.
func (s *State) PartitionMemberlist(ctx context.Context, nodes ...string) error {
	for _, n := range nodes {
		if err := s.dropMemberlist(ctx, n, netip.Addr{}, false); err != nil {
			return err
		}
	}
	return nil
}

// RefuseMemberlist makes each node refuse memberlist: its namespace answers TCP and UDP
// to or from port 7946 with port unreachable, going in and coming out, as between
// hosts where no speaker listens yet: a join to or from it fails at once rather than
// after a timeout. HealMemberlist ends it.
func (s *State) RefuseMemberlist(ctx context.Context, nodes ...string) error {
	for _, n := range nodes {
		if err := s.dropMemberlist(ctx, n, netip.Addr{}, true); err != nil {
			return err
		}
	}
	return nil
}

// SplitMemberlist cuts memberlist between two groups of nodes only: each node of a
// drops gossip to and from the addresses of b, and each node of b to and from those of
// a; within a group gossip flows. Calling it again adds nothing.
func (s *State) SplitMemberlist(ctx context.Context, a, b []string) error {
	for _, n := range a {
		if slices.Contains(b, n) {
			return fmt.Errorf("lab: %s is in both groups of the split", n)
		}
	}
	for _, sides := range [][2][]string{{a, b}, {b, a}} {
		for _, n := range sides[0] {
			for _, peer := range sides[1] {
				h, err := s.Worker(peer)
				if err != nil {
					return err
				}
				if err := s.dropMemberlist(ctx, n, h.Addr, false); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// HealMemberlist removes every rule the partition faults put in each node's namespace,
// and only those; a node without any is left as it is.
func (s *State) HealMemberlist(ctx context.Context, nodes ...string) error {
	for _, n := range nodes {
		rules, err := s.MemberlistRules(ctx, n)
		if err != nil {
			return err
		}
		for _, r := range rules {
			// iptables -S prints "-A CHAIN spec...": the same spec with -D deletes it.
			args := append([]string{"iptables", "-w", "-D"}, splitRule(strings.TrimPrefix(r, "-A "))...)
			if out, err := s.Exec(ctx, n, args...); err != nil {
				return fmt.Errorf("lab: healing memberlist on %s: %w: %s", n, err, out)
			}
		}
	}
	return nil
}

// MemberlistRules returns the partition faults' rules in node's namespace as
// `iptables -S` prints them.
func (s *State) MemberlistRules(ctx context.Context, node string) ([]string, error) {
	if _, err := s.Worker(node); err != nil {
		return nil, err
	}
	out, err := s.Exec(ctx, node, "iptables", "-w", "-S")
	if err != nil {
		return nil, fmt.Errorf("lab: iptables rules of %s: %w: %s", node, err, out)
	}
	var rules []string
	for line := range strings.Lines(string(out)) {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "-A ") && strings.Contains(line, `"`+partitionComment+`"`) {
			rules = append(rules, line)
		}
	}
	return rules, nil
}

// dropMemberlist makes node drop memberlist traffic (refuse it, with refuse), with
// peer only when peer is valid. multiport --ports matches the source or the
// destination port: the node's own replies and connections as well as its peers'.
func (s *State) dropMemberlist(ctx context.Context, node string, peer netip.Addr, refuse bool) error {
	if _, err := s.Worker(node); err != nil {
		return err
	}
	for _, rule := range memberlistRules(peer, refuse) {
		check := append([]string{"iptables", "-w", "-C"}, rule...)
		if _, err := s.Exec(ctx, node, check...); err == nil {
			continue // already there
		}
		insert := append([]string{"iptables", "-w", "-I"}, rule...)
		if out, err := s.Exec(ctx, node, insert...); err != nil {
			return fmt.Errorf("lab: dropping memberlist on %s: %w: %s", node, err, out)
		}
	}
	return nil
}

// memberlistRules are the chain and spec of each rule dropping (or refusing)
// memberlist traffic, to and from peer only when it is valid.
func memberlistRules(peer netip.Addr, refuse bool) [][]string {
	var rules [][]string
	for _, chain := range []string{"INPUT", "OUTPUT"} {
		for _, proto := range []string{"tcp", "udp"} {
			r := []string{chain, "-p", proto}
			if peer.IsValid() {
				dir := "-s"
				if chain == "OUTPUT" {
					dir = "-d"
				}
				r = append(r, dir, peer.String()+"/32")
			}
			target := []string{"DROP"}
			if refuse {
				// ICMP, which the rules do not match, for TCP too: a reset would
				// come back through them (from port 7946) and be refused in turn.
				// A connect() that gets port unreachable fails with ECONNREFUSED.
				target = []string{"REJECT", "--reject-with", "icmp-port-unreachable"}
			}
			r = append(r, "-m", "multiport", "--ports", memberlistPort,
				"-m", "comment", "--comment", partitionComment, "-j")
			rules = append(rules, append(r, target...))
		}
	}
	return rules
}

// splitRule splits a rule as iptables -S prints it into arguments, keeping a quoted
// comment whole.
func splitRule(rule string) []string {
	var args []string
	for len(rule) > 0 {
		rule = strings.TrimLeft(rule, " ")
		if rule == "" {
			break
		}
		if rule[0] == '"' {
			end := strings.IndexByte(rule[1:], '"')
			if end < 0 {
				args = append(args, rule[1:])
				break
			}
			args = append(args, rule[1:end+1])
			rule = rule[end+2:]
			continue
		}
		word, rest, _ := strings.Cut(rule, " ")
		args = append(args, word)
		rule = rest
	}
	return args
}
