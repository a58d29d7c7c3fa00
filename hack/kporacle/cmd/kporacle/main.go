//go:build linux

// Command kporacle prints the iptables-restore input kube-proxy v1.36.3's
// iptables proxier would apply for a set of Services and EndpointSlices, on
// its first (full) sync, without touching the machine's iptables. With
// -mode nftables it prints the ruleset kube-proxy's nftables proxier builds
// instead (knftables' fake, sorted).
//
//	kporacle -node-name test-node -node-ip 192.168.0.2 -cluster-cidr 10.0.0.0/8 objects.yaml
//	kubectl get svc,endpointslices -A -o yaml | kporacle -node-name node-a -
//	kporacle -mode nftables -node-name test-node -node-ip 192.168.0.2 objects.yaml
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strconv"
	"strings"

	"k8s.io/klog/v2"

	"herald.dev/herald/hack/kporacle/oracle"
)

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stdout); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "kporacle:", err)
		}
		os.Exit(2)
	}
}

// listFlag is a comma-separated, repeatable string flag.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(value string) error {
	for item := range strings.SplitSeq(value, ",") {
		if item = strings.TrimSpace(item); item != "" {
			*l = append(*l, item)
		}
	}
	return nil
}

// cliFlags are the command line, before conversion into oracle.Options.
type cliFlags struct {
	opts               oracle.Options
	nodeIPs            listFlag
	localhostNodePorts bool
	randomFully        bool
	nfacct             bool
	table              string
	canonical          bool
	dump               bool
	verbosity          int
	// mode is iptables or nftables; serviceCIDRs are for nftables only.
	mode         string
	serviceCIDRs listFlag
}

func parseFlags(args []string, stderr io.Writer) (*cliFlags, []string, error) {
	f := &cliFlags{}
	fs := flag.NewFlagSet("kporacle", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: kporacle -node-name NAME [flags] [FILE|-]...  (Services and EndpointSlices as YAML or JSON; stdin if no file)")
		fs.PrintDefaults()
	}
	fs.StringVar(&f.opts.NodeName, "node-name", "", "kube-proxy's node name; endpoints on this node are local (required)")
	fs.Var(&f.nodeIPs, "node-ip", "node addresses, comma-separated; the first of the family is the primary node IP")
	fs.BoolVar(&f.opts.IPv6, "ipv6", false, "run the IPv6 proxier")
	fs.Var((*listFlag)(&f.opts.ClusterCIDRs), "cluster-cidr", "pod CIDRs for --detect-local-mode=ClusterCIDR")
	fs.StringVar(&f.opts.BridgeInterface, "pod-bridge-interface", "", "--detect-local-mode=BridgeInterface with this bridge")
	fs.StringVar(&f.opts.InterfaceNamePrefix, "pod-interface-name-prefix", "", "--detect-local-mode=InterfaceNamePrefix with this prefix")
	fs.IntVar(&f.opts.MasqueradeBit, "masquerade-bit", oracle.DefaultMasqueradeBit, "--iptables-masquerade-bit")
	fs.BoolVar(&f.opts.MasqueradeAll, "masquerade-all", false, "--masquerade-all")
	fs.Var((*listFlag)(&f.opts.NodePortAddresses), "nodeport-addresses", `--nodeport-addresses: CIDRs or "primary"`)
	fs.BoolVar(&f.localhostNodePorts, "localhost-nodeports", true, "--iptables-localhost-nodeports")
	fs.BoolVar(&f.randomFully, "random-fully", true, "pretend iptables supports MASQUERADE --random-fully (>= 1.6.2)")
	fs.BoolVar(&f.nfacct, "nfacct", true, "pretend the kernel has nfacct (adds -m nfacct matches)")
	fs.BoolVar(&f.opts.ConntrackTCPBeLiberal, "tcp-be-liberal", false, "pretend sysctl nf_conntrack_tcp_be_liberal=1 (no INVALID drop rule)")
	fs.StringVar(&f.table, "table", "all", "print only this table's section: filter, nat or all")
	fs.BoolVar(&f.canonical, "canonical", false, "sort the output so it does not depend on kube-proxy's map order")
	fs.BoolVar(&f.dump, "dump", false, "print the simulated tables after the sync (iptables-save format) instead of the restore input")
	fs.StringVar(&f.mode, "mode", "iptables", "kube-proxy proxier: iptables, or nftables (prints the resulting ruleset; -table, -canonical, -dump, -random-fully, -nfacct, -tcp-be-liberal, -localhost-nodeports and the interface detectors do not apply)")
	fs.Var(&f.serviceCIDRs, "service-cidr", "ServiceCIDRs (nftables mode: the cluster-ips-check drop rule)")
	fs.IntVar(&f.verbosity, "v", 0, "kube-proxy log verbosity (logs go to stderr)")
	if err := fs.Parse(args); err != nil {
		return nil, nil, err
	}
	f.opts.DisableLocalhostNodePorts = !f.localhostNodePorts
	f.opts.NoRandomFully = !f.randomFully
	f.opts.NoNFAcct = !f.nfacct
	for _, s := range f.nodeIPs {
		ip, err := netip.ParseAddr(s)
		if err != nil {
			return nil, nil, fmt.Errorf("-node-ip: %w", err)
		}
		f.opts.NodeIPs = append(f.opts.NodeIPs, ip)
	}
	if f.mode != "iptables" && f.mode != "nftables" {
		return nil, nil, fmt.Errorf("-mode %q: want iptables or nftables", f.mode)
	}
	if f.mode == "nftables" && (f.table != "all" || f.canonical || f.dump || f.opts.BridgeInterface != "" || f.opts.InterfaceNamePrefix != "") {
		return nil, nil, errors.New("-mode nftables prints the whole ruleset: -table, -canonical, -dump, -pod-bridge-interface and -pod-interface-name-prefix do not apply")
	}
	if f.table != "all" && f.table != "filter" && f.table != "nat" {
		return nil, nil, fmt.Errorf("-table %q: want filter, nat or all", f.table)
	}
	if f.verbosity > 0 {
		var klogFlags flag.FlagSet
		klog.InitFlags(&klogFlags)
		if err := klogFlags.Set("v", strconv.Itoa(f.verbosity)); err != nil {
			return nil, nil, fmt.Errorf("-v: %w", err)
		}
		f.opts.Logger = klog.Background()
	}
	return f, fs.Args(), nil
}
