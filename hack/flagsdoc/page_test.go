package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func TestWritePage(t *testing.T) {
	root := &cobra.Command{Use: "herald"}
	run := func(*cobra.Command, []string) {}
	key := &cobra.Command{Use: "memberlist-key", Short: "Edit the key"}
	key.PersistentFlags().String("secret", "herald-memberlist", "the Secret")
	key.AddCommand(&cobra.Command{Use: "rotate", Short: "Rotate", Run: run})
	speaker := &cobra.Command{Use: "speaker", Short: "Announce IPs.", Run: run}
	speaker.Flags().String("exclude-interfaces", "^(lo|veth.*)$", "interfaces never\nanswered on")
	speaker.Flags().IntP("v", "v", 0, "verbosity")
	speaker.Flags().String("node-name", "", "this node")
	speaker.Flags().String("secret-path", "", "hidden one")
	_ = speaker.Flags().MarkHidden("secret-path")
	root.AddCommand(speaker, key, &cobra.Command{Use: "secret", Hidden: true, Run: run})

	var b bytes.Buffer
	writePage(&b, root)
	got := b.String()
	for _, want := range []string{
		"## `herald memberlist-key`\n\nEdit the key.\n\nThese flags apply to every `herald memberlist-key` subcommand.",
		"| `--secret` | `herald-memberlist` | the Secret |",
		"## `herald speaker`\n\nAnnounce IPs.\n",
		"| `--exclude-interfaces` | `^(lo\\|veth.*)$` | interfaces never answered on |",
		"| `-v`, `--v` | `0` | verbosity |",
		"| `--node-name` | (none) | this node |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("page lacks %q:\n%s", want, got)
		}
	}
	for _, absent := range []string{"rotate", "secret-path", "| `-h`", "## `herald`\n"} {
		if strings.Contains(got, absent) {
			t.Errorf("page has %q, which it should leave out:\n%s", absent, got)
		}
	}
}
