package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestWritePage checks the whole page of a small command tree: sections in help
// order, persistent flags once under their command, shorthands, escaped cells, and
// hidden commands and flags, help and flagless commands left out.
func TestWritePage(t *testing.T) {
	root := &cobra.Command{Use: "herald"}
	run := func(*cobra.Command, []string) {}
	key := &cobra.Command{Use: "memberlist-key", Short: "Edit the key"}
	key.PersistentFlags().String("secret", "herald-memberlist", "the Secret")
	key.AddCommand(&cobra.Command{Use: "rotate", Short: "Rotate", Run: run})
	speaker := &cobra.Command{Use: "speaker", Short: "Announce IPs.", Run: run}
	speaker.Flags().String("exclude-interfaces", "^(lo|veth.*)$", "interfaces never\nanswered on")
	speaker.Flags().IntP("v", "v", 0, "verbosity")
	speaker.Flags().StringSlice("peers", nil, "extra peers")
	speaker.Flags().String("secret-path", "", "hidden one")
	_ = speaker.Flags().MarkHidden("secret-path")
	root.AddCommand(speaker, key, &cobra.Command{Use: "secret", Hidden: true, Run: run})

	var b bytes.Buffer
	writePage(&b, root)
	got, ok := strings.CutPrefix(b.String(), header)
	if !ok {
		t.Fatalf("page does not start with the header:\n%s", b.String())
	}
	want := "\n## `herald memberlist-key`\n\nEdit the key.\n\n" +
		"These flags apply to every `herald memberlist-key` subcommand.\n\n" +
		"| flag | default | meaning |\n|---|---|---|\n" +
		"| `--secret` | `herald-memberlist` | the Secret |\n" +
		"\n## `herald speaker`\n\nAnnounce IPs.\n\n" +
		"| flag | default | meaning |\n|---|---|---|\n" +
		"| `--exclude-interfaces` | `^(lo\\|veth.*)$` | interfaces never answered on |\n" +
		"| `--peers` | (none) | extra peers |\n" +
		"| `-v`, `--v` | `0` | verbosity |\n"
	if got != want {
		t.Errorf("page after the header:\n%s\nwant:\n%s", got, want)
	}
}
