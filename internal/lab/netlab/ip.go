package netlab

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// cmdTimeout bounds every command Run runs (ip, iptables, kubectl): they are all quick,
// and a hung one should fail the test that asked rather than the whole run.
const cmdTimeout = 30 * time.Second

// ip runs the ip command with args and returns its standard output; an error carries
// the command line and whatever it printed.
func ip(args ...string) ([]byte, error) { return Run(context.Background(), "ip", args...) }

// Run runs a command for its standard output, bounded by ctx and by cmdTimeout; an
// error carries the command line and whatever it printed.
func Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, cmdTimeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()+stdout.String()))
	}
	return stdout.Bytes(), nil
}

// Namespaces lists the network namespaces of a lab with this prefix, those named
// <prefix>[a-z0-9]+ (ownedBy), which pod namespaces follow too.
func Namespaces(prefix string) ([]string, error) {
	all, err := namespaces()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, ns := range all {
		if ownedBy(prefix, ns) {
			out = append(out, ns)
		}
	}
	return out, nil
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
