package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"herald.dev/herald/internal/lab"
)

// faultCmds are the verbs that break (and mend) the running lab.
func faultCmds(o *opts) []*cobra.Command {
	node := func(use, short, done string, do func(context.Context, *lab.State, string) error) *cobra.Command {
		return &cobra.Command{
			Use: use + " NODE", Short: short, Args: cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				s, err := o.state(cmd.Context())
				if err != nil {
					return err
				}
				if err := do(cmd.Context(), s, args[0]); err != nil {
					return err
				}
				fmt.Printf("%s: %s\n", args[0], done)
				return nil
			},
		}
	}
	nodes := func(use, short string, args cobra.PositionalArgs, done string, do func(context.Context, *lab.State, []string) error) *cobra.Command {
		return &cobra.Command{
			Use: use + " NODE...", Short: short, Args: args,
			RunE: func(cmd *cobra.Command, args []string) error {
				s, err := o.state(cmd.Context())
				if err != nil {
					return err
				}
				if err := do(cmd.Context(), s, args); err != nil {
					return err
				}
				which := strings.Join(args, ", ")
				if which == "" {
					which = "every worker"
				}
				fmt.Printf("%s: %s\n", which, done)
				return nil
			},
		}
	}
	return []*cobra.Command{
		node("kill-speaker", "Kill a node's speaker with SIGKILL", "speaker killed (SIGKILL)",
			func(_ context.Context, s *lab.State, n string) error { return s.KillSpeaker(n) }),
		node("stop-speaker", "Stop a node's speaker with SIGTERM and wait for it to exit", "speaker stopped (SIGTERM)",
			func(_ context.Context, s *lab.State, n string) error { return s.StopSpeaker(n) }),
		node("freeze-speaker", "Freeze a node's speaker with SIGSTOP (a paused VM or container); thaw-speaker lets it run again", "speaker frozen (SIGSTOP)",
			func(_ context.Context, s *lab.State, n string) error { return s.FreezeSpeaker(n) }),
		node("thaw-speaker", "Let a speaker frozen by freeze-speaker run again (SIGCONT)", "speaker thawed (SIGCONT)",
			func(_ context.Context, s *lab.State, n string) error { return s.ThawSpeaker(n) }),
		node("start-speaker", "Start a node's speaker again and wait until it is ready", "speaker started and ready",
			func(ctx context.Context, s *lab.State, n string) error { return s.StartSpeaker(ctx, n) }),
		node("kill-node", "Kill a whole node: its cable pulled, its speaker and agent (kubelet stand-in, pods) killed with SIGKILL; NotReady after 50 s",
			"node killed (cable out, speaker and agent SIGKILL)",
			func(ctx context.Context, s *lab.State, n string) error { return s.KillNode(ctx, n) }),
		node("start-node", "Boot a killed node again: cable in, agent (pods, Lease, Ready), then speaker", "node started, Ready, speaker ready",
			func(ctx context.Context, s *lab.State, n string) error { return s.StartNode(ctx, n) }),
		node("link-down", "Pull a node's cable (its bridge port goes down)", "link down",
			func(ctx context.Context, s *lab.State, n string) error { return s.LinkDown(ctx, n) }),
		node("link-up", "Plug a node's cable back in", "link up",
			func(ctx context.Context, s *lab.State, n string) error { return s.LinkUp(ctx, n) }),
		nodes("partition", "Drop a node's memberlist traffic (port 7946, TCP and UDP, both ways) inside its namespace",
			cobra.MinimumNArgs(1), "memberlist cut off from every peer",
			func(ctx context.Context, s *lab.State, ns []string) error { return s.PartitionMemberlist(ctx, ns...) }),
		nodes("heal", "Remove the rules partition and split put in the nodes' namespaces (every worker's when none is named)",
			cobra.ArbitraryArgs, "memberlist rules removed",
			func(ctx context.Context, s *lab.State, ns []string) error {
				if len(ns) == 0 {
					for _, w := range s.Workers() {
						ns = append(ns, w.Name)
					}
				}
				return s.HealMemberlist(ctx, ns...)
			}),
		{
			Use:   "split NODE[,NODE...] NODE[,NODE...]",
			Short: "Cut memberlist between two groups of nodes only (e.g. split worker,worker2 worker3,worker4)",
			Args:  cobra.ExactArgs(2),
			RunE: func(cmd *cobra.Command, args []string) error {
				s, err := o.state(cmd.Context())
				if err != nil {
					return err
				}
				a, b := strings.Split(args[0], ","), strings.Split(args[1], ",")
				if err := s.SplitMemberlist(cmd.Context(), a, b); err != nil {
					return err
				}
				fmt.Printf("memberlist cut between %s and %s\n", args[0], args[1])
				return nil
			},
		},
		{
			Use:   "death-rumour TO ABOUT",
			Short: "Tell TO's speaker, in one memberlist packet, that ABOUT's speaker is dead: what a node back from a partition gossips (ABOUT refutes it)",
			Args:  cobra.ExactArgs(2),
			RunE: func(cmd *cobra.Command, args []string) error {
				s, err := o.state(cmd.Context())
				if err != nil {
					return err
				}
				if err := s.SpreadDeathRumour(cmd.Context(), args[0], args[1], "herald-lab"); err != nil {
					return err
				}
				fmt.Printf("%s told that %s is dead\n", args[0], args[1])
				return nil
			},
		},
		{
			Use: "restart-controller", Short: "Stop herald's controller with SIGTERM and start it again", Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				s, err := o.state(cmd.Context())
				if err != nil {
					return err
				}
				if err := s.RestartController(cmd.Context()); err != nil {
					return err
				}
				fmt.Println("controller restarted and ready")
				return nil
			},
		},
	}
}
