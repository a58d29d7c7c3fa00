// Command herald runs herald's components: `herald controller`, `herald speaker`,
// `herald status` and `herald version`.
package main

import (
	"os"

	"herald.dev/herald/cmd/herald/app"
)

func main() {
	if err := app.NewRootCommand().Execute(); err != nil {
		os.Exit(1)
	}
}
