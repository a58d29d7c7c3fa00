package labtest

import (
	"bytes"
	"context"
	"fmt"

	"herald.dev/herald/internal/lab"
	"herald.dev/herald/internal/lab/netlab"
)

// UpLab builds the full lab of `make demo` (lab.Up) with the given prefix and workers in
// runDir, first removing what an earlier run left there. It takes no test: suites share
// one such lab across tests, and the caller removes it (lab.Down). Its error holds Up's
// progress.
func UpLab(ctx context.Context, prefix, runDir string, workers int) (*lab.Lab, error) {
	if err := netlab.Check(); err != nil {
		return nil, fmt.Errorf("the full lab needs network namespaces: %w", err)
	}
	assets, err := netlab.Assets()
	if err != nil {
		return nil, err
	}
	if err := lab.Down(runDir, prefix); err != nil {
		return nil, fmt.Errorf("removing an earlier run's lab: %w", err)
	}
	var progress bytes.Buffer
	l, err := lab.Up(ctx, lab.Config{Prefix: prefix, RunDir: runDir, Workers: workers, Assets: assets, Log: &progress})
	if err != nil {
		return nil, fmt.Errorf("%w\nprogress:\n%s", err, progress.String())
	}
	return l, nil
}
