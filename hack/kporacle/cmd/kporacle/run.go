//go:build linux

package main

import (
	"fmt"
	"io"
	"net"
	"os"

	"herald.dev/herald/hack/kporacle/nftoracle"
	"herald.dev/herald/hack/kporacle/oracle"
)

// run is the command without its process: flags and files in, rules out.
func run(args []string, stdin io.Reader, stdout io.Writer) error {
	flags, files, err := parseFlags(args, os.Stderr)
	if err != nil {
		return err
	}
	var in objects
	if err := readInputs(files, stdin, &in); err != nil {
		return err
	}
	if flags.mode == "nftables" {
		return runNFTables(flags, in, stdout)
	}
	o, err := oracle.New(flags.opts)
	if err != nil {
		return err
	}
	for _, svc := range in.services {
		o.OnServiceAdd(svc)
	}
	for _, slice := range in.slices {
		o.OnEndpointSliceAdd(slice)
	}
	result, err := o.Sync()
	if err != nil {
		return err
	}
	text := result.Payload
	if flags.dump {
		if text, err = o.Dump(); err != nil {
			return err
		}
	}
	if text, err = selectTable(text, flags.table); err != nil {
		return err
	}
	if flags.canonical {
		if text, err = oracle.Canonical(text); err != nil {
			return err
		}
	}
	_, err = io.WriteString(stdout, text)
	return err
}

// runNFTables runs kube-proxy's nftables proxier for one family: the primary
// node IP is the first -node-ip of that family (127.0.0.1 or ::1 without
// one), and the fake host has all -node-ip addresses.
func runNFTables(flags *cliFlags, in objects, stdout io.Writer) error {
	opts := nftoracle.Options{
		NodeName:          flags.opts.NodeName,
		NodeIP:            net.IPv4(127, 0, 0, 1),
		ClusterCIDRs:      flags.opts.ClusterCIDRs,
		MasqueradeBit:     flags.opts.MasqueradeBit,
		MasqueradeAll:     flags.opts.MasqueradeAll,
		NodePortAddresses: flags.opts.NodePortAddresses,
		ServiceCIDRs:      flags.serviceCIDRs,
		Logger:            flags.opts.Logger,
	}
	if flags.opts.IPv6 {
		opts.NodeIP = net.IPv6loopback
	}
	primary := false
	for _, ip := range flags.opts.NodeIPs {
		ip = ip.Unmap()
		if ip.Is6() == flags.opts.IPv6 && !primary {
			opts.NodeIP, primary = net.IP(ip.AsSlice()), true
		}
		opts.InterfaceAddrs = append(opts.InterfaceAddrs, net.IP(ip.AsSlice()))
	}
	if !primary {
		opts.InterfaceAddrs = append(opts.InterfaceAddrs, opts.NodeIP)
	}
	o, err := nftoracle.New(opts)
	if err != nil {
		return err
	}
	nftoracle.Populate(o, in.services, in.slices)
	if _, err := o.Sync(); err != nil {
		return err
	}
	text, err := o.Dump()
	if err != nil {
		return err
	}
	_, err = io.WriteString(stdout, text)
	return err
}

// readInputs reads every named file ("-" is stdin), or stdin when none is named.
func readInputs(files []string, stdin io.Reader, into *objects) error {
	if len(files) == 0 {
		files = []string{"-"}
	}
	for _, name := range files {
		if name == "-" {
			if err := readObjects(stdin, into); err != nil {
				return fmt.Errorf("stdin: %w", err)
			}
			continue
		}
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		err = readObjects(f, into)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

// selectTable keeps one table's section of iptables text, or all of it.
func selectTable(text, table string) (string, error) {
	if table == "all" {
		return text, nil
	}
	tables, err := oracle.SplitTables(text)
	if err != nil {
		return "", err
	}
	section, ok := tables[table]
	if !ok {
		return "", fmt.Errorf("no %s table in the output", table)
	}
	return section, nil
}
