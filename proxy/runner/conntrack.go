package runner

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
)

// ErrNoConntrack means the conntrack binary (Debian package conntrack) is missing, so
// stale UDP flows cannot be deleted.
var ErrNoConntrack = errors.New("conntrack binary not found (install the conntrack package)")

// Conntrack deletes connection-tracking entries with the conntrack tool, as kube-proxy
// did before it moved to netlink (pkg/proxy/conntrack, v1.28).
type Conntrack struct {
	path string
	do   Do
}

// NewConntrack finds the conntrack binary; the error wraps ErrNoConntrack when it is
// missing.
func NewConntrack(do Do) (*Conntrack, error) {
	if do == nil {
		do = direct
	}
	path, err := exec.LookPath("conntrack")
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoConntrack, err)
	}
	return &Conntrack{path: path, do: do}, nil
}

// Delete runs `conntrack -D` with the given filter. Matching nothing is not an error
// (conntrack exits 1 saying "0 flow entries have been deleted").
func (c *Conntrack) Delete(ctx context.Context, filter ...string) error {
	args := append([]string{"-D"}, filter...)
	_, err := run(ctx, c.do, nil, c.path, args...)
	var ce *CommandError
	if errors.As(err, &ce) && strings.Contains(ce.Stderr, "0 flow entries have been deleted") {
		return nil
	}
	if err != nil {
		return fmt.Errorf("conntrack %s: %w", strings.Join(args, " "), err)
	}
	return nil
}
