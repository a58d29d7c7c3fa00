package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Status prints the lab in runDir: where its files are, its hosts with their cables,
// its processes alive or not, the pods the agents run, and the namespaces that exist.
// prefix is used when there is no state, to show what a broken lab left.
func Status(ctx context.Context, w io.Writer, runDir, prefix string) error {
	s, err := Load(runDir)
	if errors.Is(err, ErrNoLab) {
		fmt.Fprintf(w, "no lab in %s\n", runDir)
		if left := labNamespaces(prefix); len(left) > 0 {
			fmt.Fprintf(w, "namespaces left with prefix %s: %s\n  remove them with: hack/lab down\n", prefix, strings.Join(left, " "))
		}
		return nil
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "lab %q up since %s (%s ago)\n", s.Prefix, s.Started.Format(time.RFC3339), time.Since(s.Started).Round(time.Second))
	fmt.Fprintf(w, "run directory: %s (state %s, logs *.log)\n", s.RunDir, stateFile)
	fmt.Fprintf(w, "kubeconfig:    %s (cluster admin, reachable inside the lab: hack/lab kubectl ...)\n", s.Kubeconfig)
	fmt.Fprintf(w, "herald runs as: ServiceAccounts %s (%s), %s (%s), with the RBAC of %s\n",
		ControllerAccount.Name, s.ControllerKubeconfig, SpeakerAccount.Name, s.SpeakerKubeconfig, Manifest)
	fmt.Fprintf(w, "speakers:      %s\n\n", strings.Join(append(proxierArgs(s), s.SpeakerArgs...), " "))

	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "HOST\tROLE\tNAMESPACE\tADDRESS\tMAC\tPOD CIDR\tLINK")
	for _, h := range s.Hosts {
		link := "?"
		if up, err := linkUp(ctx, s, h); err == nil {
			link = map[bool]string{true: "up", false: "DOWN"}[up]
		} else if !slices.Contains(labNamespaces(s.Prefix), h.Namespace) {
			link = "namespace gone"
		}
		cidr, addr := "-", h.Addr.String()
		if h.PodCIDR.IsValid() {
			cidr = h.PodCIDR.String()
		}
		if h.Addr6.IsValid() {
			addr += "," + h.Addr6.String()
		}
		if h.PodCIDR6.IsValid() {
			cidr += "," + h.PodCIDR6.String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", h.Name, h.Role, h.Namespace, addr, h.MAC, cidr, link)
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "PROCESS\tPID\tSTATE\tLOG")
	keys := make([]string, 0, len(s.Procs))
	for k := range s.Procs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		p := s.Procs[k]
		state := "running"
		if !p.Alive() {
			state = "EXITED"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", k, p.Pid, state, p.Log)
	}
	pods, err := s.Pods()
	if err != nil {
		return err
	}
	if len(pods) > 0 {
		fmt.Fprintln(tw)
		fmt.Fprintln(tw, "POD\tNODE\tIP\tNAMESPACE\tPORTS")
		for _, p := range pods {
			fmt.Fprintf(tw, "%s/%s\t%s\t%s\t%s\t%v\n", p.Namespace, p.Name, p.Node, p.IP, p.NetNS, p.Ports)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nnamespaces: %s\n", strings.Join(labNamespaces(s.Prefix), " "))
	refused := s.Refusals()
	logs := slices.Sorted(maps.Keys(refused))
	for _, log := range logs {
		lines := refused[log]
		fmt.Fprintf(w, "REFUSED by the API server (missing RBAC?): %d lines in %s, the first:\n  %s\n", len(lines), log, lines[0])
	}
	return nil
}
