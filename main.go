// Command herald runs herald's components: `herald controller`, `herald speaker`,
// `herald status` and `herald version`.
package main

import (
	"os"

	"herald.dev/herald/internal/cli"
)

func main() {
	if err := cli.NewRootCommand().Execute(); err != nil {
		os.Exit(1)
	}
}
