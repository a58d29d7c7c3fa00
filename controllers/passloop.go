package controllers

import (
	"context"
	"time"

	"github.com/go-logr/logr"
)

// kicker wakes a pass loop: a poke between two passes is one more pass, however many
// pokes came.
type kicker chan struct{}

func newKicker() kicker { return make(kicker, 1) }

// poke asks for a pass; it has the shape of an informer's handler.
func (k kicker) poke(any) {
	select {
	case k <- struct{}{}:
	default:
	}
}

// runPasses runs pass at once, then on each poke of k and when the last pass asked
// (the time it returned, by now's clock), until ctx ends. A pass that fails is logged
// as what and tried again after retry.
func runPasses(ctx context.Context, k kicker, pass func(context.Context) (time.Time, error), now func() time.Time, retry time.Duration, log logr.Logger, what string) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-k:
		case <-timer.C:
		}
		next, err := pass(ctx)
		if err != nil {
			log.Error(err, what+"; retrying")
			next = now().Add(retry)
		}
		timer.Reset(max(next.Sub(now()), 0))
	}
}
