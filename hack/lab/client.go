package main

import (
	"fmt"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"herald.dev/herald/internal/lab"
)

// The client's tools: what the walkthrough does from netshoot with curl and arping, in
// Go, so the lab needs neither installed.

func curlCmd(o *opts) *cobra.Command {
	var n, parallel int
	var from string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "curl URL",
		Short: "GET URL n times from a lab host (default the client) and count the answers by Hostname",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := o.state(cmd.Context())
			if err != nil {
				return err
			}
			h, err := s.Host(from)
			if err != nil {
				return err
			}
			url := args[0]
			if !strings.Contains(url, "://") {
				url = "http://" + url
			}
			res := lab.Curl(cmd.Context(), h.Namespace, url, n, parallel, timeout)
			res.Print(os.Stdout)
			if res.OK == 0 {
				return fmt.Errorf("no request to %s succeeded", url)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVarP(&n, "n", "n", 100, "requests")
	f.IntVar(&parallel, "parallel", 1, "requests at a time")
	f.StringVar(&from, "from", lab.ClientHost, "host the requests come from")
	f.DurationVar(&timeout, "timeout", 2*time.Second, "per request")
	return cmd
}

func whoHasCmd(o *opts) *cobra.Command {
	var from string
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "who-has IP",
		Short: "Ask by ARP (NDP for IPv6) from a lab host (default the client) who has IP, and name the nodes that answer",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ip, err := netip.ParseAddr(args[0])
			if err != nil {
				return err
			}
			s, err := o.state(cmd.Context())
			if err != nil {
				return err
			}
			h, err := s.Host(from)
			if err != nil {
				return err
			}
			macs, err := lab.WhoHas(h.Namespace, ip, wait)
			if err != nil {
				return err
			}
			if len(macs) == 0 {
				return fmt.Errorf("nobody answers ARP/NDP for %s", ip)
			}
			for _, m := range macs {
				owner := "not a lab host"
				if o, ok := s.HostByMAC(m); ok {
					owner = o.Name
				}
				fmt.Printf("%s is at %s (%s)\n", ip, m, owner)
			}
			if len(macs) > 1 {
				return fmt.Errorf("%d MACs answer for %s", len(macs), ip)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&from, "from", lab.ClientHost, "host that asks")
	cmd.Flags().DurationVar(&wait, "wait", time.Second, "how long to collect answers")
	return cmd
}

func failoverCmd(o *opts) *cobra.Command {
	var fault string
	var restore bool
	cmd := &cobra.Command{
		Use:   "failover VIP [VIP...]",
		Short: "Fail the owner of VIP (link-down, kill, stop) and measure from the client until another node takes over",
		Long: "Fail the owner of VIP (link-down, kill, stop) and measure from the client, by ARP for an IPv4 VIP and NDP\n" +
			"for an IPv6 one, until another node takes over. Several VIPs (the two of a dual-stack Service) must have\n" +
			"one owner: the fault is inflicted once and measured for each.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var vips []netip.Addr
			for _, a := range args {
				vip, err := netip.ParseAddr(a)
				if err != nil {
					return err
				}
				vips = append(vips, vip)
			}
			s, err := o.state(cmd.Context())
			if err != nil {
				return err
			}
			res, err := s.MeasureFailovers(cmd.Context(), vips, fault)
			if res[0].OldOwner != "" && restore {
				defer mend(cmd, s, res[0].OldOwner, fault)
			}
			if err != nil {
				return err
			}
			for _, r := range res {
				r.Print(os.Stdout)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&fault, "fault", lab.FaultLinkDown, "link-down, kill (SIGKILL) or stop (SIGTERM) of the owner")
	cmd.Flags().BoolVar(&restore, "restore", true, "undo the fault afterwards (link up, speaker started again)")
	return cmd
}

// mend undoes a fault on node.
func mend(cmd *cobra.Command, s *lab.State, node, fault string) {
	var err error
	switch fault {
	case lab.FaultLinkDown:
		err = s.LinkUp(cmd.Context(), node)
	case lab.FaultKill, lab.FaultStop:
		// A stopped speaker may still be leaving memberlist; wait until it has exited.
		if p, ok := s.Procs[node+"-speaker"]; ok {
			p.WaitGone(15 * time.Second)
		}
		err = s.StartSpeaker(cmd.Context(), node)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "lab: undoing %s on %s: %v\n", fault, node, err)
		return
	}
	fmt.Printf("  restored: %s of %s undone\n", fault, node)
}
