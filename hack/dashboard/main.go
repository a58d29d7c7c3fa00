// Command dashboard writes herald's Grafana dashboard, config/grafana/herald-dashboard.json,
// from the panels this package defines with grafana-foundation-sdk. With -check it writes
// nothing and fails when the file differs from what it would write (make verify-generated).
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
)

func main() {
	out := flag.String("o", "config/grafana/herald-dashboard.json", "the dashboard file to write (or check)")
	check := flag.Bool("check", false, "fail when the file differs from the generated dashboard instead of writing it")
	flag.Parse()
	if err := run(*out, *check); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(path string, check bool) error {
	want, err := render()
	if err != nil {
		return fmt.Errorf("generating the dashboard: %w", err)
	}
	if !check {
		return os.WriteFile(path, want, 0o644)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%w: run 'make dashboard'", err)
	}
	if !bytes.Equal(got, want) {
		return fmt.Errorf("%s differs from what hack/dashboard generates (first at line %d): edit hack/dashboard, run 'make dashboard' and commit the result", path, firstDifferentLine(got, want))
	}
	return nil
}

// firstDifferentLine is the 1-based number of the first line where a and b differ.
func firstDifferentLine(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	return bytes.Count(a[:i], []byte("\n")) + 1
}
