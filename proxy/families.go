package proxy

import (
	"fmt"
	"net/netip"
	"strings"

	"herald.dev/herald/proxy/model"
	"herald.dev/herald/proxy/runner"
)

// hostTools are the facts about the host that decide which families can be
// programmed: which commands are installed, and whether the kernel has IPv6.
type hostTools struct {
	installed  map[string]bool
	ipv6Kernel bool
}

// toolset names the binaries a mode needs per family.
type toolset struct {
	mode    Mode
	backend runner.Backend // iptables mode: which iptables binaries
}

// commands returns the binaries the mode needs to program family f.
func (ts toolset) commands(f model.Family) ([]string, error) {
	if ts.mode == ModeNFTables {
		return []string{"nft"}, nil
	}
	cmds, err := runner.CommandsFor(f, ts.backend)
	if err != nil {
		return nil, err
	}
	return cmds.All(), nil
}

// debianPackage is the package that brings the mode's binaries.
func (ts toolset) debianPackage() string {
	if ts.mode == ModeNFTables {
		return "nftables"
	}
	return "iptables"
}

// probeHost looks at $PATH for the binaries of both families (the iptables ones in
// nftables mode too: they tell whether kube-proxy's iptables mode runs) and at the
// namespace's /proc for IPv6.
func probeHost(ts toolset, do runner.Do) (hostTools, error) {
	names := []string{"nft"}
	for _, f := range []model.Family{model.IPv4, model.IPv6} {
		cmds, err := runner.CommandsFor(f, ts.backend)
		if err != nil {
			return hostTools{}, err
		}
		names = append(names, cmds.All()...)
	}
	v6, err := runner.IPv6Kernel(do)
	if err != nil {
		return hostTools{}, err
	}
	return hostTools{installed: runner.Installed(names...), ipv6Kernel: v6}, nil
}

// familyPlan says which families the proxier programs and why the others are left out.
type familyPlan struct {
	// program are the families to program, IPv4 first.
	program []model.Family
	// skipped says, per family not programmed, why not.
	skipped map[model.Family]string
	// degraded lists the skipped families the node has an IP of: the node is
	// dual-stack but only one family gets Service rules, which someone must fix.
	degraded []model.Family
}

// planFamilies picks the families to program: those of the node IPs whose tools (and
// kernel support, for IPv6) are there. A missing IPv6 is a warning when IPv4 remains,
// so that a node without ip6tables or with IPv6 turned off at boot still gets its IPv4
// Services; missing IPv4 tools, or no family left at all, are errors saying what to
// install.
func planFamilies(nodeIPs []netip.Addr, ts toolset, host hostTools) (familyPlan, error) {
	plan := familyPlan{skipped: map[model.Family]string{}}
	has := map[model.Family]bool{}
	for _, ip := range nodeIPs {
		if ip = ip.Unmap(); ip.Is4() {
			has[model.IPv4] = true
		} else if ip.Is6() {
			has[model.IPv6] = true
		}
	}
	for _, f := range []model.Family{model.IPv4, model.IPv6} {
		if !has[f] {
			plan.skipped[f] = fmt.Sprintf("the node has no %s address", f)
			continue
		}
		cmds, err := ts.commands(f)
		if err != nil {
			return familyPlan{}, err
		}
		var missing []string
		for _, c := range cmds {
			if !host.installed[c] {
				missing = append(missing, c)
			}
		}
		switch {
		case len(missing) > 0 && f == model.IPv4:
			return familyPlan{}, fmt.Errorf("%s not found in $PATH: install the Debian package %s (apt-get install %s), "+
				"or --proxy=none to leave Services to another proxy", strings.Join(missing, ", "), ts.debianPackage(), ts.debianPackage())
		case len(missing) > 0:
			plan.skipped[f] = fmt.Sprintf("%s not found in $PATH (Debian package %s)", strings.Join(missing, ", "), ts.debianPackage())
		case f == model.IPv6 && !host.ipv6Kernel:
			plan.skipped[f] = "the kernel has IPv6 turned off (no /proc/sys/net/ipv6; ipv6.disable=1 on its command line?)"
		default:
			plan.program = append(plan.program, f)
			continue
		}
		plan.degraded = append(plan.degraded, f)
	}
	if len(plan.program) == 0 {
		var why []string
		for _, f := range plan.degraded {
			why = append(why, plan.skipped[f])
		}
		if len(why) == 0 {
			return familyPlan{}, fmt.Errorf("no node IPs: they decide which families (IPv4, IPv6) are programmed")
		}
		return familyPlan{}, fmt.Errorf("no IP family can be programmed: %s", strings.Join(why, "; "))
	}
	return plan, nil
}

// summary is the one log line about families: what is programmed and why not the rest.
func (p familyPlan) summary() (msg string, kv []any) {
	names := make([]string, len(p.program))
	for i, f := range p.program {
		names[i] = f.String()
	}
	msg = "service proxy programs " + strings.Join(names, " and ")
	if len(p.program) == 1 {
		msg += " only"
	}
	for _, f := range []model.Family{model.IPv4, model.IPv6} {
		if why, ok := p.skipped[f]; ok {
			kv = append(kv, "no"+f.String(), why)
		}
	}
	return msg, kv
}
