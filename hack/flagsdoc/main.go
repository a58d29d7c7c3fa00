// Command flagsdoc writes docs/flags.md, a table of every flag of every herald
// subcommand, read from the command tree itself so that the page cannot drift from
// the code. `make docs` runs it; `make verify-generated` fails when the page is stale.
package main

import (
	"bytes"
	"fmt"
	"os"

	"herald.dev/herald/cmd/herald/app"
)

// envDefaults are the variables some defaults are read from (the Pod's namespace, the
// node's name and IP): the page shows the defaults of a machine that sets none.
var envDefaults = []string{"POD_NAMESPACE", "NODE_NAME", "NODE_IP"}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: flagsdoc OUTPUT.md")
		os.Exit(2)
	}
	for _, v := range envDefaults {
		os.Unsetenv(v)
	}
	var b bytes.Buffer
	writePage(&b, app.NewRootCommand())
	if err := os.WriteFile(os.Args[1], b.Bytes(), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "flagsdoc:", err)
		os.Exit(1)
	}
}
