package labtest

import (
	"bytes"
	"context"
	"fmt"

	"herald.dev/herald/internal/lab"
	"herald.dev/herald/internal/lab/netlab"
)

// UpLab builds the full lab of `make demo` (lab.Up) as cfg says (its Prefix, RunDir,
// Workers, SpeakerArgs, WithoutHerald), first removing what an earlier run left in
// cfg.RunDir. It takes no test: suites share
// one such lab across tests, and the caller removes it (lab.Down). Its error holds Up's
// progress.
func UpLab(ctx context.Context, cfg lab.Config) (*lab.Lab, error) {
	if err := netlab.Check(); err != nil {
		return nil, fmt.Errorf("the full lab needs network namespaces: %w", err)
	}
	assets, err := netlab.Assets()
	if err != nil {
		return nil, err
	}
	if err := lab.Down(cfg.RunDir, cfg.Prefix); err != nil {
		return nil, fmt.Errorf("removing an earlier run's lab: %w", err)
	}
	var progress bytes.Buffer
	cfg.Assets, cfg.Log = assets, &progress
	l, err := lab.Up(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("%w\nprogress:\n%s", err, progress.String())
	}
	return l, nil
}
