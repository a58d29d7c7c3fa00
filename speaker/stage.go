package speaker

import (
	"context"
	"sync"
)

// stage is one part of a running speaker (the manager, the proxier, the responders, the
// records) on a context of its own. A stage outlives Run's context: on SIGTERM, Run
// stops the stages itself, in the order a graceful stop needs (responders after the
// memberlist Leave, the proxier's rules left in place).
type stage struct {
	cancel context.CancelFunc
	done   chan struct{}
	err    error
	once   sync.Once
}

// startStage runs run on a context that ctx's cancel does not reach.
func startStage(ctx context.Context, run func(context.Context) error) *stage {
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	st := &stage{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(st.done)
		st.err = run(sctx)
	}()
	return st
}

// stop cancels the stage, waits for it to end and returns its error. Later calls wait
// and return the same error.
func (st *stage) stop() error {
	st.once.Do(st.cancel)
	<-st.done
	return st.err
}
