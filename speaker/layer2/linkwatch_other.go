//go:build !linux

package layer2

import "context"

// watchLinks is Linux-only; elsewhere responders follow interfaces by periodic scans.
func watchLinks(ctx context.Context, _ func()) error {
	<-ctx.Done()
	return nil
}
