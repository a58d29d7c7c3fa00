package netlab

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// ipTimeout bounds every `ip` invocation: they are all quick, and a hung one should fail
// the test that asked rather than the whole run.
const ipTimeout = 30 * time.Second

// ip runs the ip command with args and returns its standard output; an error carries
// the command line and whatever it printed.
func ip(args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), ipTimeout)
	defer cancel()
	return run(ctx, "ip", args...)
}

func run(ctx context.Context, name string, args ...string) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()+stdout.String()))
	}
	return stdout.Bytes(), nil
}

// namespaces lists the named network namespaces (those under /run/netns).
func namespaces() ([]string, error) {
	out, err := ip("netns", "list")
	if err != nil {
		return nil, err
	}
	var names []string
	for line := range strings.Lines(string(out)) {
		// Lines read "name" or "name (id: 3)".
		if f := strings.Fields(line); len(f) > 0 {
			names = append(names, f[0])
		}
	}
	return names, nil
}
